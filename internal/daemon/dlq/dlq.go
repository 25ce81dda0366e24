package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/x/kgox"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

// Headers of a replayed record.
const (
	// HeaderReplayOf is the dead letter it came from,
	// "TOPIC/PARTITION@OFFSET" of the dead-letter topic.
	HeaderReplayOf = "streamd-replay-of"
	// HeaderReplayCount is how many times the record has been replayed,
	// this time included: 1 for a dead letter of a record read from its
	// source, one more for a dead letter of a replayed record.
	HeaderReplayCount = "streamd-replay-count"
	// HeaderReplayForce is set ("1") by a replay with Force: if the record
	// is rejected again, it is dead-lettered again (GuardReplays).
	HeaderReplayForce = "streamd-replay-force"
)

// deadLetterHeaders are the headers pipeline.DeadLetter and its truncation
// add; Original removes them.
var deadLetterHeaders = []string{
	pipeline.HeaderError, pipeline.HeaderErrorDetail, pipeline.HeaderErrorKind, pipeline.HeaderStage, pipeline.HeaderPlugin,
	pipeline.HeaderSourceTopic, pipeline.HeaderSourcePartition, pipeline.HeaderSourceOffset,
	pipeline.HeaderTruncated, pipeline.HeaderValueBytes, pipeline.HeaderKeyBytes,
}

// Position is where a record is in Kafka.
type Position struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

func (p Position) String() string {
	return p.Topic + "/" + strconv.Itoa(int(p.Partition)) + "@" + strconv.FormatInt(p.Offset, 10)
}

// Entry is one dead letter.
type Entry struct {
	// Partition and Offset are the dead letter's place in the DLQ topic.
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Time      time.Time `json:"time"`
	// Error (its first line: the cause), Detail (the rest: a stack trace),
	// Kind (rejected, trap, timeout, memory or failed), Stage and Plugin
	// say why it was rejected.
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Stage  string `json:"stage"`
	Plugin string `json:"plugin,omitempty"`
	// Source is where the rejected record was read (Partition and Offset
	// -1 when the headers do not say).
	Source Position `json:"source"`
	// Truncated is what the DLQ's size limit left out ("value" or
	// "value,key,headers"), or "".
	Truncated string `json:"truncated,omitempty"`
	// Record is the dead letter as stored: key, value, every header.
	Record record.Record `json:"-"`
}

