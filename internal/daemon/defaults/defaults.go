// Package defaults holds the defaults of the daemon's servers' settings:
// the admin server's limits, the console's tap and replay limits and the
// embedded broker's retention. It imports nothing but the standard
// library, so that internal/daemon/config fills a file's missing keys from
// the same numbers the servers apply to a zero option without importing a
// server (internal/daemon/admin, console and embedded re-export each as
// their own Default* constant, which is what their users read).
package defaults

import "time"

// The admin server's limits (admin.Default*).
const (
	// AdminReadHeaderTimeout bounds reading a request's headers: a client
	// that sends them slowly is cut off.
	AdminReadHeaderTimeout = 10 * time.Second
	// AdminReadTimeout bounds reading a whole request, body included.
	AdminReadTimeout = time.Minute
	// AdminWriteTimeout bounds writing a response (from the end of the
	// request's headers); above pprof's default 30 s profile.
	AdminWriteTimeout = time.Minute
	// AdminIdleTimeout is how long a keep-alive connection may wait for its
	// next request.
	AdminIdleTimeout = 2 * time.Minute
	// AdminMaxHeaderBytes bounds a request's headers.
	AdminMaxHeaderBytes = 64 << 10
	// AdminMaxBodyBytes bounds a request's body (the journal's own limit,
	// 64 MiB, is the largest a mounted handler takes).
	AdminMaxBodyBytes = 64 << 20
	// AdminMaxStreams is how many long-lived responses (event streams,
	// taps) may be open at once on the admin server.
	AdminMaxStreams = 64
	// AdminMaxStreamsPerToken is how many of them one token (or one client
	// certificate) may hold.
	AdminMaxStreamsPerToken = 16
)

// The console's limits (console.Default*).
const (
	// TapRate is the most records per second one tap samples.
	TapRate = 10
	// TapValueBytes is where a tap cuts keys, values and headers.
	TapValueBytes = 1024
	// TapOpen is how many taps may be open at once in the daemon.
	TapOpen = 4
	// ReplayMaxRecords bounds the dead letters one replay of the console
	// selects.
	ReplayMaxRecords = 100_000
)

// The embedded broker's retention (embedded.Default*): a laptop holds them,
// and a broker left running for weeks stays within them.
const (
	// EmbeddedRetention keeps a day of records.
	EmbeddedRetention = 24 * time.Hour
	// EmbeddedRetentionBytes keeps at most 1 GiB per partition.
	EmbeddedRetentionBytes = 1 << 30
	// EmbeddedSegmentBytes rolls segments at 16 MiB.
	EmbeddedSegmentBytes = 16 << 20
	// EmbeddedDiskBudget bounds the data directory at 8 GiB.
	EmbeddedDiskBudget = 8 << 30
	// EmbeddedRetentionCheck applies retention every 10 seconds.
	EmbeddedRetentionCheck = 10 * time.Second
)
