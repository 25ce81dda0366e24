package pluginv1

import (
	"time"

	"github.com/streamd/streamd/record"
)

// The go-plugin handshake of the streamd native plugin protocol. A plugin
// written without the Go SDK must check that the environment variable
// MagicCookieKey equals MagicCookieValue, pick the highest protocol version it
// speaks from the comma-separated PLUGIN_PROTOCOL_VERSIONS, serve the Plugin
// service and the grpc.health.v1 service (service name "plugin" SERVING) and
// print "1|VERSION|tcp|127.0.0.1:PORT|grpc" as its first line on stdout.
const (
	MagicCookieKey   = "STREAMD_PLUGIN_COOKIE"
	MagicCookieValue = "streamd-native-plugin-7c1f0b3e9d2a"
	// ProtocolVersion is the go-plugin app protocol version of this package.
	ProtocolVersion = 1
	// PluginSetName is the go-plugin name the Plugin service is dispensed as.
	PluginSetName = "streamd"
)

// FromRecord converts a record to its wire form. Topic is not sent (the Wasm
// ABI does not carry it either).
func FromRecord(r *record.Record) *Record {
	out := &Record{
		Offset:      r.Offset,
		TimestampMs: timestampMs(r.Timestamp),
		Partition:   r.Partition,
		Key:         r.Key,
		Value:       r.Value,
	}
	if len(r.Headers) > 0 {
		out.Headers = make([]*Header, len(r.Headers))
		for i, h := range r.Headers {
			out.Headers[i] = &Header{Name: h.Key, Value: h.Value}
		}
	}
	return out
}

// FromRecords converts a batch of records to their wire form.
func FromRecords(batch []record.Record) []*Record {
	out := make([]*Record, len(batch))
	for i := range batch {
		out[i] = FromRecord(&batch[i])
	}
	return out
}

// ToRecord converts a wire record back. A key, value or header value that
// was absent on the wire is nil (null); present but empty is a non-nil empty
// slice. The record's Topic is empty.
func (x *Record) ToRecord() record.Record {
	r := record.Record{
		Key:       x.GetKey(),
		Value:     x.GetValue(),
		Partition: x.GetPartition(),
		Offset:    x.GetOffset(),
	}
	if ms := x.GetTimestampMs(); ms != NoTimestamp {
		r.Timestamp = time.UnixMilli(ms).UTC()
	}
	if hs := x.GetHeaders(); len(hs) > 0 {
		r.Headers = make([]record.Header, len(hs))
		for i, h := range hs {
			r.Headers[i] = record.Header{Key: h.GetName(), Value: h.GetValue()}
		}
	}
	return r
}

// ToRecords converts wire records back (see Record.ToRecord).
func ToRecords(in []*Record) []record.Record {
	out := make([]record.Record, len(in))
	for i, x := range in {
		out[i] = x.ToRecord()
	}
	return out
}

// NoTimestamp is the timestamp_ms of a record that has none (the zero
// time.Time), as in the Wasm ABI.
const NoTimestamp = -1

// timestampMs is t in milliseconds since the Unix epoch, or NoTimestamp for
// the zero time; ToRecord maps NoTimestamp back to the zero time.
func timestampMs(t time.Time) int64 {
	if t.IsZero() {
		return NoTimestamp
	}
	return t.UnixMilli()
}
