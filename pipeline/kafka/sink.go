package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/record"
)

// SinkConfig configures a Sink.
type SinkConfig struct {
	Seeds    []string
	ClientID string
	Topic    string
	// Compression is none, gzip, snappy, lz4 or zstd; Level 0 is the codec's default.
	Compression string
	Level       int
	// SamePartition writes each record to the partition number it was read
	// from; otherwise keyed records go where Java's murmur2 partitioner
	// would put them and unkeyed ones are spread stickily.
	SamePartition bool
	// Partitions is the partition count if the topic is created on demand.
	Partitions int32
	// DeliveryTimeout bounds one record's delivery before Write reports a
	// transient error (default 30s).
	DeliveryTimeout time.Duration
	// Opts are extra franz-go options.
	Opts []kgo.Opt
}

// Sink produces records to one topic.
type Sink struct {
	cl         *kgo.Client
	topic      string
	same       bool
	partitions int32
}

// Codec returns franz-go's batch compression for a codec name and level.
func Codec(name string, level int) (kgo.CompressionCodec, error) {
	var c kgo.CompressionCodec
	switch strings.ToLower(name) {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		c = kgo.GzipCompression()
	case "snappy":
		c = kgo.SnappyCompression()
	case "lz4":
		c = kgo.Lz4Compression()
	case "zstd":
		c = kgo.ZstdCompression()
	default:
		return c, fmt.Errorf("unknown compression %q (want none, gzip, snappy, lz4 or zstd)", name)
	}
	if level != 0 {
		c = c.WithLevel(level)
	}
	return c, nil
}

// NewSink returns a Sink; it connects lazily.
func NewSink(c SinkConfig) (*Sink, error) {
	codec, err := Codec(c.Compression, c.Level)
	if err != nil {
		return nil, err
	}
	if c.DeliveryTimeout == 0 {
		c.DeliveryTimeout = 30 * time.Second
	}
	part := kgo.StickyKeyPartitioner(nil) // nil hasher: Kafka's murmur2, as the Java client
	if c.SamePartition {
		part = kgo.ManualPartitioner()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Seeds...),
		kgo.ClientID(c.ClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordPartitioner(part),
		kgo.RecordDeliveryTimeout(c.DeliveryTimeout),
		kgo.ProducerLinger(0), // the pipeline already batches; lingering here only adds a wait per batch
		kgo.MaxBufferedRecords(100000),
	}
	cl, err := kgo.NewClient(append(opts, c.Opts...)...)
	if err != nil {
		return nil, err
	}
	return &Sink{cl: cl, topic: c.Topic, same: c.SamePartition, partitions: c.Partitions}, nil
}

// Ready implements pipeline.Readier: the brokers answer and the topic exists.
func (s *Sink) Ready(ctx context.Context) error {
	if err := s.cl.Ping(ctx); err != nil {
		return err
	}
	return EnsureTopics(ctx, s.cl, s.partitions, s.topic)
}

// Write implements plugins.Sink. Records that fail with a retriable error
// (broker unavailable, delivery timeout) fail the whole batch, so that the
// pipeline retries it; other per-record errors (e.g. too large) are
// returned per record.
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
// producer, in order, and calls done when all are acknowledged.
func (s *Sink) WriteAsync(ctx context.Context, batch []record.Record, done func([]error, error)) {
	recs := make([]kgo.Record, len(batch))
	errs := make([]error, len(batch))
	var (
		left      atomic.Int64
		mu        sync.Mutex
		transient error
	)
	left.Store(int64(len(batch)))
	finish := func() {
		mu.Lock()
		t := transient
		mu.Unlock()
		if t != nil {
			done(nil, fmt.Errorf("produce to %s: %w", s.topic, t))
			return
		}
		done(errs, nil)
	}
	if len(batch) == 0 {
		finish()
		return
	}
	// One slab for every record's headers: an allocation per batch, not
	// per record.
	nh := 0
	for i := range batch {
		nh += len(batch[i].Headers)
	}
	hdrs := make([]kgo.RecordHeader, 0, nh)
	for i := range batch {
		in := &batch[i]
		r := &recs[i]
		r.Topic, r.Key, r.Value, r.Timestamp = s.topic, in.Key, in.Value, in.Timestamp
		if s.same {
			r.Partition = in.Partition
		}
		if len(in.Headers) > 0 {
			start := len(hdrs)
			for _, h := range in.Headers {
				hdrs = append(hdrs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
			r.Headers = hdrs[start:len(hdrs):len(hdrs)]
		}
		s.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				if retriable(err) {
					mu.Lock()
					transient = err
					mu.Unlock()
				}
				errs[i] = fmt.Errorf("produce to %s: %w", s.topic, err)
			}
			if left.Add(-1) == 0 {
				finish()
			}
		})
	}
}

func retriable(err error) bool {
	return kerr.IsRetriable(err) || errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) ||
		errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.NotLeaderForPartition)
}

// Close flushes and closes the producer.
func (s *Sink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.cl.Flush(ctx)
	s.cl.Close()
	return err
}