// FromRecord reads a dead letter's headers; r is kept, not copied.
func FromRecord(r record.Record) Entry {
	h := func(k string) string {
		v, _ := r.Header(k)
		return string(v)
	}
	num := func(k string) int64 {
		v, ok := r.Header(k)
		if !ok {
			return -1
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	return Entry{
		Partition: r.Partition, Offset: r.Offset, Time: r.Timestamp,
		Error: h(pipeline.HeaderError), Detail: h(pipeline.HeaderErrorDetail), Kind: h(pipeline.HeaderErrorKind), Stage: h(pipeline.HeaderStage), Plugin: h(pipeline.HeaderPlugin),
		Source:    Position{Topic: h(pipeline.HeaderSourceTopic), Partition: int32(num(pipeline.HeaderSourcePartition)), Offset: num(pipeline.HeaderSourceOffset)},
		Truncated: h(pipeline.HeaderTruncated),
		Record:    r,
	}
}

// ErrTruncated is returned by Original for a dead letter whose value the
// DLQ's size limit left out.
var ErrTruncated = errors.New("the dead letter was truncated to fit the dead-letter topic; its record cannot be replayed")

// Original returns the record that was rejected, as a Target takes it:
// its key, value and own headers (without the dead-letter headers, plus
// HeaderReplayOf naming the dead letter in dlqTopic and HeaderReplayCount
// one above the one it had), and its source topic, partition and offset.
// It shares no bytes with e.
func (e *Entry) Original(dlqTopic string) (record.Record, error) {
	if e.Truncated != "" {
		return record.Record{}, fmt.Errorf("%s/%d@%d: %w (%s left out)", dlqTopic, e.Partition, e.Offset, ErrTruncated, e.Truncated)
	}
	if e.Source.Topic == "" {
		return record.Record{}, fmt.Errorf("%s/%d@%d: no %s header: not a streamd dead letter", dlqTopic, e.Partition, e.Offset, pipeline.HeaderSourceTopic)
	}
	r := e.Record.Clone()
	for _, k := range deadLetterHeaders {
		r.DelHeader(k)
	}
	r.SetHeader(HeaderReplayOf, []byte(Position{dlqTopic, e.Partition, e.Offset}.String()))
	count := 0
	if v, ok := r.Header(HeaderReplayCount); ok {
		count, _ = strconv.Atoi(string(v))
	}
	r.SetHeader(HeaderReplayCount, []byte(strconv.Itoa(max(count, 0)+1)))
	r.DelHeader(HeaderReplayForce)
	r.Topic, r.Partition, r.Offset = e.Source.Topic, e.Source.Partition, e.Source.Offset
	return r, nil
}

// Filter selects dead letters. The zero Filter selects every one.
type Filter struct {
	// Partitions of the DLQ topic to read; none: all.
	Partitions []int32 `json:"partitions,omitempty"`
	// From (included) and Until (excluded) bound the DLQ offsets read;
	// 0 leaves that end open.
	From  int64 `json:"from,omitempty"`
	Until int64 `json:"until,omitempty"`
	// Stage selects the dead letters of one stage ("sink" for the sink).
	Stage string `json:"stage,omitempty"`
	// Error selects dead letters whose error contains it (ignoring case).
	Error string `json:"error,omitempty"`
	// SourceTopic selects dead letters read from one topic.
	SourceTopic string `json:"source_topic,omitempty"`
}

// Match reports whether f selects e (offsets and partitions included).
func (f *Filter) Match(e *Entry) bool {
	if len(f.Partitions) > 0 && !slices.Contains(f.Partitions, e.Partition) {
		return false
	}
	if e.Offset < f.From || f.Until > 0 && e.Offset >= f.Until {
		return false
	}
	if f.Stage != "" && e.Stage != f.Stage {
		return false
	}
	if f.SourceTopic != "" && e.Source.Topic != f.SourceTopic {
		return false
	}
	if f.Error != "" && !strings.Contains(strings.ToLower(e.Error), strings.ToLower(f.Error)) {
		return false
	}
	return true
}

// Range is what a scan reads of one partition: offsets Start (included)
// to End (excluded). LogStart is the partition's first offset still held
// (retention deleted those below), End its high watermark when the scan
// began.
type Range struct {
	Partition int32 `json:"partition"`
	LogStart  int64 `json:"log_start"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
}

// Reader reads one dead-letter topic.
type Reader struct {
	topic string
	opts  []kgo.Opt
	// idle bounds how long a partition scan may receive nothing before
	// it is given up (the broker is unreachable, or records below the
	// end are missing).
	idle time.Duration
}

// ReaderOption configures a Reader.
type ReaderOption func(*Reader)

// WithIdleTimeout bounds how long a scan of a partition waits without
// receiving a record before it fails (default 30s).
func WithIdleTimeout(d time.Duration) ReaderOption { return func(r *Reader) { r.idle = d } }

// WithClientOpts adds franz-go options to the Reader's clients (seeds,
// TLS, SASL); kgo.SeedBrokers at least.
func WithClientOpts(opts ...kgo.Opt) ReaderOption {
	return func(r *Reader) { r.opts = append(r.opts, opts...) }
}

// NewReader returns a Reader of topic.
func NewReader(topic string, opts ...ReaderOption) *Reader {
	r := &Reader{topic: topic, idle: 30 * time.Second}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Topic returns the dead-letter topic.
func (r *Reader) Topic() string { return r.topic }

// Ranges returns what a scan with f reads, per partition, in partition
// order.
func (r *Reader) Ranges(ctx context.Context, f Filter) ([]Range, error) {
	cl, err := kgo.NewClient(r.opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, r.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("dead-letter topic %s: start offsets: %w", r.topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, r.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("dead-letter topic %s: end offsets: %w", r.topic, err)
	}
	var out []Range
	ends.Each(func(o kadm.ListedOffset) {
		if len(f.Partitions) > 0 && !slices.Contains(f.Partitions, o.Partition) {
			return
		}
		rg := Range{Partition: o.Partition, End: o.Offset}
		if s, ok := starts.Lookup(r.topic, o.Partition); ok {
			rg.LogStart = s.Offset
		}
		rg.Start = max(rg.LogStart, f.From)
		if f.Until > 0 {
			rg.End = min(rg.End, f.Until)
		}
		rg.Start = min(rg.Start, max(rg.End, rg.LogStart))
		out = append(out, rg)
	})
	slices.SortFunc(out, func(a, b Range) int { return int(a.Partition - b.Partition) })
	for _, p := range f.Partitions {
		if !slices.ContainsFunc(out, func(rg Range) bool { return rg.Partition == p }) {
			return nil, fmt.Errorf("dead-letter topic %s has no partition %d", r.topic, p)
		}
	}
	return out, nil
}

// ErrStop ends a scan without error when a Scan callback returns it.
var ErrStop = errors.New("stop scan")

// Scan reads ranges (from Ranges) partition by partition in offset order
// and calls fn for each entry f selects; an error from fn ends the scan
// (ErrStop: without error). scanned, if not nil, is told each partition's
// progress: the offset after the last record read.
func (r *Reader) Scan(ctx context.Context, ranges []Range, f Filter, fn func(*Entry) error, scanned func(partition int32, next int64)) error {
	for _, rg := range ranges {
		if rg.Start >= rg.End {
			continue
		}
		if err := r.scanPartition(ctx, rg, f, fn, scanned); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

func (r *Reader) scanPartition(ctx context.Context, rg Range, f Filter, fn func(*Entry) error, scanned func(int32, int64)) error {
	opts := append(append([]kgo.Opt(nil), r.opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.topic: {rg.Partition: kgo.NewOffset().At(rg.Start)}}),
		kgo.FetchMaxWait(500*time.Millisecond))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	next := rg.Start
	last := time.Now()
	for next < rg.End {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		got := false
		var stop error
		fs.EachRecord(func(kr *kgo.Record) {
			if stop != nil || kr.Offset >= rg.End {
				return
			}
			got = true
			next = kr.Offset + 1
			e := FromRecord(kgox.Record(kr))
			if f.Match(&e) {
				stop = fn(&e)
			}
		})
		if stop != nil {
			return stop
		}
		if got {
			last = time.Now()
			if scanned != nil {
				scanned(rg.Partition, next)
			}
			continue
		}
		if time.Since(last) > r.idle {
			why := "nothing received"
			if ferr != nil {
				why = ferr.Error()
			}
			return fmt.Errorf("dead-letter topic %s partition %d: stopped at offset %d of %d: %s for %s", r.topic, rg.Partition, next, rg.End, why, r.idle)
		}
	}
	return nil
}

// List returns up to limit entries f selects (0: no limit), in partition
// and offset order, and whether more were left out.
func (r *Reader) List(ctx context.Context, f Filter, limit int) ([]Entry, bool, error) {
	ranges, err := r.Ranges(ctx, f)
	if err != nil {
		return nil, false, err
	}
	var out []Entry
	more := false
	err = r.Scan(ctx, ranges, f, func(e *Entry) error {
		if limit > 0 && len(out) >= limit {
			more = true
			return ErrStop
		}
		out = append(out, *e)
		return nil
	}, nil)
	return out, more, err
}

// Get returns the entry at partition@offset.
func (r *Reader) Get(ctx context.Context, partition int32, offset int64) (Entry, error) {
	f := Filter{Partitions: []int32{partition}, From: offset, Until: offset + 1}
	es, _, err := r.List(ctx, f, 1)
	if err != nil {
		return Entry{}, err
	}
	if len(es) == 0 {
		return Entry{}, fmt.Errorf("dead-letter topic %s has no record at %d@%d (deleted by retention, or not written yet)", r.topic, partition, offset)
	}
	return es[0], nil
}
