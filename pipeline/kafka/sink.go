package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// SinkConfig configures a Sink.
type SinkConfig struct {
	Seeds    []string
	ClientID string
	Topic    string
	// Compression is none, gzip, snappy, lz4 or zstd; Level 0 is the
	// codec's default (see the Compression function for the levels).
	Compression string
	Level       int
	// SamePartition writes each record to the partition number it was read
	// from; otherwise keyed records go where Java's murmur2 partitioner
	// would put them and unkeyed ones are spread stickily.
	SamePartition bool
	// Partitions is the partition count if the topic is created on
	// demand; 0 means DefaultPartitions.
	Partitions int32
	// MaxRecordBytes is the largest record batch the producer sends, and
	// so the largest record it accepts (key, value, headers and about 80
	// bytes of framing); default 1048588, Kafka's default
	// message.max.bytes. A larger record is rejected with an error
	// wrapping plugins.ErrRecordTooLarge that names this limit.
	MaxRecordBytes int32
	// Logger receives the sink's own warnings (topic re-created, ...).
	Logger *slog.Logger
	// Cluster, when set, is the cluster to write (its Options replace
	// Seeds and ClientID), and its Explain says the sink's errors.
	Cluster *Cluster
	// Transactional, when set, makes the sink write in the transactions
	// of this transactional Source (see Transactions), through its
	// client: the source's cluster, which Cluster must then be too. Such
	// a Sink must be made before the Source is Ready; Opts apply to the
	// source's client only through SourceConfig.Opts.
	Transactional *Source
	// Opts are extra franz-go options.
	Opts []kgo.Opt
}

// DefaultMaxRecordBytes is SinkConfig.MaxRecordBytes's default: Kafka's
// default message.max.bytes.
const DefaultMaxRecordBytes = 1048588

// Sink produces records to one topic.
//
// Delivery never times out: a record is retried by the producer until it
// is written, and a record whose write fails for a reason that is not the
// record's own (the broker down, the topic missing, a leader moving, the
// client closing) is reported as plugins.Transient, so the pipeline
// retries it rather than applying its error policy. Only the broker's or
// producer's verdicts on the record itself are per-record errors: too
// large (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE), INVALID_RECORD,
// CORRUPT_MESSAGE and INVALID_TIMESTAMP; each is confirmed by writing the
// record alone first, since the broker rejects a whole partition batch for
// one bad record in it. A deleted sink topic is created again, and a
// re-created one is picked up without a restart.
type Sink struct {
	cl         *kgo.Client // nil when tx is set: tx's client
	tx         *Source
	topic      string
	same       bool
	partitions int32
	maxBytes   int32
	log        *slog.Logger
	cluster    *Cluster
	watch      *brokerWatch

	repairMu   sync.Mutex
	lastRepair time.Time

	// slabs holds *[]kgo.Record of written batches for the next ones: a
	// batch's franz-go records (~240 bytes each) are the sink's largest
	// allocation per record.
	slabs sync.Pool
}

// Compression returns franz-go's batch compression for a compression name
// (none, gzip, snappy, lz4 or zstd) and level. Level 0 is the codec's
// default; gzip and lz4 take 1 (fastest) to 9 (smallest), zstd 1 to 4
// (franz-go's zstd encoder levels); none and snappy have no levels. Any
// other level is refused, naming the allowed range.
func Compression(name string, level int) (kgo.CompressionCodec, error) {
	var c kgo.CompressionCodec
	top := 0
	switch strings.ToLower(name) {
	case "", "none":
		c = kgo.NoCompression()
	case "gzip":
		c, top = kgo.GzipCompression(), 9
	case "snappy":
		c = kgo.SnappyCompression()
	case "lz4":
		c, top = kgo.Lz4Compression(), 9
	case "zstd":
		c, top = kgo.ZstdCompression(), 4
	default:
		return c, fmt.Errorf("unknown compression %q (want none, gzip, snappy, lz4 or zstd)", name)
	}
	switch {
	case level == 0:
		return c, nil
	case top == 0:
		return c, fmt.Errorf("compression %s has no levels (level %d)", name, level)
	case level < 1 || level > top:
		return c, fmt.Errorf("compression %s level %d: want 1 to %d (0: the default)", name, level, top)
	}
	if strings.EqualFold(name, "lz4") {
		level = 1 << (8 + level) // pierrec/lz4's Level1 .. Level9
	}
	return c.WithLevel(level), nil
}

