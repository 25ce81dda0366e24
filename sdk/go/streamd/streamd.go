package streamd

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/streamd/streamd/sdk/go/streamd/abi"
)

// ABIVersion is the host ABI version this SDK speaks.
const ABIVersion = 1

// Header is one record header; a nil Value is null.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record. A nil Key or Value is null.
type Record struct {
	Key     []byte
	Value   []byte
	Headers []Header
	// Timestamp is milliseconds since the Unix epoch, -1 for none.
	Timestamp int64
	// Partition and Offset say where the record was read (-1 if unknown);
	// they are ignored in output records.
	Partition int32
	Offset    int64
}

// Header returns the value of the last header named key.
func (r *Record) Header(key string) ([]byte, bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return r.Headers[i].Value, true
		}
	}
	return nil, false
}

// SetHeader removes every header named key and appends one with value.
// The new header list lives in storage the SDK reuses once the plugin
// function returns, like the input records themselves.
func (r *Record) SetHeader(key string, value []byte) {
	hs := registered.scratch
	start := len(hs)
	for _, h := range r.Headers {
		if h.Key != key {
			hs = append(hs, h)
		}
	}
	hs = append(hs, Header{Key: key, Value: value})
	registered.scratch = hs
	r.Headers = hs[start:len(hs):len(hs)]
}

// One returns a slice holding just r, in storage the SDK reuses once the
// plugin function returns: the cheap way for a TransformFunc to return one
// record (allocation is expensive in a Go guest).
func One(r Record) []Record {
	registered.one[0] = r
	return registered.one[:1:1]
}

// Manifest names a plugin; the kind comes from the registration function.
type Manifest struct {
	Name    string
	Version string
}

// Op says what the host asks of a batch.
type Op = abi.Op

// The ops of ABI v1 (package abi has the ABI's numbers, for the host too).
const (
	OpTransform = abi.OpTransform
	OpEncode    = abi.OpEncode
	OpDecode    = abi.OpDecode
	OpWrite     = abi.OpWrite
)

// Call statuses.
const (
	StatusOK          = abi.StatusOK
	StatusBatch       = abi.StatusBatch
	StatusUnsupported = abi.StatusUnsupported
	StatusConfig      = abi.StatusConfig
	StatusInternal    = abi.StatusInternal
)

// KeepRecord is returned by a TransformFunc to pass the input record on
// unchanged. It is a signal, not a failure, hence not named ErrKeep.
var KeepRecord = errors.New("keep the record unchanged") //nolint:staticcheck // ST1012: the SDK's published name

type batchError struct{ err error }

func (e batchError) Error() string { return e.err.Error() }
func (e batchError) Unwrap() error { return e.err }

// BatchError wraps err so that returning it fails the whole batch
// (ERR_BATCH) instead of rejecting one record.
func BatchError(err error) error { return batchError{err} }

// TransformFunc turns one record into zero or more records.
type TransformFunc func(r *Record) ([]Record, error)

// CodecFunc encodes or decodes one payload. It is not called for a null
// payload (a tombstone), which stays null; the payload it returns is a
// value even when nil or empty.
type CodecFunc func(payload []byte) ([]byte, error)

// SinkFunc writes one record durably; an error means it was not written.
type SinkFunc func(r *Record) error

// plugin is what the guest registered. A Wasm instance runs one plugin, so
// this is the instance's state.
type plugin struct {
	manifest  []byte
	transform TransformFunc
	encode    CodecFunc
	decode    CodecFunc
	sink      SinkFunc
	init      func(config []byte) error

	recs    []Record
	hdrs    []Header
	out     []byte
	names   []string  // header names of the last record, by index
	scratch []Header  // SetHeader's storage, reset for each input record
	one     [1]Record // One's storage
}

// name returns header name b, the j-th of its record, as a string. Records
// of a stream mostly carry the same names in the same order, so it first
// compares with the j-th name of the previous record: no allocation then.
func (p *plugin) name(j int, b []byte) string {
	if j < len(p.names) && p.names[j] == string(b) {
		return p.names[j]
	}
	s := string(b)
	if j < len(p.names) {
		p.names[j] = s
	} else if j == len(p.names) && j < 64 {
		p.names = append(p.names, s)
	}
	return s
}

var registered plugin

