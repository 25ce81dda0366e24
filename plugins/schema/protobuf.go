package schema

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoSchema is a .proto file compiled by protocompile, with the files it
// imports (schema references, and Google's well-known types).
type protoSchema struct {
	file protoreflect.FileDescriptor
}

// mainProto is the name the schema's own text is compiled under; references
// are compiled under their reference names, which are their import paths.
const mainProto = "streamd-schema.proto"

// compileProto compiles text with files (import path -> text) for its
// imports. Nothing is read from disk. A text may be .proto source or, as
// Confluent's serializers register it (and its registry serves it with
// ?format=serialized), a base64 FileDescriptorProto.
func compileProto(ctx context.Context, text string, files map[string]string) (*protoSchema, error) {
	find := func(path string) (protocompile.SearchResult, error) {
		t, ok := files[path]
		if path == mainProto {
			t, ok = text, true
		}
		if !ok {
			return protocompile.SearchResult{}, fmt.Errorf("import %q is not among the schema's references", path)
		}
		if fd := serializedDescriptor(t); fd != nil {
			fd.Name = proto.String(path)
			return protocompile.SearchResult{Proto: fd}, nil
		}
		return protocompile.SearchResult{Source: strings.NewReader(t)}, nil
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(find))}
	fs, err := c.Compile(ctx, mainProto)
	if err != nil {
		return nil, err
	}
	return &protoSchema{file: fs[0]}, nil
}

// serializedDescriptor returns the FileDescriptorProto that t encodes in
// base64, or nil if t is not one (then it is .proto source).
func serializedDescriptor(t string) *descriptorpb.FileDescriptorProto {
	t = strings.TrimSpace(t)
	if t == "" || strings.ContainsAny(t, " \n\t;{") {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(t)
	if err != nil {
		return nil
	}
	fd := &descriptorpb.FileDescriptorProto{}
	if proto.Unmarshal(b, fd) != nil {
		return nil
	}
	// protoc fills in every field's json_name; descriptors made by other
	// tools (Confluent's Python serializer) may leave it out, and the
	// linker then takes "" for a custom name shared by every field.
	var fill func(ms []*descriptorpb.DescriptorProto)
	fill = func(ms []*descriptorpb.DescriptorProto) {
		for _, m := range ms {
			for _, f := range m.Field {
				if f.JsonName == nil {
					f.JsonName = proto.String(jsonCamel(f.GetName()))
				}
			}
			fill(m.NestedType)
		}
	}
	fill(fd.MessageType)
	return fd
}

// jsonCamel is protoc's default JSON name: underscores dropped, the letter
// after each one upper-cased.
func jsonCamel(s string) string {
	var b strings.Builder
	up := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_':
			up = true
		case up && 'a' <= c && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
			up = false
		default:
			b.WriteByte(c)
			up = false
		}
	}
	return b.String()
}

// message returns the message a Confluent message-index path names: the
// first index picks a top-level message, each further one a nested message
// of the one before.
func (s *protoSchema) message(idx []int) (protoreflect.MessageDescriptor, error) {
	msgs := s.file.Messages()
	var md protoreflect.MessageDescriptor
	for depth, i := range idx {
		if i >= msgs.Len() {
			return nil, fmt.Errorf("message index %v: %d of %d messages at depth %d", idx, i, msgs.Len(), depth)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	if md == nil {
		return nil, errors.New("empty message index")
	}
	return md, nil
}

// byName returns the message called name (full name, or the name in the
// file's package) and its index path; "" is the first message.
func (s *protoSchema) byName(name string) (protoreflect.MessageDescriptor, []int, error) {
	if name == "" {
		if s.file.Messages().Len() == 0 {
			return nil, nil, errors.New("the schema defines no message")
		}
		return s.file.Messages().Get(0), []int{0}, nil
	}
	full := protoreflect.FullName(name)
	if pkg := s.file.Package(); pkg != "" && !strings.HasPrefix(name, string(pkg)+".") {
		full = pkg.Append(protoreflect.Name(name))
		if strings.Contains(name, ".") {
			full = protoreflect.FullName(string(pkg) + "." + name)
		}
	}
	var walk func(msgs protoreflect.MessageDescriptors, path []int) (protoreflect.MessageDescriptor, []int)
	walk = func(msgs protoreflect.MessageDescriptors, path []int) (protoreflect.MessageDescriptor, []int) {
		for i := 0; i < msgs.Len(); i++ {
			m := msgs.Get(i)
			p := append(append([]int(nil), path...), i)
			if m.FullName() == full || m.FullName() == protoreflect.FullName(name) {
				return m, p
			}
			if r, rp := walk(m.Messages(), p); r != nil {
				return r, rp
			}
		}
		return nil, nil
	}
	m, p := walk(s.file.Messages(), nil)
	if m == nil {
		return nil, nil, fmt.Errorf("no message %q in the schema", name)
	}
	return m, p, nil
}

var (
	protoJSONOut = protojson.MarshalOptions{UseProtoNames: true}
	protoJSONIn  = protojson.UnmarshalOptions{}
	protoBinOut  = proto.MarshalOptions{Deterministic: true}
)

func decodeProto(dst []byte, md protoreflect.MessageDescriptor, data []byte) ([]byte, error) {
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(data, m); err != nil {
		return nil, err
	}
	return protoJSONOut.MarshalAppend(dst, m)
}

func encodeProto(dst []byte, md protoreflect.MessageDescriptor, js []byte) ([]byte, error) {
	m := dynamicpb.NewMessage(md)
	if err := protoJSONIn.Unmarshal(js, m); err != nil {
		return nil, err
	}
	return protoBinOut.MarshalAppend(dst, m)
}
