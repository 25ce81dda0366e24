package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// cmdBare is the reference: a franz-go client consuming the input topic in
// a group, one producing each record to the output topic (acks all, linger
// 5 ms, snappy), a flush and a commit per poll; with -eos one
// GroupTransactSession per loop, a transaction per poll. It copies key,
// value, headers and timestamp, and runs until it is signalled. -loops N
// runs N such loops in the process, loop i reading IN-i and writing OUT-i
// (the idle benchmark's reference).
func cmdBare(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bare", flag.ContinueOnError)
	brokers := fs.String("brokers", "", "comma-separated seed brokers")
	in := fs.String("in", "", "input topic (with -loops N > 1: prefix of IN-0 .. IN-N-1)")
	out := fs.String("out", "", "output topic (with -loops N > 1: prefix of OUT-0 ..)")
	group := fs.String("group", "", "consumer group (with -loops: prefix)")
	compression := fs.String("compression", "snappy", "none, gzip, snappy, lz4 or zstd")
	linger := fs.Duration("linger", 5*time.Millisecond, "producer linger")
	eos := fs.Bool("eos", false, "exactly-once: a transaction per poll (GroupTransactSession)")
	loops := fs.Int("loops", 1, "loops in this process")
	maxBytes := fs.Int("max-record-bytes", 1048588, "the producer's largest record batch")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *brokers == "" || *in == "" || *out == "" || *group == "" {
		return errors.New("bare: -brokers, -in, -out and -group are required")
	}
	codec, err := codecOf(*compression)
	if err != nil {
		return err
	}
	seeds := strings.Split(*brokers, ",")
	var wg sync.WaitGroup
	errs := make(chan error, *loops)
	for i := 0; i < *loops; i++ {
		l := bareLoop{seeds: seeds, in: *in, out: *out, group: *group, codec: codec, linger: *linger, maxBytes: int32(*maxBytes)}
		if *loops > 1 {
			l.in, l.out, l.group = fmt.Sprintf("%s-%d", l.in, i), fmt.Sprintf("%s-%d", l.out, i), fmt.Sprintf("%s-%d", l.group, i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := l.run
			if *eos {
				run = l.runEOS
			}
			if err := run(ctx); err != nil && ctx.Err() == nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

type bareLoop struct {
	seeds          []string
	in, out, group string
	codec          kgo.CompressionCodec
	linger         time.Duration
	maxBytes       int32
}

func (l bareLoop) run(ctx context.Context) error {
	cons, err := kgo.NewClient(kgo.SeedBrokers(l.seeds...), kgo.ConsumerGroup(l.group), kgo.ConsumeTopics(l.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		return err
	}
	defer cons.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(l.seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(l.linger), kgo.ProducerBatchCompression(l.codec), kgo.ProducerBatchMaxBytes(l.maxBytes))
	if err != nil {
		return err
	}
	defer prod.Close()
	var failed atomic.Value
	for ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			prod.Produce(ctx, &kgo.Record{Topic: l.out, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}, func(_ *kgo.Record, err error) {
				if err != nil && ctx.Err() == nil {
					failed.Store(err)
				}
			})
		})
		if fs.NumRecords() > 0 {
			if err := prod.Flush(ctx); err != nil && ctx.Err() == nil {
				return err
			}
			if err := cons.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				return err
			}
		}
		if err, _ := failed.Load().(error); err != nil {
			return err
		}
	}
	return nil
}

func (l bareLoop) runEOS(ctx context.Context) error {
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(l.seeds...), kgo.ConsumerGroup(l.group), kgo.ConsumeTopics(l.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.TransactionalID(l.group+"-txn"),
		kgo.ProducerLinger(l.linger), kgo.ProducerBatchCompression(l.codec), kgo.ProducerBatchMaxBytes(l.maxBytes))
	if err != nil {
		return err
	}
	defer s.Close()
	for ctx.Err() == nil {
		fs := s.PollFetches(ctx)
		if fs.NumRecords() == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return err
		}
		var failed atomic.Value
		fs.EachRecord(func(r *kgo.Record) {
			s.Produce(ctx, &kgo.Record{Topic: l.out, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}, func(_ *kgo.Record, err error) {
				if err != nil && ctx.Err() == nil {
					failed.Store(err)
				}
			})
		})
		commit := kgo.TryCommit
		if failed.Load() != nil {
			commit = kgo.TryAbort
		}
		if _, err := s.End(ctx, commit); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

func codecOf(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression %q: want none, gzip, snappy, lz4 or zstd", name)
}