// NewSink returns a Sink; it connects lazily.
func NewSink(c SinkConfig) (*Sink, error) {
	codec, err := Compression(c.Compression, c.Level)
	if err != nil {
		return nil, err
	}
	if c.Partitions < 0 {
		return nil, fmt.Errorf("partitions %d: want 1 or more (0: %d)", c.Partitions, DefaultPartitions)
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if c.MaxRecordBytes < 512 || c.MaxRecordBytes > 1<<30 {
		return nil, fmt.Errorf("max record bytes %d: want 512 to %d", c.MaxRecordBytes, 1<<30)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	watch := newBrokerWatch()
	part := kgo.StickyKeyPartitioner(nil) // nil hasher: Kafka's murmur2, as the Java client
	if c.SamePartition {
		part = kgo.ManualPartitioner()
	}
	if c.Cluster == nil {
		c.Cluster = &Cluster{Seeds: c.Seeds, ClientID: c.ClientID}
	}
	if src := c.Transactional; src != nil {
		if src.txn == nil {
			return nil, errors.New("sink: the source given as Transactional is not transactional (SourceConfig.Transactions)")
		}
		if !src.txn.attach(txnSink{topic: c.Topic, same: c.SamePartition, codec: codec, maxBytes: c.MaxRecordBytes}) {
			return nil, errors.New("sink: its transactional source is connected already (make the sinks first)")
		}
		return &Sink{tx: src, topic: c.Topic, same: c.SamePartition, partitions: c.Partitions, maxBytes: c.MaxRecordBytes, log: c.Logger, watch: src.watch, cluster: src.cluster}, nil
	}
	opts := c.Cluster.Options()
	opts = append(opts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordPartitioner(part),
		// No RecordDeliveryTimeout: franz-go measures it from the record's
		// timestamp, which the sink keeps from the source, so any backlog
		// older than the timeout would never be written; and an outage
		// longer than it would fail good records. Retries are unlimited
		// too (franz-go's default): a stuck write is bounded by the
		// pipeline's context (shutdown_timeout), not per record.
		kgo.ProducerBatchMaxBytes(c.MaxRecordBytes),
		kgo.ProducerLinger(0), // the pipeline already batches; lingering here only adds a wait per batch
		kgo.MaxBufferedRecords(100000),
		// A deleted topic fails its records after one failed metadata
		// load instead of four, so that repair re-creates it at once;
		// they are retried either way.
		kgo.UnknownTopicRetries(1),
		kgo.WithHooks(watch),
	)
	cl, err := kgo.NewClient(append(opts, c.Opts...)...)
	if err != nil {
		return nil, err
	}
	return &Sink{cl: cl, topic: c.Topic, same: c.SamePartition, partitions: c.Partitions, maxBytes: c.MaxRecordBytes, log: c.Logger, watch: watch, cluster: c.Cluster}, nil
}

// Condition implements pipeline.Conditioner: a broker's recent connection
// or request error.
func (s *Sink) Condition() error { return s.cluster.explainCondition(s.watch) }

// Describe implements pipeline.Describer: the cluster written to.
func (s *Sink) Describe() map[string]string {
	return map[string]string{"cluster": s.cluster.name(), "topic": s.topic}
}

// Ready implements pipeline.Readier: the brokers answer, the topic exists
// and the user may write it. Its errors are the cluster's explained ones
// (Cluster.Explain).
func (s *Sink) Ready(ctx context.Context) error {
	if s.client() == nil {
		return errNotConnected
	}
	return s.cluster.ready(ctx, s.client(), s.watch, kmsg.ACLOperationWrite, "", s.partitions, false, s.topic)
}

// Write implements plugins.Sink: per-record errors are verdicts on the
// record, or plugins.Transient; the batch error is always nil.
func (s *Sink) Write(ctx context.Context, batch []record.Record) ([]error, error) {
	type result struct {
		errs []error
		err  error
	}
	ch := make(chan result, 1)
	s.WriteAsync(ctx, batch, func(errs []error, err error) { ch <- result{errs, err} })
	r := <-ch
	return r.errs, r.err
}

// WriteAsync implements pipeline.AsyncSink: it hands every record to the
// producer, in order, and calls done when each is written or failed.
func (s *Sink) WriteAsync(ctx context.Context, batch []record.Record, done func([]error, error)) {
	s.write(ctx, len(batch), func(i int) *record.Record { return &batch[i] }, done)
}

// WriteMsgsAsync implements pipeline.MsgSink: WriteAsync of the records
// in msgs, read where they are.
func (s *Sink) WriteMsgsAsync(ctx context.Context, msgs []pipeline.Msg, done func([]error, error)) {
	s.write(ctx, len(msgs), func(i int) *record.Record { return &msgs[i].Record }, done)
}

// write writes the n records at(0) ... at(n-1) (WriteAsync).
func (s *Sink) write(ctx context.Context, n int, at func(int) *record.Record, done func([]error, error)) {
	errs := make([]error, n)
	if n == 0 {
		done(errs, nil)
		return
	}
	slab := s.slab(n)
	recs := *slab
	var (
		left   atomic.Int64
		failed atomic.Bool
	)
	left.Store(int64(n))
	// franz-go is done with every record of the batch once the last
	// promise has run (it reads nothing of a record after its promise), so
	// the slab goes back to the pool after done.
	finish := func() {
		if !failed.Load() {
			done(errs, nil)
			s.putSlab(slab)
			return
		}
		// Not on franz-go's callback goroutine: settling may produce
		// again and repair the topic.
		go func() {
			done(s.settle(ctx, at, recs, errs), nil)
			s.putSlab(slab)
		}()
	}
	// One promise for the whole batch, not a closure per record: it finds
	// a failed record's index by its address, which costs a scan only
	// when a record failed.
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			errs[recordIndex(recs, r)] = err
			failed.Store(true)
		}
		if left.Add(-1) == 0 {
			finish()
		}
	}
	cl := s.client()
	for i := range n {
		setKgoRecord(&recs[i], at(i), s.topic)
		cl.Produce(ctx, &recs[i], promise)
	}
}

