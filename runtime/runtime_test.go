package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime"
)

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "plugin.wasm")
	if err := os.WriteFile(text, []byte("#!/bin/sh\necho not wasm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badWasm := filepath.Join(dir, "bad.wasm")
	if err := os.WriteFile(badWasm, []byte("\x00asm\x01\x00\x00\x00\xff\xff"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		opts plugins.Options
		want string
	}{
		{"not wasm", text, plugins.Options{}, "plugin.wasm: not a streamd plugin: not a WebAssembly module"},
		{"bad wasm", badWasm, plugins.Options{}, "bad.wasm: not a streamd plugin: not a valid WebAssembly module"},
		{"missing export", wat(t, "noexport"), plugins.Options{}, "noexport.wasm: not a streamd plugin: missing export streamd_process"},
		{"abi v2", wat(t, "abiv2"), plugins.Options{}, "abiv2.wasm: plugin needs ABI v2, this streamd supports ABI v1 at most"},
		{"kind mismatch", wat(t, "identity"), plugins.Options{Kind: plugins.KindCodec}, "identity.wasm: plugin identity is a transform plugin, not a codec"},
		{"config refused", wat(t, "misbehave"), plugins.Options{Config: map[string]any{"mode": "r"}}, `streamd_init: plugin refused its config {"mode":"r"}: bad config: mode r`},
		{"no file", filepath.Join(dir, "nope.wasm"), plugins.Options{}, "no such file"},
	}
	h := newHost(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := h.Load(context.Background(), tt.path, tt.opts)
			if err == nil {
				testenv.Close(t, context.Background(), m)
				t.Fatal("Load succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.path) && tt.name != "no file" {
				t.Fatalf("error %q does not start with the file name %s", err, tt.path)
			}
			if tt.name != "kind mismatch" && tt.name != "config refused" && tt.name != "no file" && !errors.Is(err, runtime.ErrNotPlugin) {
				t.Fatalf("error %q is not ErrNotPlugin", err)
			}
		})
	}
}

func TestIdentityKeep(t *testing.T) {
	m := load(t, wat(t, "identity"), plugins.Options{Kind: plugins.KindTransform})
	if got, want := m.Manifest(), (plugins.Manifest{Name: "identity", Kind: "transform", Version: "1.0.0", ABI: 1}); got != want {
		t.Fatalf("manifest %+v, want %+v", got, want)
	}
	in := recs("a", "", "ccc")
	in[1].Value = nil
	in[2].Key = nil
	res, err := m.Call(context.Background(), runtime.OpTransform, in)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, res, in)
	// An empty batch is fine too.
	if res, err := m.Call(context.Background(), runtime.OpTransform, nil); err != nil || len(res) != 0 {
		t.Fatalf("empty batch: %v, %v", res, err)
	}
}

// checkSame checks that every result is exactly its input record.
func checkSame(t *testing.T, res []plugins.Result, in []record.Record) {
	t.Helper()
	if len(res) != len(in) {
		t.Fatalf("%d results for %d records", len(res), len(in))
	}
	for i, r := range res {
		if r.Err != nil || len(r.Records) != 1 {
			t.Fatalf("result %d: %+v", i, r)
		}
		got, want := r.Records[0], in[i]
		if !sameRecord(got, want) {
			t.Fatalf("result %d:\n got  %+v\n want %+v", i, got, want)
		}
	}
}

func sameRecord(a, b record.Record) bool {
	if (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Key, b.Key) ||
		(a.Value == nil) != (b.Value == nil) || !bytes.Equal(a.Value, b.Value) ||
		!a.Timestamp.Equal(b.Timestamp) || a.Partition != b.Partition || a.Offset != b.Offset ||
		a.Topic != b.Topic || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		x, y := a.Headers[i], b.Headers[i]
		if x.Key != y.Key || (x.Value == nil) != (y.Value == nil) || !bytes.Equal(x.Value, y.Value) {
			return false
		}
	}
	return true
}

