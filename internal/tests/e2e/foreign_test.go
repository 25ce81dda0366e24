package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// foreignCase is a pipeline of TestForeignExactlyOnce: a module of another
// host's ABI, built unchanged from its SDK's example, between two topics,
// with what its SDK documents it makes of each input record.
type foreignCase struct {
	name     string
	dir, mod string // testenv.ForeignWasm
	config   string // the stage's config table, TOML
	value    func(i int) string
	// want is what record i becomes: output values (keyed as the input,
	// or with no key if nullKey), or dead (rejected: a dead letter).
	want    func(i int) (values []string, dead bool)
	nullKey bool
	// registry: the module calls the Schema Registry (the daemon's
	// [schema_registry], testenv.SchemaRegistry).
	registry bool
}

// foreignCases are TestForeignExactlyOnce's pipelines. avroID is the id
// the Schema Registry gave json-to-avro's schema, known once it ran.
func foreignCases(avroID *uint32) []foreignCase {
	return []foreignCase{
		// tee writes each record to every REDPANDA_OUTPUT_TOPIC_N: with
		// the pipeline's one output, once to the sink.
		{name: "rp-tee", dir: "redpanda/rust", mod: "tee",
			value: func(i int) string { return fmt.Sprintf(`{"id":%d}`, i) },
			want:  func(i int) ([]string, bool) { return []string{fmt.Sprintf(`{"id":%d}`, i)}, false }},
		// json-to-avro registers its schema at start and writes Avro in
		// the wire format; an order without an id fails the transform
		// (the SDK stops it) and is a dead letter.
		{name: "rp-json-to-avro", dir: "redpanda/json-to-avro", mod: "plugin", registry: true,
			value: func(i int) string {
				if i%500 == 499 {
					return fmt.Sprintf(`{"item":"pen-%d"}`, i)
				}
				return fmt.Sprintf(`{"id":%d,"item":"pen-%d"}`, i, i)
			},
			want: func(i int) ([]string, bool) {
				if i%500 == 499 {
					return nil, true
				}
				v := binary.BigEndian.AppendUint32([]byte{0}, *avroID)
				v = binary.AppendVarint(v, int64(i)) // Avro long: zigzag varint
				item := fmt.Sprintf("pen-%d", i)
				v = append(binary.AppendVarint(v, int64(len(item))), item...)
				return []string{string(v)}, false
			}},
		{name: "rp-identity", dir: "redpanda/rust", mod: "identity",
			value: func(i int) string { return fmt.Sprintf(`{"id":%d}`, i) },
			want:  func(i int) ([]string, bool) { return []string{fmt.Sprintf(`{"id":%d}`, i)}, false }},
		{name: "rp-validation", dir: "redpanda/rust", mod: "validation_filter",
			value: func(i int) string {
				if i%7 == 3 {
					return fmt.Sprintf(`{"id":%d,`, i) // not JSON
				}
				return fmt.Sprintf(`{"id":%d}`, i)
			},
			want: func(i int) ([]string, bool) {
				if i%7 == 3 {
					return nil, false
				}
				return []string{fmt.Sprintf(`{"id":%d}`, i)}, false
			}},
		// The transcoder writes records of its own: the input's key, no
		// headers (found by key).
		{name: "rp-transcoder", dir: "redpanda/rust", mod: "transcoder",
			value: func(i int) string { return fmt.Sprintf("a,b\nname-%d,%d\n", i, i) },
			want:  func(i int) ([]string, bool) { return []string{fmt.Sprintf(`{"a":"name-%d","b":%d}`, i, i)}, false }},
		{name: "go-regexp", dir: "redpanda/go", mod: "regexp_filter", config: `PATTERN = "[02468]$"`,
			value: func(i int) string { return strconv.Itoa(i) },
			want: func(i int) ([]string, bool) {
				if i%2 != 0 {
					return nil, false
				}
				return []string{strconv.Itoa(i)}, false
			}},
		// validation writes what is not JSON to topic invalid_json, which
		// a pipeline of one output does not have: a dead letter, naming it.
		{name: "go-validation", dir: "redpanda/go", mod: "validation",
			value: func(i int) string {
				if i%250 == 7 {
					return fmt.Sprintf(`{"id":%d`, i)
				}
				return fmt.Sprintf(`{"id":%d}`, i)
			},
			want: func(i int) ([]string, bool) {
				if i%250 == 7 {
					return nil, true
				}
				return []string{fmt.Sprintf(`{"id":%d}`, i)}, false
			}},
		{name: "fluvio-filter", dir: "fluvio", mod: "filter",
			value: func(i int) string {
				if i%3 == 0 {
					return fmt.Sprintf("apple-%d", i)
				}
				return fmt.Sprintf("kiwi-%d", i)
			},
			want: func(i int) ([]string, bool) {
				if i%3 != 0 {
					return nil, false
				}
				return []string{fmt.Sprintf("apple-%d", i)}, false
			}},
		{name: "fluvio-map", dir: "fluvio", mod: "map",
			value: func(i int) string {
				if i%1000 == 999 {
					return fmt.Sprintf("x%d", i) // not an i32: the SmartModule rejects it
				}
				return strconv.Itoa(i)
			},
			want: func(i int) ([]string, bool) {
				if i%1000 == 999 {
					return nil, true
				}
				return []string{strconv.Itoa(2 * i)}, false
			}},
		{name: "fluvio-array-map", dir: "fluvio", mod: "array_map", nullKey: true,
			value: func(i int) string {
				els := make([]string, i%4)
				for j := range els {
					els[j] = fmt.Sprintf(`{"n":%d}`, i*10+j)
				}
				return "[" + strings.Join(els, ",") + "]"
			},
			want: func(i int) ([]string, bool) {
				var out []string
				for j := range i % 4 {
					out = append(out, fmt.Sprintf(`{"n":%d}`, i*10+j))
				}
				return out, false
			}},
	}
}

