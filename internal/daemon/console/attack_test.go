package console_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// attackSetup is the quickstart's shape: a daemon on a loopback listener
// without tokens, with a pipeline to pause ("orders"), one with a
// dead-letter topic to replay ("payments") and a journal with events to
// purge.
type attackSetup struct {
	d              *daemon
	journalTopic   string
	journalID      string
	port           string
	paymentsSource string
}

func newAttackSetup(t *testing.T) *attackSetup {
	t.Helper()
	b := testenv.Kafka(t)
	dir := t.TempDir()
	s := &attackSetup{journalTopic: testenv.Topic(t, "journal"), journalID: "account-1", paymentsSource: testenv.Topic(t, "payments")}
	dlqTopic := testenv.Topic(t, "payments-dlq")
	for _, tp := range []string{s.journalTopic, s.paymentsSource, dlqTopic} {
		b.CreateTopic(t, tp, 1)
	}
	s.d = startDaemon(t, fmt.Sprintf(`
[kafka]
brokers = [%q]
[journal]
store = "sqlite:%s"

[[pipeline]]
name = "orders"
[pipeline.source]
type = "generate"
rate = 50
[pipeline.sink]
type = "drop"

[[pipeline]]
name = "payments"
[pipeline.source]
type = "kafka"
topics = [%q]
group = "payments"
[pipeline.sink]
type = "drop"
[pipeline.errors]
policy = "dlq"
dlq_topic = %q
`, b.Seeds[0], filepath.Join(dir, "journal.db"), s.paymentsSource, dlqTopic))
	s.port = s.d.Base[strings.LastIndexByte(s.d.Base, ':')+1:]
	// Three events in the journal (as a client of the API would append
	// them).
	var body strings.Builder
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&body, `{"seqNr":%d,"payload":{"deposit":%d}}`+"\n", i, i*10)
	}
	res, err := http.Post(s.d.Base+"/journal/"+s.journalTopic+"/"+s.journalID, "application/json", strings.NewReader(body.String()))
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("journal append: %s %s", res.Status, b2)
	}
	waitFor(t, 60*time.Second, "orders running", func() (bool, string) {
		st := s.status(t)
		return st["orders"] == "running", fmt.Sprint(st)
	})
	return s
}

// status is each pipeline's state, "paused" when paused.
func (s *attackSetup) status(t *testing.T) map[string]string {
	t.Helper()
	var st struct {
		Pipelines []struct {
			Name   string `json:"name"`
			State  string `json:"state"`
			Paused bool   `json:"paused"`
		} `json:"pipelines"`
	}
	getJSON(t, s.d.Base+"/v1/status", &st)
	out := map[string]string{}
	for _, p := range st.Pipelines {
		out[p.Name] = p.State
		if p.Paused {
			out[p.Name] = "paused"
		}
	}
	return out
}

// unchanged fails t unless orders runs (not paused), no replay was
// started and the journal still has its three events.
func (s *attackSetup) unchanged(t *testing.T, after string) {
	t.Helper()
	if st := s.status(t); st["orders"] != "running" {
		t.Errorf("%s: orders is %s", after, st["orders"])
	}
	var jobs []json.RawMessage
	getJSON(t, s.d.Base+"/ui/api/replays", &jobs)
	if len(jobs) != 0 {
		t.Errorf("%s: %d replays were started: %s", after, len(jobs), jobs)
	}
	var ptr struct {
		SeqNr *int64 `json:"seqNr"`
	}
	getJSON(t, s.d.Base+"/journal/"+s.journalTopic+"/"+s.journalID+"/pointer", &ptr)
	if ptr.SeqNr == nil || *ptr.SeqNr != 3 {
		t.Errorf("%s: the journal's pointer is %v, want seqNr 3 (it was purged)", after, ptr.SeqNr)
	}
}

// TestBrowserCrossSiteAndRebinding: in Chromium, a page on another
// origin sends the three POSTs a page can send anywhere without asking
// (a "no-cors" fetch: pause a pipeline, start a dead-letter replay with a
// text/plain body, purge a journal), and a page whose name was made to
// point at the listener (DNS rebinding: evil.example resolves to
// 127.0.0.1, so its script is same-origin with it) reads the status and
// sends the same writes. Nothing changes, nothing is read; and the
// console itself, on the listener's own origin, still pauses and
// resumes a pipeline from the browser.
func TestBrowserCrossSiteAndRebinding(t *testing.T) {
	br := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1, MAP attacker.example 127.0.0.1"))
	s := newAttackSetup(t)
	daemon := "http://127.0.0.1:" + s.port
	purge := "/journal/" + s.journalTopic + "/" + s.journalID + "/purge"

	// The attacker's page, on its own origin.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>cute cats</title><script>
window.attack = (async () => {
  const out = [];
  const send = async (path, opts) => {
    try { await fetch(%q + path, Object.assign({method: "POST", mode: "no-cors"}, opts)); out.push(path + ": sent"); }
    catch (e) { out.push(path + ": " + e); }
  };
  await send("/v1/pipelines/orders/pause", {});
  await send("/ui/api/dlq/payments/replay", {headers: {"Content-Type": "text/plain"}, body: "{}"});
  await send(%q, {});
  return out.join("\n");
})();
</script>`, daemon, purge)
	}))
	defer attacker.Close()
	attackerURL := "http://attacker.example:" + attacker.URL[strings.LastIndexByte(attacker.URL, ':')+1:] + "/"
	br.do(t, 30*time.Second, chromedp.Navigate(attackerURL))
	sent := eval[string](t, br, `window.attack`)
	t.Logf("the cross-site page:\n%s", sent)
	time.Sleep(time.Second) // a replay or a pause would have shown by now
	s.unchanged(t, "after the cross-site page")

	// DNS rebinding: a page of origin http://evil.example:PORT, where PORT
	// is the listener's. Its script reads and writes as that origin.
	br.do(t, 30*time.Second, chromedp.Navigate("http://evil.example:"+s.port+"/ui/"))
	got := eval[string](t, br, fmt.Sprintf(`(async () => {
  const out = [];
  const r = await fetch("/v1/status"); out.push("status " + r.status + " " + (await r.text()).slice(0, 300).replace(/\s+/g, " "));
  for (const [path, opts] of [["/v1/pipelines/orders/pause", {}],
      ["/ui/api/dlq/payments/replay", {headers: {"Content-Type": "application/json"}, body: "{}"}],
      [%q, {}]]) {
    const w = await fetch(path, Object.assign({method: "POST"}, opts)); out.push(path + " " + w.status);
  }
  return out.join("\n");
})()`, purge))
	t.Logf("the rebinding page:\n%s", got)
	if strings.Contains(got, `"orders"`) || strings.Contains(got, `"payments"`) {
		t.Errorf("the rebinding page read the status:\n%s", got)
	}
	time.Sleep(time.Second)
	s.unchanged(t, "after the rebinding page")

	// The console on its own origin still changes state.
	br.do(t, 30*time.Second, chromedp.Navigate(daemon+"/ui/"))
	code := eval[float64](t, br, `fetch("/v1/pipelines/orders/pause", {method: "POST"}).then(r => r.status)`)
	if code != 200 || s.status(t)["orders"] != "paused" {
		t.Fatalf("pause from the console's own origin: %v, orders %s", code, s.status(t)["orders"])
	}
	code = eval[float64](t, br, `fetch("/v1/pipelines/orders/resume", {method: "POST"}).then(r => r.status)`)
	if code != 200 || s.status(t)["orders"] != "running" {
		t.Fatalf("resume from the console's own origin: %v, orders %s", code, s.status(t)["orders"])
	}
}