// TestBatchFailures checks every way a batch can fail: each fails the call
// with ErrBatch, names the cause, and leaves the module able to serve the
// next call on a fresh instance.
func TestBatchFailures(t *testing.T) {
	path := wat(t, "misbehave")
	tests := []struct {
		mode string
		opts plugins.Options
		want string
	}{
		{"trap", plugins.Options{}, "unreachable"},
		{"loop", plugins.Options{Timeout: 300 * time.Millisecond}, "timed out after 300ms"},
		{"memory", plugins.Options{Wasm: plugins.WasmOptions{MaxMemoryPages: 64}}, "unreachable"},
		{"garbage", plugins.Options{}, "malformed result batch at byte 0: count 7, want 2"},
		{"size past end", plugins.Options{}, "malformed result batch at byte 12: record size 65535 past the end"},
		{"batch error", plugins.Options{}, "(ERR_BATCH): whole batch failed"},
		{"internal error", plugins.Options{}, "(ERR_INTERNAL): whole batch failed"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			opts := tt.opts
			opts.Pool = 1
			opts.Config = map[string]any{"mode": tt.mode}
			if tt.mode == "size past end" {
				opts.Config["mode"] = "s"
			}
			m := load(t, path, opts)
			for i := range 2 { // the second call runs on a replacement instance
				start := time.Now()
				in := recs("a", "b")
				if tt.mode == "size past end" {
					in = in[:1] // the canned reply has one entry
				}
				_, err := m.Call(context.Background(), runtime.OpTransform, in)
				if !errors.Is(err, runtime.ErrBatch) {
					t.Fatalf("call %d: error %v is not ErrBatch", i, err)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("call %d: error %q does not contain %q", i, err, tt.want)
				}
				if d := time.Since(start); d > 20*time.Second {
					t.Fatalf("call %d took %v", i, d)
				}
			}
		})
	}
}

func TestUnsupportedOp(t *testing.T) {
	m := load(t, wat(t, "misbehave"), plugins.Options{Config: map[string]any{"mode": "u"}})
	_, err := m.Call(context.Background(), runtime.OpEncode, recs("a"))
	if !errors.Is(err, runtime.ErrUnsupported) {
		t.Fatalf("error %v is not ErrUnsupported", err)
	}
}

