// Package admin is streamd's admin HTTP server: /healthz, /readyz,
// /metrics, /pipelines, pprof, and the routes other parts mount (fluid,
// journal).
//
// The server is safe to expose only when it is told who may do what.
// Every request is classified by one table (routes): the probes
// (/healthz, /readyz), reads (any GET or HEAD: status, metrics, journal
// reads, fluid GETs) and writes (every other method: journal append,
// delete and purge, fluid DELETE; and pprof, which costs CPU and shows the
// process's insides). With bearer tokens (WithTokens) a read needs a token
// of role read or write, a write a token of role write, and the probes are
// open unless WithProbesOpen(false). With mutual TLS (a tls.Config that
// requires and verifies client certificates) a client must present a
// certificate to connect at all. A listen address that is not loopback is
// refused by Start unless one of the two is configured or
// WithAllowUnauthenticated says so. Refusals answer 401 or 403 with a JSON
// body naming what is missing.
//
// Server timeouts (header read, whole request, write, idle), a header size
// limit and a request body limit bound what one slow or huge client can
// hold.
package admin
