package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// intRange is the allowed values of an integer key. When zero is not
// empty, 0 is allowed too and means zero; when negative is not empty, any
// negative value is allowed and means negative.
type intRange struct {
	lo, hi         int64
	zero, negative string
}

func (r intRange) ok(v int64) bool {
	return v >= r.lo && v <= r.hi || v == 0 && r.zero != "" || v < 0 && r.negative != ""
}

func (r intRange) allowed() string {
	lo := strconv.FormatInt(r.lo, 10)
	if r.zero != "" {
		if r.lo > 1 {
			lo = "0 (" + r.zero + ") or " + lo
		} else {
			lo = "0 (" + r.zero + ")"
		}
	}
	var out string
	if r.hi == math.MaxInt64 {
		out = lo + " or more"
	} else {
		out = lo + " to " + strconv.FormatInt(r.hi, 10)
	}
	if r.negative != "" {
		out += ", or negative for " + r.negative
	}
	return out
}

// durRange is the allowed values of a duration key. When zero is not
// empty, "0s" is allowed and means zero; when negative is not empty, any
// negative value is allowed and means negative.
type durRange struct {
	lo, hi         time.Duration
	zero, negative string
}

func (r durRange) ok(d time.Duration) bool {
	return d >= r.lo && d <= r.hi || d == 0 && r.zero != "" || d < 0 && r.negative != ""
}

func (r durRange) allowed() string {
	var b strings.Builder
	if r.zero != "" {
		b.WriteString(`"0s" (` + r.zero + `)`)
		if r.lo == 0 {
			b.WriteString(" to " + quoteDur(r.hi))
		} else {
			b.WriteString(" or " + quoteDur(r.lo) + " to " + quoteDur(r.hi))
		}
	} else {
		b.WriteString(quoteDur(r.lo) + " to " + quoteDur(r.hi))
	}
	if r.negative != "" {
		b.WriteString(", or negative for " + r.negative)
	}
	return b.String()
}

// shortDur is d.String() without the zero units that end it: "1h", not
// "1h0m0s".
func shortDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func quoteDur(d time.Duration) string { return `"` + shortDur(d) + `"` }

// The ranges of streamd's numeric keys. Each bound is where a value stops
// making sense for a stream processor on one machine, not a limit of the
// code: it turns a typo (an extra zero, a sign) into an error at its line.
var (
	rangePartitions     = intRange{lo: 1, hi: 10000}
	rangeMemoryPages    = intRange{lo: 1, hi: 65536}   // 4 GiB, Wasm32's limit
	rangeTableElements  = intRange{lo: 1, hi: 1 << 28} // 2 GiB of 8-byte elements
	rangeModuleBytes    = intRange{lo: 1 << 10, hi: 1 << 30}
	rangeLogLineBytes   = intRange{lo: 16, hi: 1 << 20}
	rangeLogLines       = intRange{lo: 1, hi: 1 << 20}
	rangeLogBytes       = intRange{lo: 16, hi: 1 << 26}
	rangeWorkers        = intRange{lo: 1, hi: 256}
	rangePool           = intRange{lo: 1, hi: 256}
	rangeMaxInFlight    = intRange{lo: 1, hi: 10_000_000}
	rangeMaxRecords     = intRange{lo: 1, hi: 1_000_000}
	rangeMaxBytes       = intRange{lo: 1, hi: 1 << 30}
	rangeRetryAttempts  = intRange{lo: 1, hi: 1_000_000, zero: "retry until shutdown"}
	rangeCount          = intRange{lo: 1, hi: math.MaxInt64, zero: "unbounded"}
	rangeKeys           = intRange{lo: 1, hi: 1_000_000_000}
	rangeVersion        = intRange{lo: 1, hi: 1_000_000}
	rangeBaselineVer    = intRange{lo: 1, hi: 1_000_000, zero: "the first version"}
	rangePluginTimeout  = durRange{lo: time.Millisecond, hi: time.Hour, negative: "no bound"}
	rangeLoadTimeout    = durRange{lo: time.Second, hi: time.Hour}
	rangeCompileTimeout = durRange{lo: 100 * time.Millisecond, hi: time.Hour}
	rangeWatch          = durRange{lo: 100 * time.Millisecond, hi: time.Hour, zero: "off"}
	rangeShutdown       = durRange{lo: 0, hi: time.Hour, zero: "abandon in-flight batches at once"}
	rangeCommitInterval = durRange{lo: 0, hi: time.Hour, zero: "after every batch"}
	rangeStallTimeout   = durRange{lo: 0, hi: 24 * time.Hour, zero: "never report a stall"}
	rangeLinger         = durRange{lo: 0, hi: time.Hour, zero: "write at once"}
	rangeRetry          = durRange{lo: time.Millisecond, hi: time.Hour}
	// Apache Kafka's default group.min/max.session.timeout.ms.
	rangeSessionTimeout = durRange{lo: 6 * time.Second, hi: 30 * time.Minute}
	rangeExpiry         = durRange{lo: time.Second, hi: 24 * time.Hour}
	rangeRegistry       = durRange{lo: time.Millisecond, hi: time.Hour}
	// Largest generate rate, records per second.
	maxRate = 10_000_000.0
)

// kafkaLevels are the sink's compression_level ranges, those of
// kafka.Compression: gzip's and lz4's 1-9, zstd's encoder levels 1
// fastest to 4 best; snappy and none have none.
var kafkaLevels = map[string][2]int{"gzip": {1, 9}, "lz4": {1, 9}, "zstd": {1, 4}}

// typeRanges name the allowed range of keys whose Go type is narrower than
// TOML's integers, for the decoder's "out of range for uint32" errors.
var typeRanges = map[string]intRange{"max_memory_pages": rangeMemoryPages, "max_table_elements": rangeTableElements, "partitions": rangePartitions}

// checker collects the problems of one config, at most MaxErrors of them
// in full.
type checker struct {
	c    *Config
	errs []error
	more int
}

func (k *checker) bad(path, format string, args ...any) {
	if len(k.errs) >= MaxErrors {
		k.more++
		return
	}
	k.errs = append(k.errs, k.c.errorf(path, format, args...))
}

func (k *checker) err() error { return joinErrors(k.c.File, k.errs, k.more) }

// int checks v at path against r.
func (k *checker) int(path string, v int64, r intRange) {
	if !r.ok(v) {
		k.bad(path, "%d is out of range (allowed: %s)", v, r.allowed())
	}
}

// dur checks d at path against r.
func (k *checker) dur(path string, d time.Duration, r durRange) {
	if !r.ok(d) {
		k.bad(path, "%q is out of range (allowed: %s)", shortDur(d), r.allowed())
	}
}

// nonEmpty refuses an explicit "" for a key whose absence means def.
func (k *checker) nonEmpty(path, v, what, def string) {
	if v == "" && k.c.isSet(path) {
		k.bad(path, "must not be empty (allowed: %s; leave the key out for %q)", what, def)
	}
}

func fmtFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// joinErrors joins errs, adding a line that counts the more not listed.
func joinErrors(file string, errs []error, more int) error {
	if more > 0 {
		errs = append(errs, &Error{File: file, Msg: fmt.Sprintf("and %d more problems", more)})
	}
	return errors.Join(errs...)
}