// setKgoRecord sets *out to r as a franz-go record to produce to topic
// (kgox.SetKgoRecord's record, its headers not copied: kgoHeaders).
func setKgoRecord(out *kgo.Record, r *record.Record, topic string) {
	*out = kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: kgoHeaders(r.Headers), Timestamp: r.Timestamp, Partition: r.Partition}
}

// kgoHeaders returns h as franz-go's headers, without a copy: the two
// header types have the same layout (asserted below, so that a franz-go
// that changed its own fails to build), and franz-go only reads a
// produced record's headers. Records without headers get none (nil), as
// a copy would give them.
func kgoHeaders(h []record.Header) []kgo.RecordHeader {
	if len(h) == 0 {
		return nil
	}
	return unsafe.Slice((*kgo.RecordHeader)(unsafe.Pointer(unsafe.SliceData(h))), len(h))
}

// record.Header and kgo.RecordHeader are alike: the same size, and Key (a
// string) and Value (a []byte) at the same offsets. Each line fails to
// compile otherwise (an index out of range, or a constant that overflows).
var (
	_ = [1]struct{}{}[unsafe.Sizeof(record.Header{})-unsafe.Sizeof(kgo.RecordHeader{})]
	_ = [1]struct{}{}[unsafe.Sizeof(kgo.RecordHeader{})-unsafe.Sizeof(record.Header{})]
	_ = [1]struct{}{}[unsafe.Offsetof(record.Header{}.Key)-unsafe.Offsetof(kgo.RecordHeader{}.Key)]
	_ = [1]struct{}{}[unsafe.Offsetof(kgo.RecordHeader{}.Key)-unsafe.Offsetof(record.Header{}.Key)]
	_ = [1]struct{}{}[unsafe.Offsetof(record.Header{}.Value)-unsafe.Offsetof(kgo.RecordHeader{}.Value)]
	_ = [1]struct{}{}[unsafe.Offsetof(kgo.RecordHeader{}.Value)-unsafe.Offsetof(record.Header{}.Value)]
	_ = [1]struct{}{}[unsafe.Sizeof(record.Header{}.Key)-unsafe.Sizeof(kgo.RecordHeader{}.Key)]
	_ = [1]struct{}{}[unsafe.Sizeof(record.Header{}.Value)-unsafe.Sizeof(kgo.RecordHeader{}.Value)]
)

