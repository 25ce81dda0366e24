package streamd

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
type Op uint32

// The ops of ABI v1.
const (
	OpTransform Op = 1
	OpEncode    Op = 2
	OpDecode    Op = 3
	OpWrite     Op = 4
)

// Call statuses.
const (
	StatusOK          = 0
	StatusBatch       = 2
	StatusUnsupported = 3
	StatusConfig      = 4
	StatusInternal    = 5
)

// KeepRecord, returned by a TransformFunc, passes the input record on
// unchanged.
var KeepRecord = errors.New("keep the record unchanged")

type batchError struct{ err error }

func (e batchError) Error() string { return e.err.Error() }
func (e batchError) Unwrap() error { return e.err }

// BatchError wraps err so that returning it fails the whole batch
// (ERR_BATCH) instead of rejecting one record.
func BatchError(err error) error { return batchError{err} }

// TransformFunc turns one record into zero or more records.
type TransformFunc func(r *Record) ([]Record, error)

// CodecFunc encodes or decodes one payload.
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
	b, err := json.Marshal(struct {
		Name    string `json:"name"`
		Kind    string `json:"kind"`
		Version string `json:"version"`
		ABI     int    `json:"abi"`
	}{m.Name, kind, m.Version, ABIVersion})
	if err != nil {
		panic(err)
	}
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

var le = binary.LittleEndian

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

// Process runs one request batch (docs/abi.md section 7) through the
// registered plugin and returns the status and reply, as streamd_process
// does. It is exported for tests of a plugin on the host.
func Process(req []byte) (status uint32, reply []byte) {
	return registered.process(req)
}

func (p *plugin) process(req []byte) (status uint32, reply []byte) {
	defer func() {
		if v := recover(); v != nil {
			status, reply = StatusInternal, fmt.Appendf(nil, "panic: %v", v)
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
		switch op {
		case OpTransform:
			res, err = p.transform(r)
		case OpEncode, OpDecode:
			fn := p.encode
			if op == OpDecode {
				fn = p.decode
			}
			var v []byte
			if v, err = fn(r.Value); err == nil {
				res = []Record{{Value: v, Timestamp: -1, Partition: -1, Offset: -1}}
			}
		case OpWrite:
			err = p.sink(r)
		}
		switch {
		case err == KeepRecord: //nolint:errorlint // sentinel, returned as is
			out = le.AppendUint32(out, 0)
			out = le.AppendUint32(out, math.MaxUint32)
		case err != nil:
			var be batchError
			if errors.As(err, &be) {
				p.out = out
				return StatusBatch, []byte(err.Error())
			}
			msg := err.Error()
			out = le.AppendUint32(out, 1)
			out = le.AppendUint32(out, uint32(len(msg)))
			out = append(out, msg...)
		default:
			out = le.AppendUint32(out, 0)
			out = le.AppendUint32(out, uint32(len(res)))
			for j := range res {
				out = appendRecord(out, &res[j])
			}
		}
	}
	p.out = out
	return StatusOK, out
}

// decodeRequest decodes count records; they point into b. Records and
// headers live in slabs reused from call to call.
func (p *plugin) decodeRequest(b []byte, count uint32) ([]Record, error) {
	if uint64(count) > uint64(len(b)/4) {
		return nil, fmt.Errorf("request count %d too large for %d bytes", count, len(b))
	}
	if uint32(cap(p.recs)) < count {
		p.recs = make([]Record, count)
	}
	recs := p.recs[:count]
	hdrs := p.hdrs[:0]
	pos := 8
	for i := range recs {
		if len(b) < 4 {
			return nil, fmt.Errorf("record %d: short size at byte %d", i, pos)
		}
		size := le.Uint32(b)
		if uint64(size) > uint64(len(b)-4) {
			return nil, fmt.Errorf("record %d: size %d past the end at byte %d", i, size, pos)
		}
		var err error
		if hdrs, err = p.decodeBody(&recs[i], b[4:4+size], hdrs); err != nil {
			return nil, fmt.Errorf("record %d at byte %d: %w", i, pos, err)
		}
		b = b[4+size:]
		pos += 4 + int(size)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes after the last record", len(b))
	}
	// Headers were appended to one slab that may have moved while growing:
	// point each record at its part by count.
	k := 0
	for i := range recs {
		if n := len(recs[i].Headers); n > 0 {
			recs[i].Headers = hdrs[k : k+n : k+n]
			k += n
		}
	}
	p.hdrs = hdrs
	return recs, nil
}

var errShort = errors.New("record body too short")

// decodeBody decodes one record body into r, appending its headers to hdrs.
func (p *plugin) decodeBody(r *Record, b []byte, hdrs []Header) ([]Header, error) {
	if len(b) < 32 {
		return hdrs, errShort
	}
	r.Offset = int64(le.Uint64(b))
	r.Timestamp = int64(le.Uint64(b[8:]))
	r.Partition = int32(le.Uint32(b[16:]))
	b = b[20:]
	var ok bool
	if r.Key, b, ok = nullable(b); !ok {
		return hdrs, errors.New("bad key length")
	}
	if r.Value, b, ok = nullable(b); !ok {
		return hdrs, errors.New("bad value length")
	}
	if len(b) < 4 {
		return hdrs, errShort
	}
	hc := le.Uint32(b)
	b = b[4:]
	if uint64(hc) > uint64(len(b)/8) {
		return hdrs, fmt.Errorf("header count %d too large", hc)
	}
	start := len(hdrs)
	for j := 0; j < int(hc); j++ {
		if len(b) < 4 {
			return hdrs, errShort
		}
		kl := le.Uint32(b)
		if uint64(kl) > uint64(len(b)-4) {
			return hdrs, errors.New("bad header name length")
		}
		var h Header
		h.Key = p.name(j, b[4:4+kl])
		if h.Value, b, ok = nullable(b[4+kl:]); !ok {
			return hdrs, errors.New("bad header value length")
		}
		hdrs = append(hdrs, h)
	}
	if len(b) != 0 {
		return hdrs, fmt.Errorf("%d bytes after the last header", len(b))
	}
	// decodeRequest points Headers into the final slab by their count.
	r.Headers = nil
	if hc > 0 {
		r.Headers = hdrs[start:len(hdrs):len(hdrs)]
	}
	return hdrs, nil
}

func nullable(b []byte) (v, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, b, false
	}
	n := int32(le.Uint32(b))
	b = b[4:]
	if n == -1 {
		return nil, b, true
	}
	if n < 0 || int(n) > len(b) {
		return nil, b, false
	}
	return b[:n:n], b[n:], true
}

func appendRecord(out []byte, r *Record) []byte {
	size := 8 + 8 + 4 + 4 + len(r.Key) + 4 + len(r.Value) + 4
	for i := range r.Headers {
		size += 4 + len(r.Headers[i].Key) + 4 + len(r.Headers[i].Value)
	}
	out = le.AppendUint32(out, uint32(size))
	out = le.AppendUint64(out, math.MaxUint64) // offset -1
	out = le.AppendUint64(out, uint64(r.Timestamp))
	out = le.AppendUint32(out, math.MaxUint32) // partition -1
	out = appendNullable(out, r.Key)
	out = appendNullable(out, r.Value)
	out = le.AppendUint32(out, uint32(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		out = le.AppendUint32(out, uint32(len(h.Key)))
		out = append(out, h.Key...)
		out = appendNullable(out, h.Value)
	}
	return out
}

func appendNullable(out, b []byte) []byte {
	if b == nil {
		return le.AppendUint32(out, math.MaxUint32)
	}
	out = le.AppendUint32(out, uint32(len(b)))
	return append(out, b...)
}
