package schema

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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
// imports. Nothing is read from disk.
func compileProto(ctx context.Context, text string, files map[string]string) (*protoSchema, error) {
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: func(path string) (io.ReadCloser, error) {
				if path == mainProto {
					return io.NopCloser(strings.NewReader(text)), nil
				}
				if t, ok := files[path]; ok {
					return io.NopCloser(strings.NewReader(t)), nil
				}
				return nil, fmt.Errorf("import %q is not among the schema's references", path)
			},
		}),
	}
	fs, err := c.Compile(ctx, mainProto)
	if err != nil {
		return nil, err
	}
	return &protoSchema{file: fs[0]}, nil
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
