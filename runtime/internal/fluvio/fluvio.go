// Package fluvio encodes and decodes the bytes that cross the SmartModule
// ABI of Fluvio (the crate fluvio-smartmodule 0.50.1 and the
// fluvio-protocol types it uses, Apache-2.0), at SmartModule API version
// 22, the one those crates write and read.
//
// Fixed-size integers are big-endian; a String is a u16 length and its
// bytes; a Vec is a u32 count and its elements; an Option is a byte (0 or
// 1) and, if 1, the value; RecordData is a zigzag varint length and its
// bytes. A record is
//
//	record := length:varint attributes:i8 timestamp_delta:varint offset_delta:varint
//	          key:Option<RecordData> value:RecordData header_count:varint
//
// (Fluvio records carry a header count but no headers; it is always 0
// here). The input of filter, map, filter_map and array_map is
//
//	input := base_offset:i64 records:Vec<u8> params:Params join_record:Vec<u8> base_timestamp:i64
//	params := count:u16 (key:String value:String){count} lookback:Option<...>
//
// where records holds a Vec<Record>; their output (copy_records) is
//
//	output := successes:Vec<Record> error:Option<RuntimeError>
//	RuntimeError := hint:String offset:i64 kind:u8 record_key:Option<RecordData> record_value:RecordData
//
// and init's input is params alone, its error output a hint:String.
// Every decoder here reads bytes a guest wrote, so it refuses anything
// short or past the end with an error that says where.
package fluvio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Version is the SmartModule API version the host passes the guest, and
// encodes and decodes at (SMARTMODULE_TIMESTAMPS_VERSION of
// fluvio-smartmodule 0.50.1).
const Version = 22

// Record is one record in or out of a SmartModule. A nil Key is no key.
type Record struct {
	TimestampDelta int64
	OffsetDelta    int64
	Key            []byte
	Value          []byte
}

// Param is one SmartModule parameter.
type Param struct{ Key, Value string }

// Input is the input of filter, map, filter_map and array_map.
type Input struct {
	BaseOffset    int64
	BaseTimestamp int64
	Params        []Param // sorted by Key
	Records       []Record
}

// AppendVarint appends v, zigzag-encoded.
func AppendVarint(dst []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// varintLen is the length of v zigzag-encoded.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		n++
		u >>= 7
	}
	return n
}

func appendString(dst []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint16(dst, uint16(len(s))), s...)
}

func appendData(dst, b []byte) []byte {
	return append(AppendVarint(dst, int64(len(b))), b...)
}

// AppendParams appends params (sorted by key) with no lookback: a
// SmartModuleExtraParams, and so init's whole input.
func AppendParams(dst []byte, params []Param) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(params)))
	for _, p := range params {
		dst = appendString(dst, p.Key)
		dst = appendString(dst, p.Value)
	}
	return append(dst, 0) // lookback: None
}

// AppendRecord appends r.
func AppendRecord(dst []byte, r *Record) []byte {
	var body [3 * 10]byte
	b := append(body[:0], 0) // attributes
	b = AppendVarint(b, r.TimestampDelta)
	b = AppendVarint(b, r.OffsetDelta)
	n := len(b) + 1 + 1 // the key's option byte, the header count
	if r.Key != nil {
		n += varintLen(int64(len(r.Key))) + len(r.Key)
	}
	n += varintLen(int64(len(r.Value))) + len(r.Value)
	dst = AppendVarint(dst, int64(n))
	dst = append(dst, b...)
	if r.Key == nil {
		dst = append(dst, 0)
	} else {
		dst = appendData(append(dst, 1), r.Key)
	}
	dst = appendData(dst, r.Value)
	return append(dst, 0) // no headers
}

// AppendInput appends in.
func AppendInput(dst []byte, in *Input) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(in.BaseOffset))
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0) // the length of the records' bytes, below
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(in.Records)))
	for i := range in.Records {
		dst = AppendRecord(dst, &in.Records[i])
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	dst = AppendParams(dst, in.Params)
	dst = append(dst, 0, 0, 0, 0) // join_record: empty
	return binary.BigEndian.AppendUint64(dst, uint64(in.BaseTimestamp))
}

