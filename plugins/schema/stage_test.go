package schema

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

const orderV1 = `{"type":"record","name":"Order","namespace":"com.acme","fields":[
 {"name":"id","type":"string"},{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"note","type":["null","string"],"default":null}]}`

func fakeRegistry(t *testing.T) (*srfake.Registry, *sr.Client) {
	t.Helper()
	f := srfake.New()
	t.Cleanup(f.Close)
	cl, err := sr.NewClient(sr.URLs(f.URL()))
	if err != nil {
		t.Fatal(err)
	}
	return f, cl
}

func newStage(t *testing.T, reg Registry, cfg Config) *Stage {
	t.Helper()
	st, err := New(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func recs(topic string, values ...string) []record.Record {
	out := make([]record.Record, len(values))
	for i, v := range values {
		out[i] = record.Record{Topic: topic, Offset: int64(i), Key: []byte("k"), Value: []byte(v)}
		if v == "<nil>" {
			out[i].Value = nil
		}
	}
	return out
}

func one(t *testing.T, res []plugins.Result, i int) record.Record {
	t.Helper()
	if res[i].Err != nil {
		t.Fatalf("record %d: %v", i, res[i].Err)
	}
	if len(res[i].Records) != 1 {
		t.Fatalf("record %d: %d outputs", i, len(res[i].Records))
	}
	return res[i].Records[0]
}

func TestStageAvroRoundTrip(t *testing.T) {
	_, cl := fakeRegistry(t)
	enc := newStage(t, cl, Config{Mode: Encode, Schema: &sr.Schema{Schema: orderV1}, AutoRegister: true})
	dec := newStage(t, cl, Config{})
	in := recs("orders", `{"id":"o-1","amount":"12.30","note":"x"}`, `{"id":"o-2","amount":"-0.05"}`, "<nil>")
	res, err := enc.Transform(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	framed := one(t, res, 0)
	id, _, err := ParseFrame(framed.Value)
	if err != nil || id < 1 {
		t.Fatalf("frame: id %d, %v", id, err)
	}
	got, err := cl.SchemaByVersion(context.Background(), "orders-value", -1)
	if err != nil || got.ID != id {
		t.Fatalf("subject orders-value: %+v %v (frame id %d)", got, err, id)
	}
	if v := one(t, res, 2).Value; v != nil {
		t.Fatalf("a null value must stay null: %q", v)
	}
	out, err := dec.Transform(context.Background(), []record.Record{one(t, res, 0), one(t, res, 1), one(t, res, 2)})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{`{"id":"o-1","amount":"12.30","note":"x"}`, `{"id":"o-2","amount":"-0.05","note":null}`} {
		if r := one(t, out, i); string(r.Value) != want || string(r.Key) != "k" || r.Offset != int64(i) {
			t.Errorf("record %d: %s (key %q offset %d), want %s", i, r.Value, r.Key, r.Offset, want)
		}
	}
}

func TestStageStrategies(t *testing.T) {
	_, cl := fakeRegistry(t)
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Strategy: TopicName}, "orders-value"},
		{Config{Strategy: TopicName, Key: true}, "orders-key"},
		{Config{Strategy: TopicName, Topic: "other"}, "other-value"},
		{Config{Strategy: RecordName}, "com.acme.Order"},
		{Config{Strategy: TopicRecordName}, "orders-com.acme.Order"},
		{Config{Subject: "fixed"}, "fixed"},
	} {
		tt.cfg.Mode, tt.cfg.Schema, tt.cfg.AutoRegister = Encode, &sr.Schema{Schema: orderV1}, true
		st := newStage(t, cl, tt.cfg)
		in := recs("orders", `{"id":"o","amount":"1.00"}`)
		in[0].Key = in[0].Value
		res, err := st.Transform(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		r := one(t, res, 0)
		p := r.Value
		if tt.cfg.Key {
			p = r.Key
		}
		id, _, _ := ParseFrame(p)
		ss, err := cl.SchemaByVersion(context.Background(), tt.want, -1)
		if err != nil || ss.ID != id {
			t.Errorf("%+v: subject %s: %v", tt.cfg, tt.want, err)
		}
	}
}

const ordersProto = `syntax = "proto3";
package acme.v1;
import "google/protobuf/timestamp.proto";
import "acme/money.proto";
message Customer { string name = 1; }
message Order {
  string id = 1;
  acme.Money total = 2;
  google.protobuf.Timestamp placed = 3;
  message Line { string sku = 1; int64 qty = 2; }
  repeated Line lines = 4;
  map<string, string> tags = 5;
  enum State { NEW = 0; PAID = 1; }
  State state = 6;
}
`

const moneyProto = `syntax = "proto3";
package acme;
message Money { string currency = 1; int64 units = 2; }
`

func TestStageProtobuf(t *testing.T) {
	f, cl := fakeRegistry(t)
	ctx := context.Background()
	if _, _, err := f.RegisterSchema("acme/money.proto", sr.Schema{Schema: moneyProto, Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	refs := []sr.SchemaReference{{Name: "acme/money.proto", Subject: "acme/money.proto", Version: 1}}
	orderID, _, err := f.RegisterSchema("orders-value", sr.Schema{Schema: ordersProto, Type: sr.TypeProtobuf, References: refs})
	if err != nil {
		t.Fatal(err)
	}
	// Encode with the subject's latest version (its references resolved
	// through the registry), the message named in the file's package.
	enc := newStage(t, cl, Config{Mode: Encode, Message: "Order"})
	js := `{"id":"o-1","total":{"currency":"EUR","units":"12"},"placed":"2026-01-02T03:04:05Z","lines":[{"sku":"a","qty":"2"}],"tags":{"k":"v"},"state":"PAID"}`
	res, err := enc.Transform(ctx, recs("orders", js))
	if err != nil {
		t.Fatal(err)
	}
	framed := one(t, res, 0).Value
	id, rest, _ := ParseFrame(framed)
	idx, _, err := ParseIndexes(rest)
	if id != orderID || err != nil || len(idx) != 1 || idx[0] != 1 {
		t.Fatalf("frame: id %d (want %d), indexes %v, %v", id, orderID, idx, err)
	}
	out, err := newStage(t, cl, Config{}).Transform(ctx, []record.Record{one(t, res, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if got := one(t, out, 0).Value; !sameJSON(t, got, []byte(js)) {
		t.Fatalf("decoded %s\nwant %s", got, js)
	}
	// A nested message: indexes [1, 0] name Order.Line.
	line := newStage(t, cl, Config{Mode: Encode, Message: "acme.v1.Order.Line", Subject: "orders-value"})
	res, err = line.Transform(ctx, recs("orders", `{"sku":"b","qty":"3"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ = ParseFrame(one(t, res, 0).Value)
	if idx, _, _ := ParseIndexes(rest); len(idx) != 2 || idx[0] != 1 || idx[1] != 0 {
		t.Fatalf("nested indexes %v", idx)
	}
	out, err = newStage(t, cl, Config{}).Transform(ctx, []record.Record{one(t, res, 0)})
	if err != nil || !sameJSON(t, one(t, out, 0).Value, []byte(`{"sku":"b","qty":"3"}`)) {
		t.Fatalf("nested decode: %v %v", out, err)
	}
	// JSON that does not fit.
	res, err = enc.Transform(ctx, recs("orders", `{"id":5}`, `{"nope":1}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := range res {
		if res[i].Err == nil || !strings.Contains(res[i].Err.Error(), "subject orders-value, protobuf") {
			t.Errorf("record %d: %v", i, res[i].Err)
		}
	}
	// Message indexes past the schema's messages.
	bad := AppendIndexes(AppendFrame(nil, orderID), []int{7})
	out, err = newStage(t, cl, Config{}).Transform(ctx, []record.Record{{Value: bad}})
	if err != nil || out[0].Err == nil || !strings.Contains(out[0].Err.Error(), "message index [7]") {
		t.Fatalf("bad index: %v %v", out[0].Err, err)
	}
}

func TestStageJSONSchema(t *testing.T) {
	f, cl := fakeRegistry(t)
	ctx := context.Background()
	addr := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`
	if _, _, err := f.RegisterSchema("address", sr.Schema{Schema: addr, Type: sr.TypeJSON}); err != nil {
		t.Fatal(err)
	}
	order := `{"title":"Order","type":"object","properties":{"id":{"type":"string"},"ship_to":{"$ref":"address.json"}},"required":["id"],"additionalProperties":false}`
	refs := []sr.SchemaReference{{Name: "address.json", Subject: "address", Version: 1}}
	if _, _, err := f.RegisterSchema("orders-value", sr.Schema{Schema: order, Type: sr.TypeJSON, References: refs}); err != nil {
		t.Fatal(err)
	}
	enc := newStage(t, cl, Config{Mode: Encode})
	res, err := enc.Transform(ctx, recs("orders", `{"id":"o-1","ship_to":{"city":"Oslo"}}`, `{"id":"o-2","ship_to":{}}`, `{"id":3}`))
	if err != nil {
		t.Fatal(err)
	}
	r := one(t, res, 0)
	for i, want := range []string{"", "at /ship_to: missing property 'city'", "at /id: got number, want string"} {
		if i == 0 {
			continue
		}
		if res[i].Err == nil || !strings.Contains(res[i].Err.Error(), want) || !strings.Contains(res[i].Err.Error(), "subject orders-value, json") {
			t.Errorf("record %d: %v, want %q", i, res[i].Err, want)
		}
	}
	out, err := newStage(t, cl, Config{}).Transform(ctx, []record.Record{r})
	if err != nil || string(one(t, out, 0).Value) != `{"id":"o-1","ship_to":{"city":"Oslo"}}` {
		t.Fatalf("decode: %v %v", out, err)
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// TestStageVerdicts: what is the records' fault is a per-record error that
// names the schema id, the subject and why.
func TestStageVerdicts(t *testing.T) {
	f, cl := fakeRegistry(t)
	ctx := context.Background()
	id, _, err := f.RegisterSchema("orders-value", sr.Schema{Schema: orderV1})
	if err != nil {
		t.Fatal(err)
	}
	var byID atomic.Int64
	f.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/schemas/ids/") {
			byID.Add(1)
		}
		return false
	})
	dec := newStage(t, cl, Config{NegativeTTL: time.Hour})
	good := AppendFrame(nil, id)
	good = append(good, 0x06, 'o', '-', '1', 0x02, 0x04, 0x00) // id "o-1", amount 0.04, note null
	in := []record.Record{
		{Value: append(AppendFrame(nil, 9999), 0)},       // unknown id
		{Value: []byte(`{"id":"plain json"}`)},           // not framed
		{Value: append(AppendFrame(nil, id), 0x06, 'o')}, // truncated
		{Value: good},
		{Value: append(AppendFrame(nil, 9999), 1)}, // unknown id again
	}
	res, err := dec.Transform(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	wants := []string{"schema id 9999", "not in the Confluent wire format (no magic byte 0 and schema id): first byte is 0x7b",
		"schema id " + itoa(id) + " (subject orders-value, avro): id: unexpected end of data", "", "schema id 9999"}
	for i, want := range wants {
		if want == "" {
			if r := one(t, res, i); string(r.Value) != `{"id":"o-1","amount":"0.04","note":null}` {
				t.Errorf("good record: %s", r.Value)
			}
			continue
		}
		if res[i].Err == nil || !strings.Contains(res[i].Err.Error(), want) {
			t.Errorf("record %d: %v, want %q", i, res[i].Err, want)
		}
	}
	if !strings.Contains(res[0].Err.Error(), "HTTP 404") {
		t.Errorf("unknown id error does not say what the registry answered: %v", res[0].Err)
	}
	// The unknown id was asked for once, and is remembered.
	n := byID.Load()
	if _, err := dec.Transform(ctx, in[:1]); err != nil {
		t.Fatal(err)
	}
	if byID.Load() != n {
		t.Errorf("an unknown id was asked for again within the negative TTL")
	}

	// Encode: JSON that does not fit names the subject and id.
	enc := newStage(t, cl, Config{Mode: Encode})
	res, err = enc.Transform(ctx, recs("orders", `{"id":"o-1"}`, `{"id":"o-2","amount":"1.00"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), `schema encode (value): schema id `+itoa(id)+` (subject orders-value, avro): field "amount" of record com.acme.Order is missing`) {
		t.Errorf("missing field: %v", res[0].Err)
	}
	one(t, res, 1)

	// A subject the registry does not have; a schema the registry refuses
	// as incompatible (409).
	res, err = newStage(t, cl, Config{Mode: Encode, Topic: "nosuch"}).Transform(ctx, recs("x", `{}`))
	if err != nil || res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "subject nosuch-value version latest") {
		t.Errorf("unknown subject: %v %v", res[0].Err, err)
	}
	f.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/versions") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error_code":409,"message":"Schema being registered is incompatible with an earlier schema"}`))
			return true
		}
		return false
	})
	v2 := strings.Replace(orderV1, `"name":"id","type":"string"`, `"name":"id","type":"long"`, 1)
	res, err = newStage(t, cl, Config{Mode: Encode, Schema: &sr.Schema{Schema: v2}, AutoRegister: true}).Transform(ctx, recs("orders", `{"id":1,"amount":"1.00"}`, `{"id":2,"amount":"1.00"}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := range res {
		if res[i].Err == nil || !strings.Contains(res[i].Err.Error(), "registering the schema under subject orders-value: Schema being registered is incompatible with an earlier schema (HTTP 409, error code 409)") {
			t.Errorf("incompatible %d: %v", i, res[i].Err)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestStageTransient: a registry that is down, failing or refusing
// credentials fails the whole batch with a transient error; no record gets
// a verdict.
func TestStageTransient(t *testing.T) {
	ctx := context.Background()
	f, cl := fakeRegistry(t)
	id, _, err := f.RegisterSchema("orders-value", sr.Schema{Schema: orderV1})
	if err != nil {
		t.Fatal(err)
	}
	framed := append(AppendFrame(nil, id), 0x06, 'o', '-', '1', 0x02, 0x04, 0x00)
	for _, status := range []int{500, 503, 401, 403, 429} {
		f.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error_code":` + itoa(status) + `,"message":"nope"}`))
			return true
		})
		for name, st := range map[string]*Stage{
			"decode":          newStage(t, cl, Config{}),
			"encode":          newStage(t, cl, Config{Mode: Encode}),
			"encode-register": newStage(t, cl, Config{Mode: Encode, Schema: &sr.Schema{Schema: orderV1}, AutoRegister: true}),
		} {
			in := recs("orders", `{"id":"o-1","amount":"1.00"}`)
			if name == "decode" {
				in[0].Value = framed
			}
			res, err := st.Transform(ctx, in)
			if err == nil || !plugins.IsTransient(err) || res != nil {
				t.Errorf("HTTP %d %s: %v (transient %v), results %v", status, name, err, plugins.IsTransient(err), res)
			}
		}
	}
	f.ClearInterceptors()
	// Down: nothing listens.
	f.Close()
	for _, st := range []*Stage{newStage(t, cl, Config{}), newStage(t, cl, Config{Mode: Encode})} {
		in := recs("orders", `{"id":"o-1","amount":"1.00"}`)
		if st.cfg.Mode == Decode {
			in[0].Value = framed
		}
		if _, err := st.Transform(ctx, in); err == nil || !plugins.IsTransient(err) {
			t.Errorf("registry down: %v", err)
		}
	}
}

// TestStageCachesByID: a warm decode asks the registry nothing.
func TestStageCachesByID(t *testing.T) {
	f, cl := fakeRegistry(t)
	id, _, _ := f.RegisterSchema("orders-value", sr.Schema{Schema: orderV1})
	var calls atomic.Int64
	f.Intercept(func(http.ResponseWriter, *http.Request) bool { calls.Add(1); return false })
	dec := newStage(t, cl, Config{})
	framed := append(AppendFrame(nil, id), 0x06, 'o', '-', '1', 0x02, 0x04, 0x00)
	for i := 0; i < 3; i++ {
		if _, err := dec.Transform(context.Background(), []record.Record{{Value: framed}, {Value: framed}}); err != nil {
			t.Fatal(err)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("%d registry calls for one id", calls.Load())
	}
	f.Close() // cached schemas keep working with the registry gone
	if res, err := dec.Transform(context.Background(), []record.Record{{Value: framed}}); err != nil || res[0].Err != nil {
		t.Fatalf("cached, registry down: %v %v", err, res)
	}
}

// TestProtoSerializedDescriptor: Confluent's serializers register a
// Protobuf schema as a base64 FileDescriptorProto, not .proto source.
func TestProtoSerializedDescriptor(t *testing.T) {
	ctx := context.Background()
	src, err := compileProto(ctx, ordersProto, map[string]string{"acme/money.proto": moneyProto})
	if err != nil {
		t.Fatal(err)
	}
	enc := func(fd protoreflect.FileDescriptor) string {
		fdp := protodesc.ToFileDescriptorProto(fd)
		// As Confluent's Python serializer registers it: no json_name.
		for _, m := range fdp.MessageType {
			for _, f := range m.Field {
				f.JsonName = nil
			}
		}
		b, err := proto.Marshal(fdp)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	money := src.file.Imports().Get(1).FileDescriptor
	p, err := compileProto(ctx, enc(src.file), map[string]string{"acme/money.proto": enc(money)})
	if err != nil {
		t.Fatal(err)
	}
	md, idx, err := p.byName("Order.Line")
	if err != nil || md.FullName() != "acme.v1.Order.Line" || len(idx) != 2 || idx[0] != 1 {
		t.Fatalf("%v %v %v", md, idx, err)
	}
	if o, _, _ := p.byName("Order"); o.Fields().ByName("lines").JSONName() != "lines" {
		t.Fatalf("json name %q", o.Fields().ByName("lines").JSONName())
	}
	// Mixed: .proto source that imports a serialized one.
	if _, err := compileProto(ctx, ordersProto, map[string]string{"acme/money.proto": enc(money)}); err != nil {
		t.Fatal(err)
	}
}

// TestStageKeys: part = "key" decodes and encodes keys and leaves values
// alone; a null key passes.
func TestStageKeys(t *testing.T) {
	_, cl := fakeRegistry(t)
	ctx := context.Background()
	keySchema := `{"type":"record","name":"Key","fields":[{"name":"id","type":"long"}]}`
	enc := newStage(t, cl, Config{Mode: Encode, Key: true, Schema: &sr.Schema{Schema: keySchema}, AutoRegister: true})
	in := []record.Record{{Topic: "orders", Key: []byte(`{"id":7}`), Value: []byte("v")}, {Topic: "orders", Value: []byte("w")}}
	res, err := enc.Transform(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	r := one(t, res, 0)
	if id, _, err := ParseFrame(r.Key); err != nil || string(r.Value) != "v" {
		t.Fatalf("key %x (id %d, %v), value %q", r.Key, id, err, r.Value)
	}
	if ss, err := cl.SchemaByVersion(ctx, "orders-key", -1); err != nil || ss.Schema.Schema == "" {
		t.Fatalf("subject orders-key: %v", err)
	}
	if r1 := one(t, res, 1); r1.Key != nil {
		t.Fatalf("null key became %q", r1.Key)
	}
	out, err := newStage(t, cl, Config{Key: true}).Transform(ctx, []record.Record{r, one(t, res, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if k := one(t, out, 0); string(k.Key) != `{"id":7}` || string(k.Value) != "v" {
		t.Fatalf("decoded key %q value %q", k.Key, k.Value)
	}
	// A value stage does not touch the framed key.
	v, err := newStage(t, cl, Config{}).Transform(ctx, []record.Record{{Key: r.Key}})
	if err != nil || string(one(t, v, 0).Key) != string(r.Key) {
		t.Fatalf("value stage on a null value: %v", err)
	}
}

// TestStageConcurrent: pipeline workers call one stage at once, from a
// cold cache (run with -race).
func TestStageConcurrent(t *testing.T) {
	f, cl := fakeRegistry(t)
	ctx := context.Background()
	var ids []int
	for v := 0; v < 4; v++ {
		s := strings.Replace(orderV1, `"default":null}`, fmt.Sprintf(`"default":null},{"name":"f%d","type":"int","default":%d}`, v, v), 1)
		id, _, err := f.RegisterSchema("orders-value", sr.Schema{Schema: s})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	dec := newStage(t, cl, Config{})
	enc := newStage(t, cl, Config{Mode: Encode, Subject: "orders-value", Version: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]record.Record, 64)
			for i := range batch {
				v := append(AppendFrame(nil, ids[(i+w)%4]), 0x06, 'o', '-', '1', 0x02, 0x04, 0x00, byte(2*((i+w)%4)))
				batch[i] = record.Record{Topic: "orders", Value: v}
			}
			for round := 0; round < 20; round++ {
				res, err := dec.Transform(ctx, batch)
				if err != nil {
					errs <- err
					return
				}
				js := make([]record.Record, len(res))
				for i := range res {
					if res[i].Err != nil {
						errs <- res[i].Err
						return
					}
					js[i] = res[i].Records[0]
				}
				res, err = enc.Transform(ctx, js)
				if err != nil {
					errs <- err
					return
				}
				for i := range res {
					// Version 2 has field f1: records of the other versions
					// lack it (its default fills it) or carry one it lacks.
					if res[i].Err != nil && !strings.Contains(res[i].Err.Error(), "is not in record") {
						errs <- res[i].Err
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
