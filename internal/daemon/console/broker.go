package console

import "net/http"

// WithBroker shows the embedded broker's page: what f returns (its
// figures, as JSON), or nil while the broker has not started.
func WithBroker(f func() any) Option { return func(o *options) { o.broker = f } }

func (c *Console) brokerInfo(w http.ResponseWriter, _ *http.Request) {
	if c.o.broker == nil {
		writeErr(w, http.StatusNotFound, "no [kafka.embedded] in this daemon's config")
		return
	}
	s := c.o.broker()
	if s == nil {
		writeErr(w, http.StatusServiceUnavailable, "the embedded broker has not started yet")
		return
	}
	writeJSON(w, http.StatusOK, s)
}
