package kafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactions makes a Source transactional (exactly-once): its client is
// a franz-go GroupTransactSession, the Sinks given the Source in
// SinkConfig.Transactional write through that client, and the pipeline
// ends each of its transactions with the offsets of everything it fetched
// (pipeline.Transactor): output records, dead letters and consumed offsets
// are committed together or not at all. The group generation fences a
// zombie (KIP-447): a member that lost its partitions cannot commit
// offsets for them, and a transaction open when the group rebalances is
// aborted, its records read again. Readers of the output see only
// committed transactions when they read with isolation level
// read_committed.
//
// Every sink of such a pipeline must be on the source's cluster; the
// Source owns the client (Close closes it), so Sinks attached to it do not
// close it.
type Transactions struct {
	// ID is the transactional ID. "" derives it from the group and the
	// static instance ID ("streamd-GROUP-INSTANCE"), so that a restarted
	// instance fences its predecessor's open transaction at once; without
	// an instance ID it is random, and a crashed process's open
	// transaction holds read_committed readers of its partitions until
	// Timeout.
	ID string
	// Timeout is the transaction timeout: the broker aborts a transaction
	// open longer (its producer is fenced, the pipeline fails). 0 means
	// DefaultTransactionTimeout.
	Timeout time.Duration
}

// DefaultTransactionTimeout is Transactions.Timeout's default: as Kafka
// Streams under exactly-once, short, since it bounds how long a crashed
// instance's open transaction holds read_committed readers and the
// partitions' next owner.
const DefaultTransactionTimeout = 10 * time.Second

// txnSource is a transactional Source's state.
type txnSource struct {
	conf Transactions

	mu    sync.Mutex
	sess  *kgo.GroupTransactSession
	sinks []txnSink // attached before the client exists
	id    string
}

// txnSink is what an attached Sink needs of the shared producer.
type txnSink struct {
	topic    string
	same     bool
	codec    kgo.CompressionCodec
	maxBytes int32
}

// attach registers a Sink's producer settings; false once the client
// exists (a Sink must be made before the Source is Ready).
func (t *txnSource) attach(k txnSink) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sess != nil {
		return false
	}
	t.sinks = append(t.sinks, k)
	return true
}

// newClient makes a transactional source's client: a group transact
// session with the attached sinks' producer settings.
func (s *Source) newClient(opts []kgo.Opt) (*kgo.Client, error) {
	t := s.txn
	if t == nil {
		return kgo.NewClient(opts...)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	id := t.conf.ID
	if id == "" {
		if s.instanceID != "" {
			id = "streamd-" + s.group + "-" + s.instanceID
		} else {
			host, _ := os.Hostname()
			b := make([]byte, 6)
			rand.Read(b)
			id = "streamd-" + s.group + "-" + host + "-" + hex.EncodeToString(b)
			s.log.Warn("transactional id without a static instance id: a crash leaves its open transaction to time out, holding read_committed readers meanwhile", "transactional_id", id, "timeout", t.timeout())
		}
	}
	part := topicPartitioner{same: map[string]bool{}}
	var codecs []kgo.CompressionCodec
	maxBytes := int32(DefaultMaxRecordBytes)
	for i, k := range t.sinks {
		part.same[k.topic] = k.same
		if i == 0 {
			codecs = append(codecs, k.codec) // the output's: one codec per client
			maxBytes = k.maxBytes
		}
		maxBytes = max(maxBytes, k.maxBytes)
	}
	opts = append(opts[:len(opts):len(opts)],
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(t.timeout()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(part),
		kgo.ProducerBatchMaxBytes(maxBytes),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(100000),
		kgo.UnknownTopicRetries(1),
	)
	if len(codecs) > 0 {
		opts = append(opts, kgo.ProducerBatchCompression(codecs...))
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return nil, err
	}
	t.sess, t.id = sess, id
	s.log.Info("exactly-once: transactional client", "group", s.group, "transactional_id", id)
	return sess.Client(), nil
}

func (t *txnSource) timeout() time.Duration {
	if t.conf.Timeout > 0 {
		return t.conf.Timeout
	}
	return DefaultTransactionTimeout
}

func (t *txnSource) session() *kgo.GroupTransactSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sess
}

// readyTxn initializes a transactional source's producer ID: with a
// transactional ID its predecessor used (a restart), the broker aborts
// that one's open transaction now. Until then the group's offsets the
// transaction was committing stay pending, and fetching waits for them.
func (s *Source) readyTxn(ctx context.Context) error {
	if s.txn == nil {
		return nil
	}
	if _, _, err := s.cl.ProducerID(ctx); err != nil {
		return s.cluster.Explain(err, "", "init transactional id "+s.txn.id)
	}
	return nil
}

// Transactional implements pipeline.Transactor: whether
// SourceConfig.Transactions was set.
func (s *Source) Transactional() bool { return s.txn != nil }

var errNotConnected = errors.New("kafka source: not connected (Ready first)")

// Begin implements pipeline.Transactor.
func (s *Source) Begin() error {
	sess := s.txn.session()
	if sess == nil {
		return errNotConnected
	}
	return sess.Begin()
}

// End implements pipeline.Transactor: it flushes what the sinks produced
// in the transaction, commits the offsets of every record fetched since
// Begin in it (KIP-447: refused for a member the group moved on from),
// and commits it; or aborts it, and then the source reads again from the
// last committed offsets. A transaction is aborted, not committed, when
// the group revoked or lost partitions since Begin.
func (s *Source) End(ctx context.Context, commit bool) (bool, error) {
	sess := s.txn.session()
	if sess == nil {
		return false, errNotConnected
	}
	if commit {
		if err := s.polledNotFetched(sess.Client().UncommittedOffsets()); err != nil {
			s.log.Error("exactly-once: aborting a transaction that would commit offsets past records the pipeline never got", "err", err)
			commit = false
		}
	}
	committed, err := sess.End(ctx, kgo.TransactionEndTry(commit))
	if err != nil {
		return false, s.cluster.Explain(err, "", "end transaction "+s.txn.id)
	}
	return committed, nil
}

// polledNotFetched checks what End is about to commit, the offsets past
// every record the client polled (polled), against what FetchUpTo handed
// the pipeline: a partition polled further than that had records polled
// and dropped, and committing would lose them. A partition no longer
// assigned is left to the session, which aborts after a revoke.
func (s *Source) polledNotFetched(polled map[string]map[int32]kgo.EpochOffset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range polled {
		for p, eo := range ps {
			if st := s.parts[tp{t, p}]; st != nil && eo.Offset > st.fetched {
				return fmt.Errorf("%s/%d: polled up to offset %d, handed out up to %d", t, p, eo.Offset, st.fetched)
			}
		}
	}
	return nil
}

// topicPartitioner partitions records of the topics that write to their
// source partition (SinkConfig.SamePartition) by their Partition field,
// others as a Sink of its own would: Kafka's murmur2 of the key, unkeyed
// ones stickily.
type topicPartitioner struct{ same map[string]bool }

func (p topicPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if p.same[topic] {
		return kgo.ManualPartitioner().ForTopic(topic)
	}
	return kgo.StickyKeyPartitioner(nil).ForTopic(topic)
}
