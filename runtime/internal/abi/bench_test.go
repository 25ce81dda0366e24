package abi_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime/internal/abi"
	"github.com/streamd/streamd/sdk/go/streamd"
)

func benchRecs(n int) []record.Record {
	out := make([]record.Record, n)
	for i := range out {
		out[i] = record.Record{
			Key:       []byte(fmt.Sprintf("key-%012d", i)),
			Value:     make([]byte, 150),
			Headers:   []record.Header{{Key: "trace-id", Value: []byte("0123456789abcdef")}},
			Timestamp: time.UnixMilli(1767225600000 + int64(i)),
		}
	}
	return out
}

// BenchmarkEncode is the host's cost to write a request batch into an
// input buffer that has room for it (the steady state: the host sizes a
// batch only when it does not fit).
func BenchmarkEncode(b *testing.B) {
	recs := benchRecs(256)
	n, _ := abi.RequestSize(recs)
	buf := make([]byte, n+n/2)
	cpu := cpuTime()
	for b.Loop() {
		if _, ok := abi.EncodeRequest(buf, streamd.OpTransform, recs); !ok {
			b.Fatal("no room")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/record")
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*256), "cpu-ns/record")
}

// BenchmarkDecodeKeep is the host's cost to read an all-KEEP result.
func BenchmarkDecodeKeep(b *testing.B) {
	recs := benchRecs(256)
	reply := binary.LittleEndian.AppendUint32(nil, 256)
	for range recs {
		reply = binary.LittleEndian.AppendUint32(reply, 0)
		reply = binary.LittleEndian.AppendUint32(reply, 0xFFFFFFFF)
	}
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		if _, err := abi.DecodeResult(reply, recs, errors.New); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/record")
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*256), "cpu-ns/record")
}

// BenchmarkSDKProcessNative runs the Go SDK's request handling natively (not
// in Wasm), with the copying identity registered in abi_test.go.
func BenchmarkSDKProcessNative(b *testing.B) {
	recs := benchRecs(256)
	req := encode(b, streamd.OpTransform, recs)
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		streamd.Process(req)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/record")
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*256), "cpu-ns/record")
}

// BenchmarkDecodeCopies is the host's cost to read a result of 256 output
// records (each input copied back by the guest).
func BenchmarkDecodeCopies(b *testing.B) {
	recs := benchRecs(256)
	_, reply := streamd.Process(encode(b, streamd.OpTransform, recs))
	reply = bytes.Clone(reply)
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		if _, err := abi.DecodeResult(reply, recs, errors.New); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/record")
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*256), "cpu-ns/record")
}