// slab returns a slice of n franz-go records, from the pool when a slab
// there is large enough.
func (s *Sink) slab(n int) *[]kgo.Record {
	if p, _ := s.slabs.Get().(*[]kgo.Record); p != nil && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	recs := make([]kgo.Record, n)
	return &recs
}

// putSlab gives a written batch's records back to the pool, cleared so
// that the pool holds no keys, values or headers.
func (s *Sink) putSlab(p *[]kgo.Record) {
	clear(*p)
	s.slabs.Put(p)
}

// recordIndex returns the index of *r in recs: the record franz-go hands
// a promise is the one it was given.
func recordIndex(recs []kgo.Record, r *kgo.Record) int {
	for i := range recs {
		if &recs[i] == r {
			return i
		}
	}
	panic("kafka sink: franz-go answered a record it was not given")
}

// settle turns the producer's raw errors into the sink's answer: nil,
// a verdict on the record, or plugins.Transient. A verdict the broker
// gave a whole partition batch is confirmed by writing each record it
// hit alone, so that only the records at fault get it. An unknown topic
// is repaired before the records are reported transient.
func (s *Sink) settle(ctx context.Context, at func(int) *record.Record, recs []kgo.Record, raw []error) []error {
	out := make([]error, len(raw))
	unknown, unknownID := false, false
	for i, err := range raw {
		if err == nil {
			continue
		}
		if isVerdict(err) && !s.overLimit(&recs[i]) {
			// Confirm alone. A fresh record: franz-go owns the old one
			// until its promise, which has run.
			r := &recs[i]
			one := kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
			if s.same {
				one.Partition = at(i).Partition
			}
			err = s.client().ProduceSync(ctx, &one).FirstErr()
			if err == nil {
				continue
			}
		}
		switch {
		case isVerdict(err):
			out[i] = s.verdict(&recs[i], err)
		default:
			unknown = unknown || errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID)
			unknownID = unknownID || errors.Is(err, kerr.UnknownTopicID)
			out[i] = plugins.Transient(s.cluster.Explain(err, "", "produce to topic "+s.topic))
		}
	}
	if unknown {
		s.repair(ctx, unknownID)
	}
	return out
}

// isVerdict reports whether err is the broker's or the producer's verdict
// on the record itself, which no retry changes. Every other error is
// transient: the broker, the network, the topic or the client.
func isVerdict(err error) bool {
	for _, v := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage, kerr.InvalidTimestamp} {
		if errors.Is(err, v) {
			return true
		}
	}
	return false
}

// recordOverhead bounds a record batch's framing around one record: the
// 61-byte batch header and the record's varint fields.
const recordOverhead = 61 + 5*5 + 5*2

func recordSize(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 10
	}
	return n
}

// overLimit reports whether r alone is over the producer's batch limit,
// so that franz-go refused it without sending it.
func (s *Sink) overLimit(r *kgo.Record) bool {
	return recordSize(r)+recordOverhead > int(s.maxBytes)
}

