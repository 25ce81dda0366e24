package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBrokerAPI: /ui/api/broker answers the embedded broker's figures,
// 404 without an embedded broker and 503 before it started; /ui/api/info
// says whether there is one (the page asks nothing of a daemon without:
// a 404 in the browser's console is an error there).
func TestBrokerAPI(t *testing.T) {
	var stats any
	for _, tt := range []struct {
		name  string
		opts  []Option
		stats any
		code  int
		body  string
	}{
		{"no embedded broker", nil, nil, http.StatusNotFound, "no [kafka.embedded]"},
		{"not started", []Option{WithBroker(func() any { return stats })}, nil, http.StatusServiceUnavailable, "has not started"},
		{"figures", []Option{WithBroker(func() any { return stats })}, map[string]int{"disk_bytes": 42}, http.StatusOK, `"disk_bytes":42`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stats = tt.stats
			c := New(tt.opts...)
			w := httptest.NewRecorder()
			c.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ui/api/broker", nil))
			if w.Code != tt.code || !strings.Contains(w.Body.String(), tt.body) {
				t.Fatalf("%d %s, want %d with %q", w.Code, w.Body, tt.code, tt.body)
			}
			// The page's nav link follows /ui/api/info.
			w = httptest.NewRecorder()
			c.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ui/api/info", nil))
			if want := fmt.Sprintf(`"broker":%t`, tt.opts != nil); !strings.Contains(w.Body.String(), want) {
				t.Fatalf("/ui/api/info: %s, want %s", w.Body, want)
			}
		})
	}
	// The page's script is served with the others.
	w := httptest.NewRecorder()
	New().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ui/broker.js", nil))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `addPage("broker"`) {
		t.Fatalf("/ui/broker.js: %d", w.Code)
	}
}
