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
// Before the tokens, a request filter runs on every route, with tokens or
// without, so that a web page in an operator's browser cannot use the
// listener: on a connection that came over loopback only a Host of
// localhost, a loopback address, the listen address's own name or a name
// given to WithHosts is answered (DNS rebinding); a write (every method
// but GET and HEAD, and the GETs the route table counts as writes) is
// refused when Sec-Fetch-Site says cross-site or same-site or when Origin
// is not the listener's own; and a write's body must be JSON
// (application/json, or application/x-ndjson for JSON lines), the types a
// page cannot send without a CORS preflight. Every write is logged with
// who made it: the token's name, the client certificate's subject, or
// auth=none. Handlers learn the caller with CallerOf.
//
// Long-lived responses (the console's event streams and taps) are counted
// with OpenStream against one limit and each token's (or client
// certificate's) share of it (WithStreamLimits): past either the request
// is answered 429 and its connection closed. A stream of a bearer token
// ends within a second of the token being revoked or the tokens file
// becoming unreadable.
//
// Server timeouts (header read, whole request, write, idle), a header size
// limit and a request body limit bound what one slow or huge client can
// hold.
package admin
