package record

import "time"

// Header is one record header. Kafka allows repeated keys; order is kept.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record. Topic, Partition and Offset say where a record was
// read from; producers ignore Offset. A nil Key or Value means null.
type Record struct {
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time
	Topic     string
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

// SetHeader replaces every header named key by one with value, appended last.
func (r *Record) SetHeader(key string, value []byte) {
	r.DelHeader(key)
	r.Headers = append(r.Headers, Header{Key: key, Value: value})
}

// DelHeader removes every header named key.
func (r *Record) DelHeader(key string) {
	out := r.Headers[:0]
	for _, h := range r.Headers {
		if h.Key != key {
			out = append(out, h)
		}
	}
	clear(r.Headers[len(out):])
	r.Headers = out
}

// Clone returns a deep copy of r: no byte slice is shared.
func (r *Record) Clone() Record {
	c := *r
	c.Key = cloneBytes(r.Key)
	c.Value = cloneBytes(r.Value)
	if r.Headers != nil {
		c.Headers = make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			c.Headers[i] = Header{Key: h.Key, Value: cloneBytes(h.Value)}
		}
	}
	return c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