func register(m Manifest, kind string) {
	if registered.manifest != nil {
		panic("streamd: a plugin is already registered")
	}
	b := append([]byte(`{"name":`), quote(m.Name)...)
	b = append(append(b, `,"kind":`...), quote(kind)...)
	b = append(append(b, `,"version":`...), quote(m.Version)...)
	b = append(append(b, `,"abi":`...), strconv.Itoa(ABIVersion)...)
	b = append(b, '}')
	registered.manifest = b
}

// Transform registers fn as the plugin: a transform.
func Transform(m Manifest, fn TransformFunc) {
	register(m, "transform")
	registered.transform = fn
}

// Codec registers encode and decode as the plugin: a codec.
func Codec(m Manifest, encode, decode CodecFunc) {
	register(m, "codec")
	registered.encode, registered.decode = encode, decode
}

// Sink registers fn as the plugin: a sink.
func Sink(m Manifest, fn SinkFunc) {
	register(m, "sink")
	registered.sink = fn
}

// OnInit registers fn to receive the plugin's config (a JSON object) once
// per instance before the first batch; an error refuses the config.
func OnInit(fn func(config []byte) error) { registered.init = fn }

// Log levels for Log.
const (
	LevelDebug = 0
	LevelInfo  = 1
	LevelWarn  = 2
	LevelError = 3
)

// le reads and appends little-endian integers (encoding/binary would pull
// reflect into every plugin).
var le littleEndian

type littleEndian struct{}

func (littleEndian) Uint32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func (littleEndian) Uint64(b []byte) uint64 {
	_ = b[7]
	return uint64(le.Uint32(b)) | uint64(le.Uint32(b[4:]))<<32
}

func (littleEndian) AppendUint32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func (littleEndian) AppendUint64(b []byte, v uint64) []byte {
	return le.AppendUint32(le.AppendUint32(b, uint32(v)), uint32(v>>32))
}

// doManifest returns the manifest reply.
func (p *plugin) doManifest() (uint32, []byte) {
	if p.manifest == nil {
		return StatusInternal, []byte("no plugin registered: call streamd.Transform, Codec or Sink in init")
	}
	return StatusOK, p.manifest
}

func (p *plugin) doInit(config []byte) (uint32, []byte) {
	if p.init == nil {
		return StatusOK, nil
	}
	if err := p.init(config); err != nil {
		return StatusConfig, []byte(err.Error())
	}
	return StatusOK, nil
}

// Init gives the registered plugin its config (a JSON object) as
// streamd_init does and returns the status and reply. It is exported for
// tests of a plugin on the host.
func Init(config []byte) (status uint32, reply []byte) {
	return registered.doInit(config)
}

// Process runs one request batch (docs/abi.md section 7) through the
// registered plugin and returns the status and reply, as streamd_process
// does. It is exported for tests of a plugin on the host.
func Process(req []byte) (status uint32, reply []byte) {
	return registered.process(req)
}

func (p *plugin) process(req []byte) (status uint32, reply []byte) {
	defer func() {
		if v := recover(); v != nil {
			status, reply = StatusInternal, []byte("panic: "+panicString(v))
		}
	}()
	if len(req) < 8 {
		return StatusBatch, []byte("request shorter than 8 bytes")
	}
	op := Op(le.Uint32(req))
	count := le.Uint32(req[4:])
	switch {
	case op == OpTransform && p.transform != nil:
	case (op == OpEncode || op == OpDecode) && p.encode != nil:
	case op == OpWrite && p.sink != nil:
	default:
		return StatusUnsupported, nil
	}
	recs, err := p.decodeRequest(req[8:], count)
	if err != nil {
		return StatusBatch, []byte(err.Error())
	}
	out := p.out[:0]
	out = le.AppendUint32(out, count)
	for i := range recs {
		r := &recs[i]
		registered.scratch = registered.scratch[:0]
		var res []Record
		var err error
		if op == OpTransform {
			res, err = p.transform(r)
		} else {
			res, err = p.codecOrSink(op, r)
		}
		// An entry's status and count: one 8-byte store.
		n := len(out)
		if cap(out)-n < 8 {
			out = grow(out, 8)
		}
		if err == nil {
			out = out[:n+8]
			put64(out, n, abi.EntryOK|uint64(len(res))<<32)
			for j := range res {
				out = appendRecord(out, &res[j])
			}
			continue
		}
		if err == KeepRecord { //nolint:errorlint // sentinel, returned as is
			out = out[:n+8]
			put64(out, n, abi.EntryOK|uint64(abi.Keep)<<32)
			continue
		}
		var be batchError
		if errors.As(err, &be) {
			p.out = out
			return StatusBatch, []byte(err.Error())
		}
		msg := err.Error()
		out = le.AppendUint32(out, abi.EntryReject)
		out = le.AppendUint32(out, uint32(len(msg)))
		out = append(out, msg...)
	}
	p.out = out
	return StatusOK, out
}

