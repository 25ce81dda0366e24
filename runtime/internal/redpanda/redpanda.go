// Package redpanda encodes and decodes the bytes that cross Redpanda's
// data transforms ABI (the host imports of module redpanda_transform,
// version 2, and of module redpanda_schema_registry, version 0), as the
// guest side of the Apache-2.0 SDKs (redpanda-transform-sdk 1.1.0 and its
// Go counterpart) writes and reads them.
//
// Integers are zigzag varints (as Kafka record fields are); a byte string
// is a varint length followed by its bytes, length -1 for null:
//
//	record  := key:sized value:sized header_count:varint header{header_count}
//	header  := key:sized value:sized
//	options := 0x01 topic:sized                      ; write_record_with_options
//	schema  := format:varint text:sized ref_count:varint ref{ref_count}
//	ref     := name:sized subject:sized version:varint
//	subject_schema := id:varint version:varint schema
//
// Every decoder here reads bytes a guest wrote, so it refuses anything
// short, negative or past the end with an error that says where.
package redpanda

import (
	"errors"
	"fmt"

	"github.com/streamd/streamd/record"
)

// MaxVarintLen is the longest encoding of a varint.
const MaxVarintLen = 10

// AppendVarint appends v, zigzag-encoded.
func AppendVarint(dst []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// VarintLen is len(AppendVarint(nil, v)).
func VarintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// errShort is the error of an encoding that ends too soon.
var errShort = errors.New("ends too soon")

// Varint reads a zigzag varint from b and returns it and its length; n is
// 0 when b ends before the varint does, and -1 when it is longer than 10
// bytes.
func Varint(b []byte) (v int64, n int) {
	var u uint64
	var shift uint
	for i, c := range b {
		if i == MaxVarintLen {
			return 0, -1
		}
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
		shift += 7
	}
	return 0, 0
}

// AppendSized appends b with its length; a nil b is null (length -1).
func AppendSized(dst, b []byte) []byte {
	if b == nil {
		return AppendVarint(dst, -1)
	}
	return append(AppendVarint(dst, int64(len(b))), b...)
}

func sizedLen(b []byte) int {
	if b == nil {
		return 1
	}
	return VarintLen(int64(len(b))) + len(b)
}

// RecordSize is len(AppendRecord(nil, r)).
func RecordSize(r *record.Record) int {
	n := sizedLen(r.Key) + sizedLen(r.Value) + VarintLen(int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += VarintLen(int64(len(h.Key))) + len(h.Key) + sizedLen(h.Value)
	}
	return n
}

// AppendRecord appends the payload of r that read_next_record hands the
// guest: its key, value and headers (a header's key is never null).
func AppendRecord(dst []byte, r *record.Record) []byte {
	dst = AppendSized(dst, r.Key)
	dst = AppendSized(dst, r.Value)
	dst = AppendVarint(dst, int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		dst = append(AppendVarint(dst, int64(len(h.Key))), h.Key...)
		dst = AppendSized(dst, h.Value)
	}
	return dst
}

// reader reads the encodings above from b, keeping where it is for errors.
type reader struct {
	b   []byte
	off int
	err error
}

// fail records the first error: what (and suffix) at the current byte.
// The names are joined only then, so that reading costs no string.
func (r *reader) fail(what, suffix string, err error) {
	if r.err == nil {
		r.err = fmt.Errorf("%s%s at byte %d: %w", what, suffix, r.off, err)
	}
}

func (r *reader) varint(what, suffix string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := Varint(r.b[r.off:])
	switch {
	case n == 0:
		r.fail(what, suffix, errShort)
		return 0
	case n < 0:
		r.fail(what, suffix, errors.New("varint longer than 10 bytes"))
		return 0
	}
	r.off += n
	return v
}

// sized reads a byte string: nil for null, else a slice of r.b.
func (r *reader) sized(what string) []byte {
	n := r.varint(what, " length")
	switch {
	case r.err != nil:
		return nil
	case n == -1:
		return nil
	case n < -1:
		r.fail(what, "", fmt.Errorf("length %d", n))
		return nil
	case n > int64(len(r.b)-r.off):
		r.fail(what, "", fmt.Errorf("length %d with %d bytes left", n, len(r.b)-r.off))
		return nil
	}
	s := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *reader) count(what string) int {
	n := r.varint(what, "")
	if r.err == nil && (n < 0 || n > int64(len(r.b)-r.off)) { // each element takes a byte at least
		r.fail(what, "", fmt.Errorf("count %d with %d bytes left", n, len(r.b)-r.off))
		return 0
	}
	return int(n)
}

func (r *reader) end(what string) error {
	if r.err == nil && r.off != len(r.b) {
		r.fail(what, "", fmt.Errorf("%d bytes after its end", len(r.b)-r.off))
	}
	return r.err
}

// DecodeRecord parses a record payload the guest wrote (write_record)
// into key, value and headers. The bytes are copied: nothing returned
// shares memory with b.
func DecodeRecord(b []byte) (key, value []byte, headers []record.Header, err error) {
	own := append([]byte(nil), b...)
	r := &reader{b: own}
	key = r.sized("key")
	value = r.sized("value")
	n := r.count("header count")
	if n > 0 {
		headers = make([]record.Header, 0, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		k := r.sized("header key")
		v := r.sized("header value")
		headers = append(headers, record.Header{Key: string(k), Value: v})
	}
	if err := r.end("record"); err != nil {
		return nil, nil, nil, err
	}
	return key, value, headers, nil
}

// OptionTopic is the key of the topic in write options.
const OptionTopic = 0x01

// DecodeOptions parses the options of write_record_with_options: the
// topic the record goes to.
func DecodeOptions(b []byte) (topic string, err error) {
	if len(b) == 0 {
		return "", errors.New("write options: empty")
	}
	if b[0] != OptionTopic {
		return "", fmt.Errorf("write options: unknown option %#x at byte 0", b[0])
	}
	r := &reader{b: b, off: 1}
	t := r.sized("write options: topic")
	if err := r.end("write options"); err != nil {
		return "", err
	}
	if t == nil {
		return "", errors.New("write options: the topic is null")
	}
	return string(t), nil
}

// Schema formats, as the schema registry ABI numbers them.
const (
	FormatAvro     = 0
	FormatProtobuf = 1
	FormatJSON     = 2
)

// Reference is a schema's reference to another subject's version.
type Reference struct {
	Name, Subject string
	Version       int
}

// Schema is a schema definition as the schema registry ABI carries it.
type Schema struct {
	Format     int
	Text       string
	References []Reference
}

// AppendSchema appends s's definition.
func AppendSchema(dst []byte, s *Schema) []byte {
	dst = AppendVarint(dst, int64(s.Format))
	dst = append(AppendVarint(dst, int64(len(s.Text))), s.Text...)
	dst = AppendVarint(dst, int64(len(s.References)))
	for _, ref := range s.References {
		dst = append(AppendVarint(dst, int64(len(ref.Name))), ref.Name...)
		dst = append(AppendVarint(dst, int64(len(ref.Subject))), ref.Subject...)
		dst = AppendVarint(dst, int64(ref.Version))
	}
	return dst
}

// AppendSubjectSchema appends a subject's schema: its id, version and
// definition.
func AppendSubjectSchema(dst []byte, id, version int, s *Schema) []byte {
	dst = AppendVarint(dst, int64(id))
	dst = AppendVarint(dst, int64(version))
	return AppendSchema(dst, s)
}

// DecodeSchema parses a schema definition the guest wrote
// (create_subject_schema).
func DecodeSchema(b []byte) (Schema, error) {
	r := &reader{b: b}
	var s Schema
	s.Format = int(r.varint("schema format", ""))
	if r.err == nil && (s.Format < FormatAvro || s.Format > FormatJSON) {
		return Schema{}, fmt.Errorf("schema format %d at byte 0: want 0 (Avro), 1 (Protobuf) or 2 (JSON)", s.Format)
	}
	s.Text = string(r.sized("schema"))
	n := r.count("reference count")
	for i := 0; i < n && r.err == nil; i++ {
		var ref Reference
		ref.Name = string(r.sized("reference name"))
		ref.Subject = string(r.sized("reference subject"))
		v := r.varint("reference version", "")
		if r.err == nil && (v < -1 || v > 1<<31-1) {
			r.fail("reference version", "", fmt.Errorf("%d", v))
		}
		ref.Version = int(v)
		s.References = append(s.References, ref)
	}
	if err := r.end("schema"); err != nil {
		return Schema{}, err
	}
	return s, nil
}
