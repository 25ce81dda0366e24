package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/pipeline/generate"
)

// broker is the Kafka the runs use: a `streamd broker` process this
// program started, or one given by address (and pid, for its CPU).
type broker struct {
	kind  string // kfake or kafka
	seeds []string
	pid   int
	p     *proc // when started here
	adm   *kadm.Client
	cl    *kgo.Client
}

// startKfake starts `streamd broker` on addr with its data under dir.
func startKfake(ctx context.Context, streamd, addr, dir string) (*broker, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p, err := startProc(filepath.Join(dir, "broker.log"), nil, streamd, "broker", "--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--partitions", "4")
	if err != nil {
		return nil, err
	}
	b, err := connect(ctx, "kfake", []string{addr}, p.pid())
	if err != nil {
		p.stop(5 * time.Second)
		return nil, fmt.Errorf("streamd broker on %s: %w (log: %s)", addr, err, p.tail(2000))
	}
	b.p = p
	return b, nil
}

// connect makes the admin client of a broker and waits until it answers.
func connect(ctx context.Context, kind string, seeds []string, pid int) (*broker, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	b := &broker{kind: kind, seeds: seeds, pid: pid, cl: cl, adm: kadm.NewClient(cl)}
	deadline := time.Now().Add(60 * time.Second)
	for {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := b.adm.ListBrokers(qctx)
		cancel()
		if err == nil {
			return b, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			cl.Close()
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b *broker) close() {
	b.cl.Close()
	if b.p != nil {
		b.p.stop(10 * time.Second)
	}
}

// createTopics creates topics with partitions; maxMessageBytes > 0 sets
// max.message.bytes.
func (b *broker) createTopics(ctx context.Context, partitions int, maxMessageBytes int, topics ...string) error {
	var configs map[string]*string
	if maxMessageBytes > 0 {
		v := strconv.Itoa(maxMessageBytes)
		configs = map[string]*string{"max.message.bytes": &v}
	}
	resp, err := b.adm.CreateTopics(ctx, int32(partitions), 1, configs, topics...)
	if err != nil {
		return err
	}
	return resp.Error()
}

// deleteTopics deletes topics (their records are what the broker's
// memory holds), not waiting: a later metadata request may create them
// again, empty, on a broker that creates topics on demand.
func (b *broker) deleteTopics(ctx context.Context, topics ...string) {
	_, _ = b.adm.DeleteTopics(ctx, topics...)
}

// waitReady waits until topic's end offsets can be listed (its
// partitions have leaders), for at most 30 s.
func (b *broker) waitReady(ctx context.Context, topic string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := b.endSum(qctx, topic)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("topic %s not ready: %w", topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// endSum is the sum of topic's partitions' end offsets: its records, when
// no transaction wrote to it.
func (b *broker) endSum(ctx context.Context, topic string) (int64, error) {
	ends, err := b.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	if err := ends.Error(); err != nil {
		return 0, err
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n, nil
}

// committedSum is the sum of group's committed offsets in topic: the
// records an exactly-once pipeline has committed, outputs with them.
func (b *broker) committedSum(ctx context.Context, group, topic string) (int64, error) {
	offs, err := b.adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		return 0, err
	}
	if err := offs.Error(); err != nil {
		return 0, err
	}
	var n int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.At > 0 {
			n += o.At
		}
	})
	return n, nil
}

// orderValue is the n-th ~size-byte v2 order: generate.Order's JSON with
// a "note" field of zeros padding it to about size bytes, as internal/daemon/app's
// in-process benchmark writes them.
func orderValue(n int64, keys, size int) (key, value []byte) {
	k, v := generate.Order(n, keys)
	v = v[:len(v)-1]
	pad := max(1, size-len(v)-12)
	out := make([]byte, 0, len(v)+pad+11)
	out = append(out, v...)
	out = append(out, `,"note":"`...)
	for i := 0; i < pad; i++ {
		out = append(out, '0')
	}
	out = append(out, `"}`...)
	return k, out
}

// fill writes n orders of ~size bytes over keys keys to topic, keyed (the
// partition is the key's, murmur2 as Java's client), with snappy as
// franz-go's producer does by default.
func (b *broker) fill(ctx context.Context, topic string, n, size, keys, maxBytes int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(max(1000, min(100000, (64<<20)/max(1, size)))), kgo.ProducerBatchMaxBytes(int32(maxBytes)))
	if err != nil {
		return err
	}
	defer cl.Close()
	var failed atomic.Value
	for i := 0; i < n; i++ {
		k, v := orderValue(int64(i), keys, size)
		cl.Produce(ctx, &kgo.Record{Key: k, Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	return nil
}

// stampHeader is the header the latency producer puts its send time in
// (big-endian Unix nanoseconds): finer than a Kafka timestamp's ms.
const stampHeader = "bench-sent-ns"

func stamp(t time.Time) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixNano()))
	return b[:]
}

// sentAt is a record's send time: stampHeader's, else its timestamp.
func sentAt(r *kgo.Record) (time.Time, error) {
	for _, h := range r.Headers {
		if h.Key == stampHeader {
			if len(h.Value) != 8 {
				return time.Time{}, errors.New("bad " + stampHeader + " header")
			}
			return time.Unix(0, int64(binary.BigEndian.Uint64(h.Value))), nil
		}
	}
	return r.Timestamp, nil
}