// codecOrSink runs a codec's or a sink's function on r.
func (p *plugin) codecOrSink(op Op, r *Record) ([]Record, error) {
	if op == OpWrite {
		return nil, p.sink(r)
	}
	fn := p.encode
	if op == OpDecode {
		fn = p.decode
	}
	if r.Value == nil {
		return nil, KeepRecord // a null payload (a tombstone) stays null
	}
	v, err := fn(r.Value)
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = []byte{} // a value stays a value: nil means empty here
	}
	return []Record{{Value: v, Timestamp: -1, Partition: -1, Offset: -1}}, nil
}

// decodeRequest decodes count records; their keys, values and header
// values are views of b. Records and headers live in slabs reused from call
// to call. The loop makes no call of its own per record (a call in a Go
// Wasm guest passes its arguments through linear memory and goes through
// the callee's dispatch loop, ~150 machine instructions under wazero):
// the fields are read with single loads (u32, u64) and a header name is
// compared in place with the previous record's as two 8-byte words.
func (p *plugin) decodeRequest(b []byte, count uint32) ([]Record, error) {
	if uint64(count) > uint64(len(b)/4) {
		return nil, errors.New("request count " + itoa(int(count)) + " too large for " + itoa(len(b)) + " bytes")
	}
	if uint32(cap(p.recs)) < count {
		p.recs = make([]Record, count)
	}
	recs := p.recs[:count]
	hdrs := p.hdrs[:0]
	at := 0 // the record's size field, in b
	for k := range recs {
		if len(b)-at < 4 {
			return nil, errors.New("record " + itoa(k) + ": short size at byte " + itoa(8+at))
		}
		size := u32(b, at)
		if uint64(size) > uint64(len(b)-at-4) {
			return nil, errors.New("record " + itoa(k) + ": size " + itoa(int(size)) + " past the end at byte " + itoa(8+at))
		}
		// The body: offset, timestamp, partition, key, value, headers.
		body := b[at+4 : at+4+int(size)]
		r := &recs[k]
		if len(body) < 32 {
			return nil, bodyError(k, at, errShort)
		}
		r.Offset = int64(u64(body, 0))
		r.Timestamp = int64(u64(body, 8))
		r.Partition = int32(u32(body, 16))
		// The key and the value: a length (-1 for null) and the bytes.
		i := 24
		switch n := int32(u32(body, 20)); {
		case n == -1:
			r.Key = nil
		case n < 0 || int(n) > len(body)-i:
			return nil, bodyError(k, at, errors.New("bad key length"))
		default:
			r.Key = body[i : i+int(n) : i+int(n)]
			i += int(n)
		}
		if len(body)-i < 4 {
			return nil, bodyError(k, at, errors.New("bad value length"))
		}
		n := int32(u32(body, i))
		i += 4
		switch {
		case n == -1:
			r.Value = nil
		case n < 0 || int(n) > len(body)-i:
			return nil, bodyError(k, at, errors.New("bad value length"))
		default:
			r.Value = body[i : i+int(n) : i+int(n)]
			i += int(n)
		}
		if len(body)-i < 4 {
			return nil, bodyError(k, at, errShort)
		}
		hc := u32(body, i)
		i += 4
		if uint64(hc) > uint64((len(body)-i)/8) {
			return nil, bodyError(k, at, errors.New("header count "+itoa(int(hc))+" too large"))
		}
		start := len(hdrs)
		for j := 0; j < int(hc); j++ {
			if len(body)-i < 4 {
				return nil, bodyError(k, at, errShort)
			}
			kl := int(u32(body, i))
			i += 4
			if uint64(kl) > uint64(len(body)-i) {
				return nil, bodyError(k, at, errors.New("bad header name length"))
			}
			name := body[i : i+kl]
			// The j-th name of the previous record, if b holds it again:
			// names of 8-16 bytes (most) compared as two 8-byte words,
			// without the calls of == (runtime.memequal and its byte loop).
			var key string
			if j < len(p.names) && kl >= 8 && kl <= 16 && len(p.names[j]) == kl {
				if prev := p.names[j]; u64s(prev, 0) == u64(name, 0) && u64s(prev, kl-8) == u64(name, kl-8) {
					key = prev
				}
			}
			if key == "" {
				key = p.name(j, name)
			}
			i += kl
			if len(body)-i < 4 {
				return nil, bodyError(k, at, errors.New("bad header value length"))
			}
			var v []byte
			switch n := int32(u32(body, i)); {
			case n == -1:
				i += 4
			case n < 0 || int(n) > len(body)-i-4:
				return nil, bodyError(k, at, errors.New("bad header value length"))
			default:
				v = body[i+4 : i+4+int(n) : i+4+int(n)]
				i += 4 + int(n)
			}
			hdrs = append(hdrs, Header{Key: key, Value: v})
		}
		if i != len(body) {
			return nil, bodyError(k, at, errors.New(itoa(len(body)-i)+" bytes after the last header"))
		}
		// If hdrs grew while decoding this batch, the Headers of the
		// records before point into the slab it had: still theirs, and
		// unchanged until the next call.
		r.Headers = nil
		if hc > 0 {
			r.Headers = hdrs[start:len(hdrs):len(hdrs)]
		}
		at += 4 + int(size)
	}
	if at != len(b) {
		return nil, errors.New(itoa(len(b)-at) + " bytes after the last record")
	}
	p.hdrs = hdrs
	return recs, nil
}