// SortParams sorts params by key, as the guest's BTreeMap keeps them.
func SortParams(params []Param) {
	slices.SortFunc(params, func(a, b Param) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
}

// Kind names a SmartModule kind by the number an error carries.
func Kind(k uint8) string {
	switch k {
	case 0:
		return "filter"
	case 1:
		return "map"
	case 2:
		return "array_map"
	case 3:
		return "aggregate"
	case 4:
		return "filter_map"
	case 5:
		return "join"
	case 6:
		return "generic"
	}
	return fmt.Sprintf("kind %d", k)
}

// RuntimeError is the error a SmartModule reports for the record it
// stopped at.
type RuntimeError struct {
	Hint   string
	Offset int64
	Kind   uint8
}

// Output is what filter, map, filter_map and array_map hand back.
type Output struct {
	Records []Record
	Err     *RuntimeError
}

var errShort = errors.New("ends too soon")

type reader struct {
	b   []byte
	off int
	err error
	// rec is the record being read (-1: none), for errors: the names of
	// what is read are joined with it only when something fails.
	rec int
}

func (r *reader) fail(what string, err error) {
	if r.err == nil {
		if r.rec >= 0 {
			what = fmt.Sprintf("record %d %s", r.rec, what)
		}
		r.err = fmt.Errorf("%s at byte %d: %w", what, r.off, err)
	}
}

func (r *reader) take(what string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.fail(what, errShort)
		return nil
	}
	s := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return s
}

func (r *reader) u8(what string) uint8 {
	if b := r.take(what, 1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16(what string) uint16 {
	if b := r.take(what, 2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if b := r.take(what, 4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) i64(what string) int64 {
	if b := r.take(what, 8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	var u uint64
	var shift uint
	for i := 0; ; i++ {
		if r.off+i >= len(r.b) {
			r.fail(what, errShort)
			return 0
		}
		if i == 10 {
			r.fail(what, errors.New("varint longer than 10 bytes"))
			return 0
		}
		c := r.b[r.off+i]
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			r.off += i + 1
			return int64(u>>1) ^ -int64(u&1)
		}
		shift += 7
	}
}

func (r *reader) data(what, lengthWhat string) []byte {
	n := r.varint(lengthWhat)
	if r.err == nil && (n < 0 || n > int64(len(r.b)-r.off)) {
		r.fail(what, fmt.Errorf("length %d with %d bytes left", n, len(r.b)-r.off))
		return nil
	}
	b := r.take(what, int(n))
	if b == nil && r.err == nil {
		b = []byte{}
	}
	return b
}

func (r *reader) option(what string) bool {
	switch v := r.u8(what); {
	case r.err != nil:
	case v == 0:
		return false
	case v == 1:
		return true
	default:
		r.fail(what, fmt.Errorf("option byte %d, want 0 or 1", v))
	}
	return false
}

func (r *reader) string(what, lengthWhat string) string {
	n := r.u16(lengthWhat)
	return string(r.take(what, int(n)))
}

func (r *reader) record(i int) Record {
	r.rec = i
	defer func() { r.rec = -1 }()
	n := r.varint("length")
	if r.err == nil && (n < 0 || n > int64(len(r.b)-r.off)) {
		r.fail("length", fmt.Errorf("length %d with %d bytes left", n, len(r.b)-r.off))
	}
	if r.err != nil {
		return Record{}
	}
	end := r.off + int(n)
	sub := reader{b: r.b[:end], off: r.off, rec: i}
	var rec Record
	sub.u8("attributes")
	rec.TimestampDelta = sub.varint("timestamp delta")
	rec.OffsetDelta = sub.varint("offset delta")
	if sub.option("key") {
		rec.Key = sub.data("key", "key length")
	}
	rec.Value = sub.data("value", "value length")
	sub.varint("header count")
	if sub.err != nil {
		r.err = sub.err
		return Record{}
	}
	r.off = end
	return rec
}

// DecodeOutput parses the output of filter, map, filter_map or
// array_map. Its records' keys and values are slices of b.
func DecodeOutput(b []byte) (Output, error) {
	r := &reader{b: b, rec: -1}
	var out Output
	n := r.u32("record count")
	if r.err == nil && uint64(n) > uint64(len(b)-r.off) { // a record takes a byte at least
		r.fail("record count", fmt.Errorf("%d records with %d bytes left", n, len(b)-r.off))
	}
	if r.err == nil && n > 0 {
		out.Records = make([]Record, 0, n)
	}
	for i := 0; i < int(n) && r.err == nil; i++ {
		out.Records = append(out.Records, r.record(i))
	}
	if r.option("error") {
		e := &RuntimeError{}
		e.Hint = r.string("error hint", "error hint length")
		e.Offset = r.i64("error offset")
		e.Kind = r.u8("error kind")
		if r.option("error record key") {
			r.data("error record key", "error record key length")
		}
		r.data("error record value", "error record value length")
		out.Err = e
	}
	if r.err == nil && r.off != len(b) {
		r.fail("output", fmt.Errorf("%d bytes after its end", len(b)-r.off))
	}
	if r.err != nil {
		return Output{}, r.err
	}
	return out, nil
}

// DecodeInitError parses the output of a failed init: its hint.
func DecodeInitError(b []byte) (string, error) {
	r := &reader{b: b, rec: -1}
	hint := r.string("init error hint", "init error hint length")
	if r.err == nil && r.off != len(b) {
		r.fail("init error", fmt.Errorf("%d bytes after its end", len(b)-r.off))
	}
	return hint, r.err
}