// TestPoisonRecord: a batch with a record that traps the guest fails as a
// whole; retried one by one, only that record fails, and the module stays
// healthy throughout (pool of one, so every instance is a replacement).
func TestPoisonRecord(t *testing.T) {
	var logs bytes.Buffer
	m := load(t, wat(t, "poison"), plugins.Options{Pool: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	in := recs("good-1", "reject-me", "poison!", "good-2")
	if _, err := m.Call(context.Background(), runtime.OpTransform, in); !errors.Is(err, runtime.ErrBatch) {
		t.Fatalf("batch with a poison record: error %v, want ErrBatch", err)
	}
	for i := range in {
		res, err := m.Call(context.Background(), runtime.OpTransform, in[i:i+1])
		switch i {
		case 2:
			if !errors.Is(err, runtime.ErrBatch) {
				t.Fatalf("poison record alone: error %v, want ErrBatch", err)
			}
		case 1:
			var rej *runtime.RejectError
			if err != nil || !errors.As(res[0].Err, &rej) || rej.Reason != "rejected by poison.wat" {
				t.Fatalf("rejected record: %+v, %v", res, err)
			}
		default:
			if err != nil {
				t.Fatalf("good record %d: %v", i, err)
			}
			checkSame(t, res, in[i:i+1])
		}
	}
	// A good batch after all that still works.
	good := recs("x", "y")
	res, err := m.Call(context.Background(), runtime.OpTransform, good)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, res, good)
	// Each new instance logged "init" through streamd.log, under the plugin's name.
	if n := strings.Count(logs.String(), "msg=init plugin=poison"); n < 3 {
		t.Fatalf("want >= 3 init log lines from fresh instances, got %d:\n%s", n, logs.String())
	}
}

func TestParallelCalls(t *testing.T) {
	m := load(t, goPlugin(t, "identity"), plugins.Options{Pool: 3})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := benchRecords(50 + g)
			for range 20 {
				res, err := m.Call(context.Background(), runtime.OpTransform, in)
				if err != nil {
					errs <- err
					return
				}
				for i := range in {
					out := res[i].Records[0]
					if !bytes.Equal(out.Value, in[i].Value) || !bytes.Equal(out.Key, in[i].Key) || !out.Timestamp.Equal(in[i].Timestamp) {
						errs <- errors.New("output differs from input")
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestCallAfterClose(t *testing.T) {
	m, err := newHost(t).Load(context.Background(), wat(t, "identity"), plugins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Close(t, context.Background(), m)
	if _, err := m.Call(context.Background(), runtime.OpTransform, recs("a")); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("error %v, want ErrClosed", err)
	}
}

// TestGoSDKRoundTrip sends records with every field shape through the Go
// SDK's copying identity: the host encoder, the SDK decoder and encoder and
// the host decoder must agree on all of them.
func TestGoSDKRoundTrip(t *testing.T) {
	m := load(t, goPlugin(t, "identity"), plugins.Options{})
	in := []record.Record{
		{Key: nil, Value: nil, Partition: -1, Offset: -1},
		{Key: []byte{}, Value: []byte{}, Timestamp: time.UnixMilli(0).UTC(), Partition: 0, Offset: 0},
		{Key: []byte{0, 0xff}, Value: []byte("v"), Timestamp: time.UnixMilli(-5).UTC(), Partition: 7, Offset: 1 << 40,
			Headers: []record.Header{{Key: "a", Value: nil}, {Key: "", Value: []byte{}}, {Key: "a", Value: []byte("again")}}},
		{Key: []byte("k"), Value: bytes.Repeat([]byte("x"), 70000), Timestamp: time.UnixMilli(1767225600123).UTC(), Partition: 1, Offset: 2,
			Headers: []record.Header{{Key: "ünïcode", Value: []byte("✓")}}},
	}
	for range 3 { // reuses the guest's buffers
		res, err := m.Call(context.Background(), runtime.OpTransform, in)
		if err != nil {
			t.Fatal(err)
		}
		checkSame(t, res, in)
	}
}

// TestTestdataIdentity keeps testdata/identity.wasm (used by the Example)
// equal to examples/wasm/wat/identity.wat.
func TestTestdataIdentity(t *testing.T) {
	built, err := os.ReadFile(wat(t, "identity"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("testdata/identity.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, committed) {
		t.Fatal("testdata/identity.wasm is stale: wat2wasm ../examples/wasm/wat/identity.wat -o testdata/identity.wasm")
	}
}

// TestCancelDuringCall: cancelling the caller's context stops a guest that
// is running, long before the call timeout.
func TestCancelDuringCall(t *testing.T) {
	m := load(t, wat(t, "misbehave"), plugins.Options{Pool: 1, Timeout: time.Minute, Config: map[string]any{"mode": "loop"}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := m.Call(ctx, runtime.OpTransform, recs("a"))
	if !errors.Is(err, runtime.ErrBatch) || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want ErrBatch and context.Canceled", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("cancelled call took %v", d)
	}
	// The module still serves calls (on a new instance, which loops too:
	// a short deadline shows it is alive).
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.Call(ctx, runtime.OpTransform, recs("a")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second call: %v", err)
	}
}

// TestTrustedNoTimeout: a negative Timeout compiles without termination
// checks; the plugin works the same.
func TestTrustedNoTimeout(t *testing.T) {
	m := load(t, wat(t, "poison"), plugins.Options{Timeout: -1, Pool: 1})
	in := recs("a", "reject", "b")
	res, err := m.Call(context.Background(), runtime.OpTransform, in)
	if err != nil {
		t.Fatal(err)
	}
	if res[1].Err == nil || len(res[0].Records) != 1 || len(res[2].Records) != 1 {
		t.Fatalf("results %+v", res)
	}
	if _, err := m.Call(context.Background(), runtime.OpTransform, recs("poison")); !errors.Is(err, runtime.ErrBatch) {
		t.Fatalf("trap without termination checks: %v", err)
	}
	if _, err := m.Call(context.Background(), runtime.OpTransform, in); err != nil {
		t.Fatalf("after a trap: %v", err)
	}
}

// TestResultsOutliveNextCall: an instance reuses its input buffer and its
// reply buffer from call to call, growing them for a bigger batch; results
// of earlier calls must not change when later calls run on the same
// instance, whichever way the batches grow and shrink.
func TestResultsOutliveNextCall(t *testing.T) {
	m := load(t, goPlugin(t, "identity"), plugins.Options{Pool: 1})
	big := recs("x")
	big[0].Value = bytes.Repeat([]byte("big"), 1<<20/3+1) // a reply over maxKeptReply
	batches := [][]record.Record{recs("a", "b"), benchRecords(300), recs("c"), big, recs("d", "e", "f"), nil, benchRecords(3)}
	var kept [][]plugins.Result
	for i, in := range batches {
		res, err := m.Call(context.Background(), runtime.OpTransform, in)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		kept = append(kept, res)
		for j := range kept {
			checkSame(t, kept[j], batches[j])
		}
	}
}

// TestIdentityUnrolled runs testdata/identity_unrolled.wat (the guest of the
// ABI overhead benchmark) on batches around its 16-record loop, checks it
// answers KEEP for every record, and refuses ops other than TRANSFORM.
func TestIdentityUnrolled(t *testing.T) {
	m := load(t, watFile(t, filepath.Join("testdata", "identity_unrolled.wat")), plugins.Options{Kind: plugins.KindTransform, Pool: 1})
	for _, n := range []int{0, 1, 15, 16, 17, 33, 256, 1000, 3} {
		in := benchRecords(n)
		if n > 2 {
			in[1].Key, in[2].Value, in[2].Headers = nil, nil, nil
		}
		res, err := m.Call(context.Background(), runtime.OpTransform, in)
		if err != nil {
			t.Fatalf("%d records: %v", n, err)
		}
		checkSame(t, res, in)
		for i := range res {
			if &res[i].Records[0] != &in[i] {
				t.Fatalf("%d records: result %d is not the input record (KEEP)", n, i)
			}
		}
	}
	if _, err := m.Call(context.Background(), runtime.OpEncode, recs("a")); !errors.Is(err, runtime.ErrUnsupported) {
		t.Fatalf("ENCODE: error %v, want ErrUnsupported", err)
	}
}