// envInt is the integer in environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive integer", name, s)
		}
		return n
	}
	return def
}

// TestForeignExactlyOnce: the example transforms of Redpanda's Rust and Go
// SDKs and the example SmartModules of Fluvio's, built unchanged by their
// build.sh, and json-to-avro (written with Redpanda's Rust SDK and its
// Schema Registry client, served by the daemon's [schema_registry]), each
// in a kafka -> transform -> kafka pipeline of one daemon
// under exactly-once, the daemon SIGKILLed at random moments while
// records flow and restarted: a read_committed reader of each output sees
// exactly what the SDK's documented semantics make of the input, each
// record once (0 missing, 0 duplicates), and the records a SmartModule
// rejects are in the dead-letter topic, each once.
//
// STREAMD_FOREIGN_RECORDS (records per pipeline) and STREAMD_FOREIGN_KILLS
// size it; the defaults keep it short for CI (docs/plugins.md has the
// figures of a run of 100,000 records per pipeline).
func TestForeignExactlyOnce(t *testing.T) {
	var avroID uint32
	cases := foreignCases(&avroID)
	modules := make([]string, len(cases))
	for i, c := range cases {
		modules[i] = testenv.ForeignWasm(t, c.dir, c.mod)
	}
	registry := testenv.SchemaRegistry(t)
	b := testenv.Kafka(t)
	n, kills := envInt(t, "STREAMD_FOREIGN_RECORDS", 3000), envInt(t, "STREAMD_FOREIGN_KILLS", 3)
	if !b.Real && os.Getenv("STREAMD_FOREIGN_RECORDS") == "" {
		n, kills = 1500, 2 // the in-process broker shares the test's CPU
	}
	type pipe struct {
		foreignCase
		in, out, dlq string
	}
	var pipes []*pipe
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "data_dir = %q\n%s[schema_registry]\nurl = %q\n", filepath.Join(t.TempDir(), "data"), brokersTOML(b), registry)
	for i, c := range cases {
		p := &pipe{foreignCase: c, in: testenv.Topic(t, c.name+"-in"), out: testenv.Topic(t, c.name+"-out"), dlq: testenv.Topic(t, c.name+"-dlq")}
		for _, topic := range []string{p.in, p.out, p.dlq} {
			b.CreateTopic(t, topic, 2)
		}
		config := ""
		if c.config != "" {
			config = "[pipeline.transform.config]\n" + c.config + "\n"
		}
		fmt.Fprintf(&cfg, `
[[pipeline]]
name = %q
delivery = "exactly-once"
max_in_flight = 2000
[pipeline.batch]
max_records = 256
[pipeline.transaction]
interval = "200ms"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
session_timeout = "10s"
[[pipeline.transform]]
type = "wasm"
name = %q
path = %q
%s[pipeline.sink]
type = "kafka"
topic = %q
[pipeline.errors]
policy = "dlq"
dlq_topic = %q
`, c.name, p.in, testenv.Topic(t, c.name+"-g"), c.mod, modules[i], config, p.out, p.dlq)
		pipes = append(pipes, p)
	}
	config := writeConfig(t, cfg.String())

	// The input arrives while the daemon is killed and restarted.
	producer := b.Client(t)
	prodDone := make(chan struct{})
	const chunk = 500
	go func() {
		defer close(prodDone)
		pace := time.Duration(kills) * 4 * time.Second / time.Duration(max(n/chunk, 1))
		for from := 0; from < n; from += chunk {
			t0 := time.Now()
			var recs []*kgo.Record
			for _, p := range pipes {
				for i := from; i < min(from+chunk, n); i++ {
					recs = append(recs, &kgo.Record{Topic: p.in, Key: []byte("k-" + strconv.Itoa(i)), Value: []byte(p.value(i)),
						Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(i))}}})
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := producer.ProduceSync(ctx, recs...).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			time.Sleep(pace - time.Since(t0))
		}
	}()
	adm := kadm.NewClient(b.Client(t))
	outs := func() int64 {
		var s int64
		for _, p := range pipes {
			s += endSum(adm, p.out)
		}
		return s
	}
	rng := rand.New(rand.NewPCG(33, 1))
	killed := 0
	for k := range kills {
		before := outs()
		d := start(t, config)
		for deadline := time.Now().Add(60 * time.Second); outs() <= before && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if outs() <= before {
			select {
			case <-prodDone: // it had caught up with the whole input
				d.kill(t)
				t.Logf("run %d found nothing left to do", k+1)
				continue
			default:
			}
			t.Fatalf("run %d wrote nothing in 60 s", k+1)
		}
		time.Sleep(time.Duration(50+rng.IntN(450)) * time.Millisecond)
		d.kill(t)
		killed++
	}
	<-prodDone
	d := start(t, config)
	for _, p := range pipes {
		if p.registry {
			rc, err := sr.NewClient(sr.URLs(registry))
			if err != nil {
				t.Fatal(err)
			}
			// The transform registers its schema as it starts, which
			// the daemon, just started, may not have done yet.
			var s sr.SubjectSchema
			for deadline := time.Now().Add(90 * time.Second); ; {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				s, err = rc.SchemaByVersion(ctx, p.out+"-value", -1)
				cancel()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: the schema it registers under %s-value: %v", p.name, p.out, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			avroID = uint32(s.ID)
		}
	}
	// Every output and dead-letter topic, read at once.
	type read struct {
		want, got []string
		cl        *kgo.Client
		line      func(*kgo.Record) string
	}
	reads := make([]*read, 2*len(pipes))
	for j, p := range pipes {
		out, dlq := &read{}, &read{}
		for i := range n {
			vals, dead := p.want(i)
			for _, v := range vals {
				key := "k-" + strconv.Itoa(i)
				if p.nullKey {
					key = "null"
				}
				out.want = append(out.want, foreignLine(i, key, v))
			}
			if dead {
				dlq.want = append(dlq.want, strconv.Itoa(i))
			}
		}
		out.line = func(r *kgo.Record) string {
			key := "null"
			if r.Key != nil {
				key = string(r.Key)
			}
			return foreignLine(foreignID(r), key, string(r.Value))
		}
		dlq.line = func(r *kgo.Record) string { return strconv.Itoa(foreignID(r)) }
		for k, topic := range []string{p.out, p.dlq} {
			rd := []*read{out, dlq}[k]
			rd.cl = b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			reads[2*j+k] = rd
		}
	}
	var wg sync.WaitGroup
	for _, rd := range reads {
		wg.Go(func() { rd.got = readForeign(rd.cl, len(rd.want), rd.line) })
	}
	wg.Wait()
	for j, p := range pipes {
		out, dlq := reads[2*j], reads[2*j+1]
		missing, dups := diffMultiset(out.want, out.got)
		deadMissing, deadDups := diffMultiset(dlq.want, dlq.got)
		t.Logf("%s (%s): %d kills mid-flow, %d input records: %d output records, %d missing, %d duplicates or unexpected; %d dead letters, %d missing, %d duplicates (read_committed)",
			p.name, p.mod, killed, n, len(out.got), missing, dups, len(dlq.got), deadMissing, deadDups)
		if missing+dups+deadMissing+deadDups > 0 {
			t.Errorf("%s: output %d missing, %d duplicates or unexpected; DLQ %d missing, %d duplicates", p.name, missing, dups, deadMissing, deadDups)
		}
	}
	d.stop(t)
}

