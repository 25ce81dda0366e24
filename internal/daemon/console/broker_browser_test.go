package console_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserBrokerPage: with the embedded broker, the console has a
// Broker page showing its disk against its budget, the estimate of its
// index in memory and, per topic, the retained range and what retention
// deleted; the browser reports no error.
func TestBrowserBrokerPage(t *testing.T) {
	br := newBrowser(t)
	d := startDaemon(t, fmt.Sprintf(`[kafka.embedded]
listen = "127.0.0.1:%d"
retention_check_interval = "200ms"
[kafka]
partitions = 2
[[pipeline]]
name = "gen"
[pipeline.source]
type = "generate"
rate = 500
[pipeline.sink]
type = "kafka"
topic = "orders"
`, freePort(t)))
	br.do(t, 60*time.Second, chromedp.Navigate(d.Base+"/ui/#/broker"))
	br.waitJS(t, 60*time.Second, "the Broker link in the nav", `!document.querySelector('#nav a[data-page="broker"]').hidden`)
	br.waitJS(t, 60*time.Second, "the orders topic with records", `(() => { const r = document.querySelector('tr[data-topic="orders"]'); return !!r && Number(r.children[2].textContent) > 0; })()`)
	disk := eval[string](t, br, `document.querySelector('[data-disk]').textContent`)
	if !strings.Contains(disk, "of a 8.0 GiB budget") || !strings.Contains(disk, "within budget") {
		t.Fatalf("disk cell: %q", disk)
	}
	if idx := eval[string](t, br, `document.querySelector('[data-index]').getAttribute("data-index")`); idx == "0" || idx == "" {
		t.Fatalf("index estimate %q", idx)
	}
	row := eval[string](t, br, `document.querySelector('tr[data-topic="orders"]').textContent`)
	if !strings.Contains(row, "24 h, 1.0 GiB") || !strings.Contains(row, "0: 0..") || !strings.Contains(row, "ago)") {
		t.Fatalf("orders row: %q", row)
	}
	br.screenshot(t, "broker")
	if errs := br.errors(); len(errs) > 0 {
		t.Fatalf("the browser console has errors:\n%s", strings.Join(errs, "\n"))
	}
}
