// Package stdin holds streamd's built-in source of the daemon's standard
// input (type = "stdin"): JSON-lines records (as package record reads
// them) piped into `streamd run`, for example
//
//	producer | streamd run -c config.toml
//
// The pipeline ends (state done) at the end of the input, after its last
// records are written. A fetch that waits for input returns when its
// context is done, so a shutdown is not held up by a quiet pipe.
package stdin