// CheckRecordSize returns the error a Sink with MaxRecordBytes maxBytes
// (0: DefaultMaxRecordBytes) gives r before any broker sees it, when r
// alone is over that limit, or nil. The sink's own error goes on with
// what the producer said; this one is the same up to there. `streamd
// test` and `streamd plugin test` use it to refuse what production would.
func CheckRecordSize(r *record.Record, maxBytes int32) error {
	if maxBytes == 0 {
		maxBytes = DefaultMaxRecordBytes
	}
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 10
	}
	if n+recordOverhead <= int(maxBytes) {
		return nil
	}
	return tooLarge(n, maxBytes)
}

func tooLarge(size int, maxBytes int32) error {
	return fmt.Errorf("%w: %d bytes (key, value and headers), over the sink's max_record_bytes of %d",
		plugins.ErrRecordTooLarge, size, maxBytes)
}

func (s *Sink) verdict(r *kgo.Record, err error) error {
	switch {
	case errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge):
		if s.overLimit(r) {
			return fmt.Errorf("%w: %w", tooLarge(recordSize(r), s.maxBytes), err)
		}
		return fmt.Errorf("%w: %d bytes (key, value and headers), rejected by the broker: over topic %s's max.message.bytes: %w",
			plugins.ErrRecordTooLarge, recordSize(r), s.topic, err)
	}
	return fmt.Errorf("produce to %s: %w", s.topic, err)
}

// repair creates the topic if it is gone (it was deleted) and makes the
// producer forget what it knew of it: franz-go keeps a topic's ID and
// refuses a re-created topic (UNKNOWN_TOPIC_ID) until it is purged. At
// most once a second.
func (s *Sink) repair(ctx context.Context, recreated bool) {
	s.repairMu.Lock()
	defer s.repairMu.Unlock()
	if time.Since(s.lastRepair) < time.Second {
		return
	}
	s.lastRepair = time.Now()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	created, err := ensureTopic(rctx, s.client(), s.cluster, s.partitions, s.topic)
	if err != nil {
		s.log.Warn("sink topic unknown; creating it failed", "topic", s.topic, "err", err)
		return
	}
	if created {
		s.log.Warn("sink topic was gone; created it again", "topic", s.topic, "partitions", s.partitions)
	}
	if created || recreated {
		s.log.Warn("sink topic re-created; producing to the new one", "topic", s.topic)
		s.client().PurgeTopicsFromProducing(s.topic)
	}
}

// client is the producer: the sink's own, or its transactional source's
// (nil before that one is Ready).
func (s *Sink) client() *kgo.Client {
	if s.tx != nil {
		return s.tx.client()
	}
	return s.cl
}

// sinkCloseTimeout bounds the flush of a Close whose ctx has no deadline.
const sinkCloseTimeout = 5 * time.Second

// Close flushes the producer until ctx is done (for at most 5 s if ctx
// has no deadline; not at all when nothing is buffered), then closes it, returning when ctx is done at the
// latest: records still buffered then fail (after a shutdown that ran out
// of time they belong to batches the pipeline abandoned, never
// acknowledged), and a close still waiting on the broker (franz-go gives
// a KIP-714 telemetry push a second) is left to finish in the background.
//
// A Sink writing in a source's transactions leaves that to the source
// (its transactions flush).
func (s *Sink) Close(ctx context.Context) error {
	if s.tx != nil {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sinkCloseTimeout)
		defer cancel()
	}
	// Nothing buffered, nothing to flush: franz-go's Flush would answer
	// an expired ctx (a pipeline that failed long before) with its error
	// before it looks at its buffer.
	var err error
	if n := s.cl.BufferedProduceRecords(); n > 0 {
		if err = s.cl.Flush(ctx); err != nil {
			err = fmt.Errorf("flush to %s: %d records not written by the deadline are dropped (their batches were abandoned, not committed): %w", s.topic, s.cl.BufferedProduceRecords(), err)
		}
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.cl.Close()
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	return err
}
