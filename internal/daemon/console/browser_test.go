package console_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// consoleSetup is a daemon with every page's subject: "orders" moves
// records through a Wasm stage; "payments" sends rejected records to its
// dead-letter topic; "refunds" stops on a rejected record (policy stop);
// a journal replicator with a quarantined record; a fluid bridge with a
// fluid consumer pipeline.
type consoleSetup struct {
	d                                       *daemon
	topics                                  map[string]string
	rate                                    float64
	paymentsBad, paymentsN, refundsBadIndex int
}

func newConsoleSetup(t *testing.T) *consoleSetup {
	t.Helper()
	b := testenv.Kafka(t)
	dir := t.TempDir()
	identity := wat(t, "identity", dir, "identity.wasm")
	poison := wat(t, "poison", dir, "poison.wasm")
	tp := map[string]string{}
	for _, n := range []string{"orders-out", "payments", "payments-out", "payments-dlq", "refunds", "refunds-out", "journal", "quarantine", "fluid-orders", "fluid-state"} {
		tp[n] = testenv.Topic(t, n)
		if n != "fluid-state" {
			b.CreateTopic(t, tp[n], 2)
		}
	}
	meta := filepath.Join(dir, ".fluid", "v1")
	if err := os.MkdirAll(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(meta, "orders.json"), []byte(`{"type":"object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(meta, "manifest.json"), []byte(fmt.Sprintf(`{"topics":{%q:{"schema":"orders.json"}}}`, tp["fluid-orders"])), 0o644); err != nil {
		t.Fatal(err)
	}
	// legacy's plugin is not a Wasm module: it fails to load, alone.
	notWasm := filepath.Join(dir, "legacy.wasm")
	if err := os.WriteFile(notWasm, []byte("not a module"), 0o644); err != nil {
		t.Fatal(err)
	}
	seeds := `"` + strings.Join(b.Seeds, `", "`) + `"`
	s := &consoleSetup{topics: tp, rate: 1500, paymentsN: 300, paymentsBad: 30, refundsBadIndex: 40}
	body := fmt.Sprintf(`
[kafka]
brokers = [%s]
partitions = 2
[journal]
store = "sqlite:%s"
quarantine_topic = %q
[fluid]
metadata = %q
state_topic = %q

[[pipeline]]
name = "orders"
[pipeline.source]
type = "generate"
rate = %v
keys = 50
[[pipeline.transform]]
name = "enrich"
type = "wasm"
path = %q
[pipeline.sink]
type = "kafka"
topic = %q

[[pipeline]]
name = "payments"
[pipeline.source]
type = "kafka"
topics = [%q]
group = "payments"
[[pipeline.transform]]
name = "validate"
type = "wasm"
path = %q
[pipeline.sink]
type = "kafka"
topic = %q
[pipeline.errors]
policy = "dlq"
dlq_topic = %q

[[pipeline]]
name = "refunds"
[pipeline.source]
type = "kafka"
topics = [%q]
group = "refunds"
[[pipeline.transform]]
name = "validate"
type = "wasm"
path = %q
[pipeline.sink]
type = "kafka"
topic = %q

[[pipeline]]
name = "journal-replicator"
[pipeline.source]
type = "kafka"
topics = [%q]
group = "journal"
[pipeline.sink]
type = "journal"

[[pipeline]]
name = "orders-v1-reader"
[pipeline.source]
type = "kafka"
topics = [%q]
group = "v1-readers"
[pipeline.source.fluid]
compatible_version = 1
[pipeline.sink]
type = "drop"

[[pipeline]]
name = "legacy"
[pipeline.source]
type = "generate"
rate = 1
[[pipeline.transform]]
name = "old"
type = "wasm"
path = %q
[pipeline.sink]
type = "drop"
`, seeds, filepath.Join(dir, "journal.db"), tp["quarantine"], filepath.Join(dir, ".fluid"), tp["fluid-state"],
		s.rate, identity, tp["orders-out"],
		tp["payments"], poison, tp["payments-out"], tp["payments-dlq"],
		tp["refunds"], poison, tp["refunds-out"],
		tp["journal"], tp["fluid-orders"], notWasm)
	s.d = startDaemon(t, body)
	cl := b.Client(t)
	var pay []string
	for i := range s.paymentsN {
		if i%(s.paymentsN/s.paymentsBad) == 7 {
			pay = append(pay, fmt.Sprintf("reject payment %d: card expired", i))
		} else {
			pay = append(pay, fmt.Sprintf(`{"payment":%d,"amount":%d}`, i, 10+i%90))
		}
	}
	produce(t, cl, tp["payments"], pay)
	var ref []string
	for i := range 100 {
		if i == s.refundsBadIndex {
			ref = append(ref, "reject refund: no such order")
		} else {
			ref = append(ref, fmt.Sprintf(`{"refund":%d}`, i))
		}
	}
	produce(t, cl, tp["refunds"], ref)
	// A journal action whose header is not one: quarantined.
	produceHeaders(t, cl, tp["journal"], "account-1", "garbage", map[string]string{"journal.action": "{not json"})
	produce(t, cl, tp["fluid-orders"], []string{`{"id":"o1"}`, `{"id":"o2"}`})
	return s
}

// TestBrowserConsole: with records
// moving, the overview's records/s plot shows a value within 20% of the
// rate /metrics gives over the same seconds, and it moves; a pipeline
// stopped by a rejected record (policy stop) shows as failed with the
// error; every page loads without an error in the browser console; a
// screenshot of each page goes to bin/.
func TestBrowserConsole(t *testing.T) {
	br := newBrowser(t)
	s := newConsoleSetup(t)
	base := s.d.Base

	br.do(t, 60*time.Second, chromedp.Navigate(base+"/ui/"))
	br.waitJS(t, 60*time.Second, "the overview's cards", `document.querySelectorAll("section.card").length === 6`)
	// The plot of orders moves: wait for 12 s of samples at full rate.
	outSel := `document.querySelector('#card-orders .plot [data-metric="out"]')`
	br.waitJS(t, 90*time.Second, "records flowing in the orders plot", outSel+`.getAttribute("data-value") > 0`)
	time.Sleep(11 * time.Second)

	// Within 20% of /metrics over the same 10 s: the page's figure is the
	// mean of its last 10 one-second samples.
	type point struct {
		v   float64
		now string
		t   time.Time
	}
	read := func() point {
		return point{
			v:   eval[float64](t, br, `Number(`+outSel+`.getAttribute("data-value"))`),
			now: eval[string](t, br, `document.querySelector('#card-orders .plot svg').getAttribute("data-now")`),
			t:   time.Now(),
		}
	}
	m0, t0 := metric(t, base, "streamd_records_out_total", `pipeline="orders"`), time.Now()
	time.Sleep(10 * time.Second)
	m1, t1 := metric(t, base, "streamd_records_out_total", `pipeline="orders"`), time.Now()
	p1 := read()
	want := (m1 - m0) / t1.Sub(t0).Seconds()
	t.Logf("orders: the page shows %.1f records/s out; /metrics: %.0f records in %.1f s = %.1f/s; generator rate %.0f/s",
		p1.v, m1-m0, t1.Sub(t0).Seconds(), want, s.rate)
	if want <= 0 || math.Abs(p1.v-want) > 0.2*want {
		t.Fatalf("records/s on the page %.1f, /metrics %.1f: more than 20%% apart", p1.v, want)
	}
	time.Sleep(2 * time.Second)
	p2 := read()
	if p2.now == p1.now {
		t.Fatalf("the plot did not move in 2 s (data-now %s)", p1.now)
	}
	path := func() string {
		return eval[string](t, br, `document.querySelector('#card-orders .plot path[data-series="out"]').getAttribute("d")`)
	}
	d1 := path()
	time.Sleep(2 * time.Second)
	if d2 := path(); d1 == d2 || len(d2) < 100 {
		t.Fatalf("the records/s line did not change in 2 s (%d bytes of path)", len(d2))
	}

	// refunds stopped at its rejected record: failed, with the error.
	br.waitJS(t, 60*time.Second, "refunds shown as failed", `(document.querySelector('#card-refunds .state')||{}).textContent === "failed"`)
	errText := eval[string](t, br, `document.querySelector('#card-refunds .error').textContent`)
	wantErr := fmt.Sprintf("record %s/", s.topics["refunds"])
	if !strings.Contains(errText, wantErr) || !strings.Contains(errText, "rejected by poison.wat") || !strings.Contains(errText, "error policy: stop") {
		t.Fatalf("refunds error on the page: %q", errText)
	}
	// legacy's plugin did not load: failed, with the cause and what to do.
	br.waitJS(t, 60*time.Second, "legacy shown as failed", `(document.querySelector('#card-legacy .state')||{}).textContent === "failed"`)
	legacy := eval[string](t, br, `document.querySelector('#card-legacy').textContent`)
	if !strings.Contains(legacy, "legacy.wasm") || !strings.Contains(legacy, "not a streamd plugin") || !strings.Contains(legacy, "then reload: streamd ctl reload") {
		t.Fatalf("legacy on the page: %q", legacy)
	}
	// payments sent its rejected records to the dead-letter queue.
	br.waitJS(t, 60*time.Second, "payments' dead letters counted", fmt.Sprintf(`document.querySelector('#card-payments [data-num="dlq"] b').textContent === "%d"`, s.paymentsBad))
	br.screenshot(t, "overview")

	// The pipeline page: stages, partitions with their owner.
	br.do(t, 30*time.Second, chromedp.Navigate(base+"/ui/#/p/payments"))
	br.waitJS(t, 30*time.Second, "the pipeline page's stage row", `!!document.querySelector('tr[data-stage="validate"]')`)
	br.waitJS(t, 30*time.Second, "partitions with an owner", `[...document.querySelectorAll("td.mono")].some(td => td.textContent.includes("streamd"))`)
	br.screenshot(t, "pipeline")

	// The dead-letter page: the 30 dead letters, one opened.
	br.do(t, 30*time.Second, chromedp.Navigate(base+"/ui/#/dlq/payments"))
	br.waitJS(t, 60*time.Second, "the dead letters listed", fmt.Sprintf(`document.querySelectorAll('table[data-dlq] tbody tr').length === %d`, s.paymentsBad))
	br.do(t, 10*time.Second, chromedp.Click(`table[data-dlq] tbody tr:nth-child(3)`))
	br.waitJS(t, 30*time.Second, "a dead letter opened", `!!document.querySelector('[data-entry]') && document.querySelector('[data-entry]').textContent.includes("rejected by poison.wat")`)
	br.screenshot(t, "dlq")
	// Replay them through the pipeline from the page: the plugin still
	// rejects them, so each is rejected again (a new dead letter); the
	// job's row says so.
	br.do(t, 10*time.Second, chromedp.SetValue(chromedp.CSS(`select[name="to"]`), "pipeline"), chromedp.Click(chromedp.CSS(`button[data-replay-button]`)))
	br.waitJS(t, 60*time.Second, "the replay done", fmt.Sprintf(`(() => { const r = document.querySelector('tr[data-replay][data-done="1"]'); return !!r && r.querySelector('[data-replayed]').textContent === "%d" && r.textContent.includes("done"); })()`, s.paymentsBad))
	rej := eval[string](t, br, `document.querySelector('tr[data-replay] td:nth-child(6)').textContent`)
	if rej != fmt.Sprint(s.paymentsBad) {
		t.Fatalf("rejected again: %q, want %d", rej, s.paymentsBad)
	}

	// Journal: the replicator and its quarantined record.
	br.do(t, 30*time.Second, chromedp.Navigate(base+"/ui/#/journal"))
	br.waitJS(t, 60*time.Second, "the quarantined record", `!!document.querySelector('table[data-quarantine] tbody tr')`)
	br.screenshot(t, "journal")

	// Fluid: the consumer group and its version.
	br.do(t, 30*time.Second, chromedp.Navigate(base+"/ui/#/fluid"))
	br.waitJS(t, 60*time.Second, "the fluid consumer group", `!!document.querySelector('table[data-groups] tbody tr')`)
	br.screenshot(t, "fluid")

	// The tap on the Wasm stage: what went in and what came
	// out, side by side; the identity plugin returns what it was given.
	br.do(t, 30*time.Second, chromedp.Navigate(base+"/ui/#/tap/orders/enrich"))
	br.waitJS(t, 60*time.Second, "tapped records", `document.querySelectorAll('tr[data-tap-row="enrich"]').length >= 5`)
	pairs := eval[[][]string](t, br, `[...document.querySelectorAll('tr[data-tap-row="enrich"]')].slice(0, 5).map(tr =>
		[tr.querySelector('[data-tap-in]').textContent, tr.querySelector('[data-tap-out] pre').textContent])`)
	for _, p := range pairs {
		in, out := p[0], p[1]
		// in: "TOPIC/P@O  key K\nVALUE"; out: "key K\nVALUE" (an output
		// record has no position yet).
		inVal, outVal := in[strings.Index(in, "\n")+1:], out[strings.Index(out, "\n")+1:]
		if !strings.HasPrefix(in, "generate/0@") || !strings.Contains(in, "key c-") || inVal != outVal || !strings.Contains(inVal, `"order_id"`) {
			t.Fatalf("tap row: in %q, out %q", in, out)
		}
	}
	st := eval[string](t, br, `document.querySelector('[data-tap-status]').textContent`)
	if !strings.Contains(st, "at most 10/s") {
		t.Fatalf("tap status %q", st)
	}
	br.screenshot(t, "tap")
	br.do(t, 30*time.Second, chromedp.Navigate(base+"/ui/#/p/orders"))
	br.waitJS(t, 30*time.Second, "the stage's rates", `parseFloat(((document.querySelector('tr[data-stage="enrich"] td:nth-child(8)')||{}).textContent||"").replace(/,/g, "")) > 1000`)

	if errs := br.errors(); len(errs) > 0 {
		t.Fatalf("the browser console has errors:\n%s", strings.Join(errs, "\n"))
	}
}
