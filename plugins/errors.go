package plugins

import "errors"

// ErrRecordTooLarge is wrapped by a sink's per-record error when the record
// is over a size limit of the sink or of what is behind it (a Kafka
// broker's max.message.bytes). The pipeline's dead-letter queue then
// receives the record without its value (and, if still too large, without
// its key and its own headers), so that the error can be recorded.
var ErrRecordTooLarge = errors.New("record too large")