// bodyError is the error for record k's body, whose size field is at b[at]
// of decodeRequest's b.
func bodyError(k, at int, err error) error {
	return errors.New("record " + itoa(k) + " at byte " + itoa(8+at) + ": " + err.Error())
}

var errShort = errors.New("record body too short")

// u32 and u64 read the little-endian integer at b[i:]; they inline into
// their callers, where the compiler makes each one load.
func u32(b []byte, i int) uint32 {
	b = b[i : i+4]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func u64(b []byte, i int) uint64 {
	b = b[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func u64s(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// appendRecord appends r's entry of a result batch (its size and body) to
// out: it grows out once and writes the fixed fields with single stores and
// the bytes with copy (memory.copy in Wasm).
func appendRecord(out []byte, r *Record) []byte {
	size := 8 + 8 + 4 + 4 + len(r.Key) + 4 + len(r.Value) + 4
	for i := range r.Headers {
		size += 4 + len(r.Headers[i].Key) + 4 + len(r.Headers[i].Value)
	}
	n := len(out)
	if cap(out)-n < 4+size {
		out = grow(out, 4+size)
	}
	out = out[:n+4+size]
	b := out[n:]
	put32(b, 0, uint32(size))
	put64(b, 4, math.MaxUint64) // offset -1
	put64(b, 12, uint64(r.Timestamp))
	put32(b, 20, math.MaxUint32) // partition -1
	put32(b, 24, nullLen(r.Key))
	i := 28 + copy(b[28:], r.Key)
	put32(b, i, nullLen(r.Value))
	i += 4 + copy(b[i+4:], r.Value)
	put32(b, i, uint32(len(r.Headers)))
	i += 4
	for j := range r.Headers {
		h := &r.Headers[j]
		put32(b, i, uint32(len(h.Key)))
		i += 4 + copy(b[i+4:], h.Key)
		put32(b, i, nullLen(h.Value))
		i += 4 + copy(b[i+4:], h.Value)
	}
	return out
}

// nullLen is v's length in a batch: abi.Null for nil.
func nullLen(v []byte) uint32 {
	if v == nil {
		return abi.Null
	}
	return uint32(len(v))
}

// grow returns out with room for n more bytes.
func grow(out []byte, n int) []byte {
	return append(out, make([]byte, n)...)[:len(out)]
}

func put32(b []byte, i int, v uint32) {
	b = b[i : i+4]
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func put64(b []byte, i int, v uint64) {
	b = b[i : i+8]
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	b[4], b[5], b[6], b[7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
}

// The SDK uses neither fmt nor encoding/json: together they add ~30% to a
// Go Wasm plugin, and every byte of code costs load time (the host
// validates the whole module at each start).

func itoa(n int) string { return strconv.Itoa(n) }

// quote returns s as a JSON string (for the manifest).
func quote(s string) []byte {
	const hex = "0123456789abcdef"
	b := []byte{'"'}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		case c < utf8.RuneSelf:
			b = append(b, c)
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		i++
	}
	return append(b, '"')
}

// panicString describes a recovered panic value.
func panicString(v any) string {
	switch v := v.(type) {
	case error:
		return v.Error()
	case string:
		return v
	case interface{ String() string }:
		return v.String()
	}
	return "a value that is neither an error nor a string"
}