// foreignID is the input record an output record came from: its seq
// header, or its key k-N.
func foreignID(r *kgo.Record) int {
	for _, h := range r.Headers {
		if h.Key == "seq" {
			n, _ := strconv.Atoi(string(h.Value))
			return n
		}
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(r.Key), "k-"))
	if err != nil {
		return -1
	}
	return n
}

// foreignLine is how an output record of input i is compared.
func foreignLine(i int, key, value string) string { return strconv.Itoa(i) + " " + key + " " + value }

// readForeign reads cl's topic (from its start, read_committed) until
// want records were read and then until nothing comes for a second (a
// duplicate would be in the log by then: the daemon has caught up), or 3
// minutes, and returns each record as line makes it.
func readForeign(cl *kgo.Client, want int, line func(*kgo.Record) string) []string {
	var out []string
	deadline := time.Now().Add(3 * time.Minute)
	quiet := time.Time{}
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		got := 0
		fs.EachRecord(func(r *kgo.Record) { out = append(out, line(r)); got++ })
		switch {
		case len(out) < want || got > 0:
			quiet = time.Time{}
		case quiet.IsZero():
			quiet = time.Now()
		case time.Since(quiet) > time.Second:
			return out
		}
	}
	return out
}

// diffMultiset counts the lines of want that got lacks, and the lines of
// got that want does not have (or has fewer times).
func diffMultiset(want, got []string) (missing, extra int) {
	count := map[string]int{}
	for _, w := range want {
		count[w]++
	}
	for _, g := range got {
		count[g]--
	}
	for _, c := range count {
		if c > 0 {
			missing += c
		} else {
			extra -= c
		}
	}
	return missing, extra
}
