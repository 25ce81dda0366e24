package native

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/streamd/streamd/plugins/native/internal/logs"
	pluginv1 "github.com/streamd/streamd/proto/streamd/plugin/v1"
	"github.com/streamd/streamd/record"
)

// FuzzResults feeds arbitrary ProcessResponse bytes, as a broken or hostile
// plugin could send them, through the host's result handling of every kind:
// it must return one entry per record or an error, never panic.
func FuzzResults(f *testing.F) {
	seed := func(r *pluginv1.ProcessResponse) {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	recs := &pluginv1.Records{Records: []*pluginv1.Record{{Value: []byte("v"), Key: []byte{}, TimestampMs: -1, Headers: []*pluginv1.Header{{Name: "h"}}}}}
	seed(&pluginv1.ProcessResponse{Results: []*pluginv1.Result{
		{Outcome: &pluginv1.Result_Keep{Keep: &pluginv1.Keep{}}},
		{Outcome: &pluginv1.Result_Error{Error: "bad"}},
		{Outcome: &pluginv1.Result_Records{Records: recs}},
		{Outcome: &pluginv1.Result_Records{Records: &pluginv1.Records{}}},
		{},
	}})
	f.Add([]byte{0x0a, 0x00})
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var resp pluginv1.ProcessResponse
		if proto.Unmarshal(data, &resp) != nil {
			return
		}
		res := resp.GetResults()
		batch := make([]record.Record, len(res))
		payloads := make([][]byte, len(res))
		for i := range batch {
			batch[i] = record.Record{Value: []byte{byte(i)}, Topic: "t", Offset: int64(i)}
			payloads[i] = batch[i].Value
		}
		if out, err := transformResults("fuzz", batch, res); err == nil {
			if len(out) != len(batch) {
				t.Fatalf("transform: %d results for %d", len(out), len(batch))
			}
			for i, r := range out {
				for _, o := range r.Records {
					if o.Topic != "t" || o.Offset != int64(i) {
						t.Fatalf("output of record %d lost its source position: %+v", i, o)
					}
				}
			}
		}
		if out, err := codecResults("fuzz", pluginv1.Op_OP_ENCODE, payloads, res); err == nil && len(out) != len(batch) {
			t.Fatalf("codec: %d results for %d", len(out), len(batch))
		}
		if out, err := sinkResults("fuzz", res); err == nil && len(out) != len(batch) {
			t.Fatalf("sink: %d results for %d", len(out), len(batch))
		}
	})
}

// FuzzLineWriter feeds arbitrary plugin stderr through the log line writer:
// it must never panic, and every non-blank line must be logged once.
func FuzzLineWriter(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), 3)
	f.Add([]byte(`{"@level":"warn","@message":"m","k":1}`+"\n"+`{"@message":5}`+"\npanic: x\n\tgoroutine\n"), 7)
	f.Add([]byte("{\n}\r\n\n"), 1)
	f.Fuzz(func(t *testing.T, data []byte, chunk int) {
		if chunk <= 0 {
			chunk = 1
		}
		var sb syncBuffer
		w := logs.NewLineWriter(newTextLogger(&sb), "stderr")
		for p := data; len(p) > 0; {
			n := min(chunk, len(p))
			if _, err := w.Write(p[:n]); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
		w.Flush()
		want := 0
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(bytes.TrimRight(l, "\r"))) > 0 {
				want += 1 + len(l)/(64<<10)
			}
		}
		got := bytes.Count([]byte(sb.String()), []byte("\n"))
		if len(data) < 64<<10 && got != want {
			t.Fatalf("%d log records for %d non-blank lines", got, want)
		}
	})
}
