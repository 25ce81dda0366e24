package native

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pluginv1 "github.com/streamd/streamd/proto/streamd/plugin/v1"
	"github.com/streamd/streamd/record"
)

type upperCodec struct{}

func (upperCodec) Encode(_ context.Context, p [][]byte) ([]Payload, error) {
	out := make([]Payload, len(p))
	for i, b := range p {
		if len(b) == 0 {
			out[i].Err = errors.New("empty")
			continue
		}
		out[i].Data = []byte(strings.ToUpper(string(b)))
	}
	return out, nil
}

func (upperCodec) Decode(context.Context, [][]byte) ([]Payload, error) {
	return nil, errors.New("decode is broken")
}

type shortSink struct{}

func (shortSink) Write(_ context.Context, b []record.Record) ([]error, error) {
	return make([]error, len(b)-1), nil
}

func TestPluginKind(t *testing.T) {
	tf := TransformFunc(func(context.Context, record.Record) Result { return Result{Keep: true} })
	tests := []struct {
		p       Plugin
		want    kind
		wantErr string
	}{
		{Plugin{Name: "a", Transformer: tf}, kindTransform, ""},
		{Plugin{Name: "a", Codec: upperCodec{}}, kindCodec, ""},
		{Plugin{Name: "a", Sink: shortSink{}}, kindSink, ""},
		{Plugin{Name: "a"}, "", "exactly one of Transformer, Codec and Sink must be set, got 0"},
		{Plugin{Name: "a", Transformer: tf, Sink: shortSink{}}, "", "got 2"},
		{Plugin{Name: "Bad Name", Transformer: tf}, "", `plugin name "Bad Name" does not match`},
	}
	for _, tt := range tests {
		k, err := tt.p.kind()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: err %v, want %q", tt.p, err, tt.wantErr)
			}
			continue
		}
		if err != nil || k != tt.want {
			t.Errorf("%+v: %s, %v", tt.p, k, err)
		}
	}
}

func process(t *testing.T, s *server, op pluginv1.Op, values ...string) (*pluginv1.ProcessResponse, error) {
	t.Helper()
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v), Offset: int64(i), Partition: 1}
	}
	return s.Process(context.Background(), &pluginv1.ProcessRequest{Op: op, Records: pluginv1.FromRecords(recs)})
}

func TestServerProcess(t *testing.T) {
	tr := &server{kind: kindTransform, p: Plugin{Name: "t", Transformer: TransformFunc(func(_ context.Context, r record.Record) Result {
		switch string(r.Value) {
		case "bad":
			return Result{Err: errors.New("bad value")}
		case "keep":
			return Result{Keep: true}
		}
		return Result{Records: []record.Record{r, r}}
	})}}
	resp, err := process(t, tr, pluginv1.Op_OP_TRANSFORM, "x", "bad", "keep")
	if err != nil {
		t.Fatal(err)
	}
	r := resp.GetResults()
	if len(r) != 3 || len(r[0].GetRecords().GetRecords()) != 2 || r[1].GetError() != "bad value" || r[2].GetKeep() == nil {
		t.Fatalf("results %v", r)
	}
	if o := r[0].GetRecords().GetRecords()[0]; o.GetOffset() != -1 || o.GetPartition() != -1 || string(o.GetValue()) != "x" {
		t.Fatalf("output record %v: want offset and partition -1", o)
	}

	codec := &server{kind: kindCodec, p: Plugin{Name: "c", Codec: upperCodec{}}}
	resp, err = process(t, codec, pluginv1.Op_OP_ENCODE, "ab", "")
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetResults(); string(r[0].GetRecords().GetRecords()[0].GetValue()) != "AB" || r[1].GetError() != "empty" {
		t.Fatalf("codec results %v", r)
	}

	errTests := []struct {
		name string
		s    *server
		op   pluginv1.Op
		code codes.Code
		msg  string
	}{
		{"op not served", tr, pluginv1.Op_OP_WRITE, codes.Unimplemented, "does not serve op OP_WRITE"},
		{"batch error", codec, pluginv1.Op_OP_DECODE, codes.Aborted, "decode is broken"},
		{"short result", &server{kind: kindSink, p: Plugin{Name: "s", Sink: shortSink{}}}, pluginv1.Op_OP_WRITE, codes.Internal, "sink returned 1 results for 2 records"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := process(t, tt.s, tt.op, "a", "b")
			if st := status.Convert(err); st.Code() != tt.code || !strings.Contains(st.Message(), tt.msg) {
				t.Fatalf("status %v, want %s %q", err, tt.code, tt.msg)
			}
		})
	}
}

func TestServerInit(t *testing.T) {
	var got string
	s := &server{kind: kindTransform, p: Plugin{Name: "t", Init: func(_ context.Context, c json.RawMessage) error {
		got = string(c)
		if strings.Contains(got, "bad") {
			return errors.New("bad config")
		}
		return nil
	}}}
	if _, err := s.Init(context.Background(), &pluginv1.InitRequest{}); err != nil || got != "{}" {
		t.Fatalf("empty config: %q, %v", got, err)
	}
	_, err := s.Init(context.Background(), &pluginv1.InitRequest{ConfigJson: []byte(`{"bad":1}`)})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != "bad config" {
		t.Fatalf("refused config: %v", err)
	}
}
