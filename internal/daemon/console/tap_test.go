package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/console"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// feed calls the stage "upper" of obs every 5 ms with 100 records until
// ctx is done: record i comes out upper-cased, every 10th is rejected,
// every 10th+5 dropped.
func feed(ctx context.Context, obs *console.StageObserver) {
	in := make([]record.Record, 100)
	out := make([]plugins.Result, 100)
	for n := 0; ctx.Err() == nil; n++ {
		for i := range in {
			v := fmt.Sprintf("value %d-%d %s", n, i, strings.Repeat("x", 100))
			in[i] = record.Record{Topic: "t", Partition: 1, Offset: int64(n*100 + i), Key: []byte(fmt.Sprint(i)), Value: []byte(v)}
			switch i % 10 {
			case 0:
				out[i] = plugins.Result{Err: errors.New("rejected: bad value")}
			case 5:
				out[i] = plugins.Result{}
			default:
				out[i] = plugins.Result{Records: []record.Record{{Key: in[i].Key, Value: []byte(strings.ToUpper(v))}}}
			}
		}
		obs.StageCall("upper", in, out, nil, 300*time.Microsecond)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTap: a tap streams sampled records of the stage with what came
// out for each, at most its rate, values cut at its size; limits and
// bad requests are refused; the stage counters and latency reach the
// samples.
func TestTap(t *testing.T) {
	p := runPipeline(t, "p", 10)
	c := console.New(console.WithPipelines(func() []console.Pipeline {
		return []console.Pipeline{{Name: "p", P: p, Stages: []console.Stage{{Name: "upper", Type: "wasm"}}}}
	}), console.WithTapLimits(console.TapLimits{Rate: 50, ValueBytes: 64, Open: 2}), console.WithSampling(200*time.Millisecond, time.Minute))
	obs := c.Observer("p", []string{"upper"})
	base := serve(t, c)
	c.Start()
	defer testenv.Close(t, context.Background(), c)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); feed(ctx, obs) }()
	defer func() { cancel(); wg.Wait() }()

	for _, tt := range []struct {
		path string
		code int
		want string
	}{
		{"/ui/api/tap/nope", 404, `no pipeline \"nope\"`},
		{"/ui/api/tap/p/other", 404, `has no stage \"other\" (stages: [upper])`},
		{"/ui/api/tap/p?rate=100", 400, "at most 50"},
		{"/ui/api/tap/p?rate=0", 400, "above 0"},
		{"/ui/api/tap/p?bytes=65", 400, "want 1 to 64"},
	} {
		res, err := http.Get(base + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != tt.code || !strings.Contains(string(b), tt.want) {
			t.Errorf("%s: %d %s, want %d %q", tt.path, res.StatusCode, b, tt.code, tt.want)
		}
	}

	// A client that opens a tap and reads nothing never holds up the
	// stage: the tap drops what it cannot send. (A blocked send would
	// hang here.)
	idle, err := http.Get(base + "/ui/api/tap/p/upper?rate=50")
	if err != nil {
		t.Fatal(err)
	}
	in := []record.Record{{Value: []byte("v")}}
	for range 20000 {
		obs.StageCall("upper", in, []plugins.Result{{Records: in}}, nil, time.Microsecond)
	}
	_ = idle.Body.Close()
	waitTapsClosed(t, base)

	res, err := http.Get(base + "/ui/api/tap/p/upper?rate=20&bytes=32")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(res.Body.Close)
	ch := readEvents(res.Body)
	// Two taps may be open; the third is refused.
	res2, err := http.Get(base + "/ui/api/tap/p")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(res2.Body.Close)
	res3, err := http.Get(base + "/ui/api/tap/p")
	if err != nil {
		t.Fatal(err)
	}
	b3, _ := io.ReadAll(res3.Body)
	_ = res3.Body.Close()
	if res3.StatusCode != 429 || !strings.Contains(string(b3), "tap_max_open") {
		t.Errorf("third tap: %d %s", res3.StatusCode, b3)
	}
	_ = res2.Body.Close()

	start := time.Now()
	var records, rejected, dropped, kept int
	var lastStatus struct{ Sent, Skipped int64 }
	for time.Since(start) < 3*time.Second {
		var ev event
		select {
		case ev = <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("no tap event in 5 s")
		}
		switch ev.name {
		case "status":
			if err := json.Unmarshal(ev.data, &lastStatus); err != nil {
				t.Fatalf("status event %s: %v", ev.data, err)
			}
		case "record":
			records++
			var te console.TapEvent
			if err := json.Unmarshal(ev.data, &te); err != nil {
				t.Fatal(err)
			}
			if te.Stage != "upper" || te.Batch != 100 || te.TookMS != 0.3 || te.In.Topic != "t" || te.In.Partition != 1 {
				t.Fatalf("event %+v", te)
			}
			if !te.In.Value.Cut || te.In.Value.Len < 100 || len(te.In.Value.Text) > 32 {
				t.Fatalf("input value not cut at 32 bytes: %+v", te.In.Value)
			}
			i := te.In.Offset % 100
			switch i % 10 {
			case 0:
				rejected++
				if te.Err != "rejected: bad value" || len(te.Out) != 0 {
					t.Fatalf("rejected record %d: %+v", i, te)
				}
			case 5:
				dropped++
				if te.Err != "" || len(te.Out) != 0 {
					t.Fatalf("dropped record %d: %+v", i, te)
				}
			default:
				kept++
				if len(te.Out) != 1 || !strings.HasPrefix(te.Out[0].Value.Text, strings.ToUpper(te.In.Value.Text[:10])) {
					t.Fatalf("record %d: in %q out %+v", i, te.In.Value.Text, te.Out)
				}
			}
		}
	}
	// 20/s for 3 s, plus the first at once: about 61; the feed offers
	// some 50,000.
	if records < 30 || records > 70 {
		t.Fatalf("%d records sampled in 3 s at 20/s", records)
	}
	// Sampled across the calls, not always their first record.
	if kept == 0 || rejected == 0 || dropped == 0 {
		t.Fatalf("sampled %d kept, %d rejected, %d dropped", kept, rejected, dropped)
	}
	if lastStatus.Skipped < 1000 {
		t.Fatalf("status says %d records not sampled", lastStatus.Skipped)
	}

	// The stage's rates and latency reach the series.
	time.Sleep(500 * time.Millisecond)
	var info struct {
		Tap bool `json:"tap"`
	}
	getJSON(t, base+"/ui/api/info", &info)
	if !info.Tap {
		t.Fatal("info says the tap is off")
	}
	er, err := http.Get(base + "/ui/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(er.Body.Close)
	_, hello := next(t, readEvents(er.Body), 5*time.Second)
	ss := hello.Samples["p"]
	last := ss[len(ss)-1]
	if len(last.Stages) != 1 {
		t.Fatalf("no stage samples: %+v", last)
	}
	st := last.Stages[0]
	// 100 records a call, a call every 5 ms or more: up to 20,000/s in;
	// 80% out, 10% rejected; every call took 300 µs (bucket up to 512 µs).
	if st.In < 1000 || st.Out < 0.7*st.In || st.Out > 0.9*st.In || st.Errors < 0.05*st.In || st.P50 != 0.512 || st.P99 != 0.512 {
		t.Fatalf("stage sample %+v", st)
	}
}

// waitTapsClosed waits until the daemon has noticed that every tap's
// client is gone.
func waitTapsClosed(t *testing.T, base string) {
	t.Helper()
	waitFor(t, 10*time.Second, "closed taps released", func() (bool, string) {
		var info struct {
			TapsOpen int `json:"taps_open"`
		}
		getJSON(t, base+"/ui/api/info", &info)
		return info.TapsOpen == 0, fmt.Sprintf("%d taps open", info.TapsOpen)
	})
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, err := (&http.Client{Timeout: 30 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Ignore(res.Body.Close)
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
