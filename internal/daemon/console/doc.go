// Package console is streamd's operator console: web pages served at
// /ui/ on the admin listener, and the API under /ui/api/ they (and
// `streamd dlq replay --to pipeline`, `streamd tap`) use.
//
// The pages are static files embedded in the binary (no build step, no
// file fetched from elsewhere; the plots are plain SVG): an overview of
// every pipeline, a page per pipeline, the dead-letter page, the tap, and
// the journal and fluid pages. The daemon samples every pipeline once a
// second into a ring buffer that holds the last 15 minutes
// (records/s in and out, lag, errors and dead letters per second, records
// in flight, state) and streams new samples to the pages with
// server-sent events (GET /ui/api/events): the first event holds the
// whole history, each later one the samples since.
//
// Access goes through the admin server's guard like every other route:
// GET requests (the pages, the series, dead-letter listings, the tap)
// need a token of role read when tokens are configured, POST (a replay)
// role write. The page asks for a token when the API answers 401, keeps
// it in the tab's sessionStorage and sends it as a bearer header; the
// event streams are read with fetch so they carry it too. Event streams
// and taps count against the admin server's limit of long-lived
// responses ([admin] max_streams, and a token's share,
// max_streams_per_token: 429 past them) and end when their token is
// revoked. A tick is encoded once and sent to every stream that is up to
// date.
//
// API (JSON unless said):
//
//	GET  /ui/api/info                       pipelines, their parts, what is configured
//	GET  /ui/api/events                     text/event-stream: "hello" (history), then "tick" each second
//	GET  /ui/api/pipelines/{p}              status, stages, partitions (lag, owner), last errors
//	GET  /ui/api/dlq/{p}?partition=&from=&until=&stage=&error=&source_topic=&limit=
//	GET  /ui/api/dlq/{p}/{partition}/{offset}   one dead letter
//	POST /ui/api/dlq/{p}/replay             {"filter": {...}, "to": "source"|"pipeline", "topic": "", "max_records": N, "force": false}
//	                                        -> 202 {"id"}; 409 naming the replay of {p} that is running
//	GET  /ui/api/replays, /ui/api/replays/{id}   replay progress
//	GET  /ui/api/journal, /ui/api/journal/quarantine?limit=
//	GET  /ui/api/fluid
package console
