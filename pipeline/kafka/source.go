package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamd/streamd/internal/x/kgox"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

type tp struct {
	topic     string
	partition int32
}

type partState struct {
	epoch     uint64
	acked     int64 // highest acknowledged offset, -1 none
	committed int64 // last committed offset (next to read), -1 unknown
	fetched   int64 // next offset to hand out (after the last handed to the pipeline)
	polled    int64 // next offset to poll from the client (after the last polled, handed out or read ahead)
	hwm       int64
	hwmAt     time.Time // when hwm was last learnt (a fetch or an end-offset query)
	logStart  int64     // -1 unknown
	revoking  bool      // being revoked: fetched records are dropped (group.go)
	// start is the group's committed offset when the partition was
	// assigned (where reading resumes), -1 unknown or none.
	start int64
	// A skip noted by pollLag, [skipFrom, skipTo): records of it that the
	// client had buffered still come, and are taken back from the count.
	skipFrom, skipTo int64
	// emptyAt/emptySeen: the position at which pollLag last found the log
	// empty above it (log start = end > position), and how many polls in
	// a row it did.
	emptyAt   int64
	emptySeen int
}

// Source reads topics as a member of a consumer group.
//
// Its lag (pipeline.Lagger) comes from fetches and from an end-offset query
// every LagInterval; a partition's lag is pipeline.LagUnknown, never 0, when
// neither answered for three intervals (at least 15 s): the broker is
// unreachable or frozen. Partitions lost with the group session stay in
// the lag, unknown, until the group assigns partitions again.
type Source struct {
	cl          *kgo.Client // set once by Ready; see client
	clp         atomic.Pointer[kgo.Client]
	opts        []kgo.Opt
	group       string
	instanceID  string
	instanceDir string
	release     func()
	topics      []string
	partitions  int32
	latest      bool
	log         *slog.Logger
	watch       *brokerWatch
	cluster     *Cluster
	regex       bool
	groupWatch  *groupWatch
	txn         *txnSource // nil unless SourceConfig.Transactions
	lagInterval time.Duration
	lagStale    time.Duration
	stopLag     context.CancelFunc
	lagDone     chan struct{}

	revokeTimeout time.Duration
	acked         chan struct{} // signalled by Ack while a revoke waits

	mu       sync.Mutex
	parts    map[tp]*partState
	lost     map[tp]bool
	epochs   uint64
	lagErr   error
	lagErrAt time.Time
	grp      groupState // for Group (group.go)
	paused   bool
	closing  bool         // Close started: a revoke does not wait
	skipped  map[tp]int64 // records skipped unread (retention), for Skipped

	// ahead holds records polled from the client and not yet handed out
	// (at-least-once only; see FetchUpTo), in poll order.
	ahead []pipeline.Msg

	// needStart: a partition was assigned whose committed offset FetchUpTo
	// has not looked up yet.
	needStart atomic.Bool
	// closeCtx is the context of a Close in progress: a revoke's commit
	// (inside franz-go's leave and Close) ends with it.
	closeCtx atomic.Pointer[context.Context]
}

// SourceConfig configures a Source.
type SourceConfig struct {
	Seeds    []string
	ClientID string
	Topics   []string
	Group    string
	// Latest starts a group with no committed offsets at the end of the
	// topics instead of the beginning.
	Latest bool
	// Partitions is the partition count of topics created on demand; 0
	// means DefaultPartitions.
	Partitions int32
	Logger     *slog.Logger
	// InstanceID makes the member static (KIP-345) with this ID.
	InstanceID string
	// InstanceDir, when InstanceID is empty, makes the member static with
	// an ID claimed under this directory at Ready (ClaimInstanceID): a
	// restarted process takes its partitions back at once, and processes
	// sharing the directory get different IDs. If no ID can be claimed
	// the member is dynamic (a warning says why).
	InstanceDir string
	// SessionTimeout is the group session timeout; 0 means
	// DefaultSessionTimeout (franz-go's).
	SessionTimeout time.Duration
	// RevokeTimeout bounds how long a revoke waits for the in-flight
	// records of the revoked partitions to be acknowledged, so that they
	// are committed before another member takes the partitions over
	// (default DefaultRevokeTimeout; negative: no wait). Records not
	// acknowledged by then are abandoned, never committed.
	RevokeTimeout time.Duration
	// LagInterval is how often the end offsets of the assigned partitions
	// are queried for the lag; 0 means DefaultLagInterval.
	LagInterval time.Duration
	// Cluster, when set, is the cluster to read (its Options replace
	// Seeds and ClientID), and its Explain says the source's errors.
	Cluster *Cluster
	// TopicsRegex makes Topics regular expressions (franz-go's
	// ConsumeRegex): every topic whose name one matches is read, as
	// topics come and go; none is created.
	TopicsRegex bool
	// Transactions, when set, makes the source transactional
	// (exactly-once; see Transactions): it connects at Ready, after the
	// Sinks that write in its transactions were made.
	Transactions *Transactions
	// Opts are extra franz-go options.
	Opts []kgo.Opt
}

// NewSource returns a Source; it connects lazily.
func NewSource(c SourceConfig) (*Source, error) {
	switch {
	case c.Partitions < 0:
		return nil, fmt.Errorf("partitions %d: want 1 or more (0: %d)", c.Partitions, DefaultPartitions)
	case c.SessionTimeout < 0:
		return nil, fmt.Errorf("session timeout %s: want more than 0 (0: %s)", c.SessionTimeout, DefaultSessionTimeout)
	case c.LagInterval < 0:
		return nil, fmt.Errorf("lag interval %s: want more than 0 (0: %s)", c.LagInterval, DefaultLagInterval)
	}
	if c.Cluster == nil {
		c.Cluster = &Cluster{Seeds: c.Seeds, ClientID: c.ClientID}
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.LagInterval == 0 {
		c.LagInterval = DefaultLagInterval
	}
	if c.RevokeTimeout == 0 {
		c.RevokeTimeout = DefaultRevokeTimeout
	}
	s := &Source{topics: c.Topics, partitions: c.Partitions, latest: c.Latest, log: c.Logger, parts: map[tp]*partState{}, lost: map[tp]bool{}, skipped: map[tp]int64{},
		watch: newBrokerWatch(), lagInterval: c.LagInterval, lagStale: max(3*c.LagInterval, 15*time.Second),
		cluster: c.Cluster, regex: c.TopicsRegex, groupWatch: &groupWatch{},

		revokeTimeout: c.RevokeTimeout, acked: make(chan struct{}, 1)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	reset := kgo.NewOffset().AtStart()
	if c.Latest {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := c.Cluster.Options()
	if c.TopicsRegex {
		opts = append(opts, kgo.ConsumeRegex())
	}
	opts = append(opts,
		kgo.ConsumerGroup(c.Group),
		kgo.ConsumeTopics(c.Topics...),
		kgo.ConsumeResetOffset(reset),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(s.assigned),
		kgo.OnPartitionsRevoked(s.revoked),
		kgo.OnPartitionsLost(s.onLost),
		kgo.FetchMaxWait(100e6), // 100ms: low latency when topics are quiet
		kgo.WithHooks(s.watch, s.groupWatch),
	)
	if c.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(c.SessionTimeout))
	}
	s.opts = append(opts, c.Opts...)
	s.group, s.instanceID, s.instanceDir = c.Group, c.InstanceID, c.InstanceDir
	if c.Transactions != nil {
		s.txn = &txnSource{conf: *c.Transactions}
	}
	if s.instanceDir == "" && s.txn == nil {
		// No slot to claim: the client can exist now, and so validate the
		// options at once.
		if err := s.connect(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// connect creates the client, claiming an instance ID first if asked to.
func (s *Source) connect() error {
	if s.client() != nil {
		return nil
	}
	opts := s.opts
	if s.instanceID == "" && s.instanceDir != "" {
		id, release, err := ClaimInstanceID(s.instanceDir, s.group)
		if err != nil {
			s.log.Warn("no static instance id: a restart waits the session timeout for its partitions", "dir", s.instanceDir, "err", err)
		} else {
			s.instanceID, s.release = id, release
			s.log.Info("static group member", "group", s.group, "instance_id", id)
		}
	}
	if s.instanceID != "" {
		opts = append(opts[:len(opts):len(opts)], kgo.InstanceID(s.instanceID))
	}
	cl, err := s.newClient(opts)
	if err != nil {
		if s.release != nil {
			s.release()
			s.release = nil
		}
		return err
	}
	s.cl = cl
	s.clp.Store(cl)
	s.applyPause(cl)
	ctx, cancel := context.WithCancel(context.Background())
	s.stopLag, s.lagDone = cancel, make(chan struct{})
	go s.pollLag(ctx)
	return nil
}

// client is the franz-go client, nil before Ready created it.
func (s *Source) client() *kgo.Client { return s.clp.Load() }

// InstanceID returns the static instance ID the source uses, if any
// (claimed at Ready when SourceConfig.InstanceDir is set).
func (s *Source) InstanceID() string {
	if s.client() == nil {
		return ""
	}
	return s.instanceID
}

// Ready implements pipeline.Readier: the brokers answer and the topics exist.
func (s *Source) Ready(ctx context.Context) error {
	if err := s.connect(); err != nil {
		return err
	}
	if err := s.cluster.ready(ctx, s.cl, s.watch, kmsg.ACLOperationRead, s.group, s.partitions, s.regex, s.topics...); err != nil {
		return err
	}
	return s.readyTxn(ctx)
}

// assigned is franz-go's OnPartitionsAssigned. It uses the client it is
// given, never s.cl: the first assignment can come before connect has
// stored the client (a data race, and generation 0 in the status).
func (s *Source) assigned(_ context.Context, cl *kgo.Client, m map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.lost) // the group session is back: what is ours is in m (or kept)
	s.noteAssigned(cl, m)
	for t, ps := range m {
		for _, p := range ps {
			s.epochs++
			s.parts[tp{t, p}] = &partState{epoch: s.epochs, acked: -1, committed: -1, fetched: -1, polled: -1, hwm: -1, logStart: -1, start: -1, emptyAt: -1}
		}
	}
	s.needStart.Store(true)
	s.log.Info("partitions assigned", "partitions", m, "generation", s.grp.generation)
	if s.paused {
		cl.PauseFetchTopics(topicsOf(m)...)
	}
}

// revoked gives the in-flight records of the revoked partitions up to the
// revoke timeout to be acknowledged (fetching no more of them), commits
// what was acknowledged, then forgets the partitions: records still in
// flight are dropped and never committed.
func (s *Source) revoked(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	waited, left := s.drainRevoked(ctx, m)
	s.mu.Lock()
	offsets := s.commitable(m)
	for t, ps := range m {
		for _, p := range ps {
			delete(s.parts, tp{t, p})
		}
	}
	s.noteRevoked(m, false)
	s.mu.Unlock()
	if left > 0 {
		s.log.Warn("partitions revoked with records in flight: they are abandoned, not committed (the next owner reads them again)",
			"in_flight", left, "waited", waited.Round(time.Millisecond), "revoke_timeout", s.revokeTimeout)
	}
	if len(offsets) > 0 {
		// franz-go calls a revoke with its client's context, which ends
		// only once the client is closed: when Close leaves the group,
		// the commit ends with Close's deadline, or closing would wait on
		// a frozen broker.
		if c := s.closeCtx.Load(); c != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(*c, cancel)()
		}
		if err := s.commit(ctx, offsets); err != nil {
			s.log.Warn("commit on revoke failed", "err", err)
		}
	}
	s.log.Info("partitions revoked", "partitions", m)
}

// onLost forgets the lost partitions' in-flight records, as revoked does
// without a commit; their lag is unknown until the group assigns again.
func (s *Source) onLost(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			delete(s.parts, tp{t, p})
			s.lost[tp{t, p}] = true
		}
	}
	s.noteRevoked(m, true)
	s.log.Warn("partitions lost", "partitions", m)
}

// Fetch implements pipeline.Source.
func (s *Source) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	return s.FetchUpTo(ctx, 10000)
}

// FetchUpTo implements pipeline.BoundedSource.
//
// An at-least-once source takes everything the client has buffered at
// once and hands it out up to n records at a time, reading ahead of the
// pipeline: franz-go starts a broker's next fetch only once every record
// of its buffered one was polled, so polling n at a time, with n the room
// under max_in_flight, would hold the next fetch back until the pipeline
// had taken the whole response, and the pipeline would then wait a fetch
// round trip (and the response's decompression) with nothing to do. So
// the records between the broker and the pipeline are at most two fetch
// responses per broker (bounded by fetch_max_bytes), as for any franz-go
// consumer that polls all it has. A transactional source polls exactly n:
// its transaction commits the offsets of everything polled.
func (s *Source) FetchUpTo(ctx context.Context, n int) ([]pipeline.Msg, error) {
	n = max(1, n)
	if s.txn == nil {
		s.mu.Lock()
		msgs := s.handOut(n)
		s.mu.Unlock()
		if len(msgs) > 0 {
			return msgs, nil
		}
	}
	poll := n
	if s.txn == nil {
		poll = 0 // everything buffered
	}
	fetches := s.cl.PollRecords(ctx, poll)
	if fetches.IsClientClosed() {
		return nil, errors.New("kafka client closed")
	}
	if err := ctx.Err(); err != nil && fetches.NumRecords() == 0 {
		return nil, err // records polled as ctx ended are returned: the client counts them consumed
	}
	for _, fe := range fetches.Errors() {
		if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, context.DeadlineExceeded) {
			continue
		}
		s.log.Warn("fetch error", "topic", fe.Topic, "partition", fe.Partition, "err", s.cluster.Explain(fe.Err, "", "read topic "+fe.Topic))
	}
	got := fetches.NumRecords()
	if got == 0 {
		return nil, nil
	}
	var committed map[string]map[int32]kgo.EpochOffset
	if s.needStart.Load() {
		committed = s.cl.CommittedOffsets() // not under s.mu (see Lag)
	}
	msgs := make([]pipeline.Msg, 0, got)
	// Every record's headers come from one slab, grown as needed (a
	// record's headers stay valid when it grows: they are capped), so
	// that records without headers cost nothing and no pass counts them.
	var slab []record.Header
	s.mu.Lock()
	defer s.mu.Unlock()
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		st := s.parts[tp{p.Topic, p.Partition}]
		if st == nil || st.revoking {
			return // revoked since it was fetched, or being revoked
		}
		st.hwm, st.hwmAt = p.HighWatermark, time.Now()
		s.checkSkip(tp{p.Topic, p.Partition}, st, p, committed)
		for _, r := range p.Records {
			msgs = msgs[:len(msgs)+1] // got is the fetch's records: room for every one
			m := &msgs[len(msgs)-1]
			m.Token = st.epoch
			kgox.SetRecord(&m.Record, r, &slab)
			st.polled = r.Offset + 1
		}
	})
	if committed != nil {
		fresh := false
		for _, st := range s.parts {
			fresh = fresh || st.polled < 0
		}
		s.needStart.Store(fresh)
	}
	if s.txn != nil {
		for i := range msgs {
			r := &msgs[i].Record
			s.parts[tp{r.Topic, r.Partition}].fetched = r.Offset + 1
		}
		return msgs, nil
	}
	s.ahead = msgs
	return s.handOut(n), nil
}

// handOut takes up to n records from s.ahead for the pipeline, leaving
// out those of partitions revoked (or being revoked) since they were
// polled, or assigned again since (another epoch), and notes the offsets
// handed out. It returns nil only when no live record is left ahead.
// s.mu must be held.
func (s *Source) handOut(n int) []pipeline.Msg {
	for len(s.ahead) > 0 {
		if msgs := s.handOutSome(n); len(msgs) > 0 {
			return msgs
		}
	}
	return nil
}

// handOutSome is handOut of the next n records ahead, which may all be
// stale.
func (s *Source) handOutSome(n int) []pipeline.Msg {
	k := min(n, len(s.ahead))
	msgs := s.ahead[:k:k]
	s.ahead = s.ahead[k:]
	if len(s.ahead) == 0 {
		s.ahead = nil // the next poll gets a new array; msgs keep this one
	}
	var live []pipeline.Msg // allocated at the first stale record
	var cur partCursor
	for i := range msgs {
		r := &msgs[i].Record
		st := cur.state(s.parts, r)
		ok := st != nil && !st.revoking && st.epoch == msgs[i].Token
		if ok {
			st.fetched = r.Offset + 1
		}
		switch {
		case !ok && live == nil:
			live = append(make([]pipeline.Msg, 0, len(msgs)), msgs[:i]...)
		case ok && live != nil:
			live = append(live, msgs[i])
		}
	}
	if live == nil {
		return msgs
	}
	return live
}

// checkSkip notes the records a fetched partition skipped: when its first
// record comes after the offset the source expected (the next after the
// last it fetched, or the group's committed offset) and the log now starts
// after that offset too, the broker deleted them (retention) and franz-go
// reset to the log start (OFFSET_OUT_OF_RANGE). A gap the log start does
// not explain (compaction, transaction markers) is no skip. It also takes
// back a skip pollLag noted of records that come after all (the client had
// them buffered). s.mu must be held.
func (s *Source) checkSkip(k tp, st *partState, p kgo.FetchTopicPartition, committed map[string]map[int32]kgo.EpochOffset) {
	if len(p.Records) == 0 {
		return
	}
	if st.start < 0 && st.polled < 0 {
		if eo, ok := committed[k.topic][k.partition]; ok {
			st.start = eo.Offset
		}
	}
	if st.skipTo > st.skipFrom {
		back := int64(0)
		for _, r := range p.Records {
			if r.Offset >= st.skipFrom && r.Offset < st.skipTo {
				back++
			}
		}
		s.skipped[k] -= back
		st.skipFrom, st.skipTo = 0, 0
	}
	from := st.polled
	if from < 0 {
		from = st.start
	}
	first := p.Records[0].Offset
	if from >= 0 && first > from && p.LogStartOffset > from {
		s.noteSkip(k, from, min(first, p.LogStartOffset))
	}
}

// noteSkip logs and counts the records [from, to) of k as skipped. s.mu
// must be held.
func (s *Source) noteSkip(k tp, from, to int64) {
	s.skipped[k] += to - from
	s.log.Warn("records deleted by retention before they were read: skipped", "topic", k.topic, "partition", k.partition,
		"from", from, "to", to, "skipped", to-from, "group", s.group)
}

// Skipped implements pipeline.Skipper: per "topic/partition", the records
// deleted by retention before the source read them, since it started.
func (s *Source) Skipped() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out map[string]int64
	for k, n := range s.skipped {
		if n > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[k.topic+"/"+strconv.Itoa(int(k.partition))] = n
		}
	}
	return out
}

// Live implements pipeline.Liveness.
func (s *Source) Live(m *pipeline.Msg) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.parts[tp{m.Record.Topic, m.Record.Partition}]
	return st != nil && st.epoch == m.Token
}

// FilterLive implements pipeline.BatchLiveness: one lock per batch.
func (s *Source) FilterLive(msgs []pipeline.Msg) []pipeline.Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	var live []pipeline.Msg // allocated at the first stale record
	var cur partCursor
	for i := range msgs {
		st := cur.state(s.parts, &msgs[i].Record)
		ok := st != nil && st.epoch == msgs[i].Token
		switch {
		case !ok && live == nil:
			live = append(make([]pipeline.Msg, 0, len(msgs)), msgs[:i]...)
		case ok && live != nil:
			live = append(live, msgs[i])
		}
	}
	if live == nil {
		return msgs
	}
	return live
}

// Ack implements pipeline.Source.
func (s *Source) Ack(msgs []pipeline.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cur partCursor
	for i := range msgs {
		r := &msgs[i].Record
		st := cur.state(s.parts, r)
		if st == nil || st.epoch != msgs[i].Token {
			continue
		}
		if r.Offset > st.acked {
			st.acked = r.Offset
		}
	}
	if s.grp.revoking > 0 {
		select {
		case s.acked <- struct{}{}:
		default:
		}
	}
}

// partCursor finds the partState of a batch's records, looking it up once
// per run of records of one partition (a fetch hands them out partition by
// partition).
type partCursor struct {
	at tp
	st *partState
}

// state returns the state of r's partition in parts, nil if it is not
// assigned.
func (c *partCursor) state(parts map[tp]*partState, r *record.Record) *partState {
	if c.st == nil || c.at.partition != r.Partition || c.at.topic != r.Topic {
		c.at = tp{r.Topic, r.Partition}
		c.st = parts[c.at]
	}
	return c.st
}

// commitable returns the offsets to commit for the partitions in only
// (all when nil). s.mu must be held.
func (s *Source) commitable(only map[string][]int32) map[string]map[int32]kgo.EpochOffset {
	out := map[string]map[int32]kgo.EpochOffset{}
	if s.txn != nil {
		return out // transactions commit the offsets (End)
	}
	add := func(k tp, st *partState) {
		if st.acked < 0 || st.acked+1 <= st.committed {
			return
		}
		if out[k.topic] == nil {
			out[k.topic] = map[int32]kgo.EpochOffset{}
		}
		out[k.topic][k.partition] = kgo.EpochOffset{Epoch: -1, Offset: st.acked + 1}
	}
	if only == nil {
		for k, st := range s.parts {
			add(k, st)
		}
		return out
	}
	for t, ps := range only {
		for _, p := range ps {
			if st := s.parts[tp{t, p}]; st != nil {
				add(tp{t, p}, st)
			}
		}
	}
	return out
}

// Commit implements pipeline.Source: it commits every acknowledged offset
// not committed yet.
func (s *Source) Commit(ctx context.Context) error {
	s.mu.Lock()
	offsets := s.commitable(nil)
	s.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	return s.commit(ctx, offsets)
}

func (s *Source) commit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) error {
	if err := kgox.Commit(ctx, s.cl, offsets); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range offsets {
		for p, eo := range ps {
			if st := s.parts[tp{t, p}]; st != nil && eo.Offset > st.committed {
				st.committed = eo.Offset
			}
		}
	}
	return nil
}

// Lag implements pipeline.Lagger: per assigned (or lost) partition, the
// records between the next to fetch and the high watermark, or
// pipeline.LagUnknown.
func (s *Source) Lag() pipeline.LagMap {
	type snap struct {
		k        tp
		pos, hwm int64
		logStart int64
		known    bool
	}
	now := time.Now()
	s.mu.Lock()
	snaps := make([]snap, 0, len(s.parts))
	needCommitted := false
	for k, st := range s.parts {
		sn := snap{k: k, hwm: st.hwm, logStart: st.logStart, known: !st.hwmAt.IsZero() && now.Sub(st.hwmAt) <= s.lagStale}
		sn.pos = st.fetched
		if sn.pos < 0 {
			sn.pos = st.committed
		}
		needCommitted = needCommitted || (sn.known && sn.pos < 0)
		snaps = append(snaps, sn)
	}
	out := make(pipeline.LagMap, len(s.parts)+len(s.lost))
	for k := range s.lost {
		out[k.topic+"/"+strconv.Itoa(int(k.partition))] = pipeline.LagUnknown
	}
	s.mu.Unlock()
	var committed map[string]map[int32]kgo.EpochOffset
	if cl := s.client(); needCommitted && cl != nil {
		committed = cl.CommittedOffsets() // not under s.mu: franz-go may hold its lock while it calls our callbacks
	}
	for _, sn := range snaps {
		key := sn.k.topic + "/" + strconv.Itoa(int(sn.k.partition))
		if !sn.known {
			out[key] = pipeline.LagUnknown
			continue
		}
		pos := sn.pos
		if pos < 0 {
			if eo, ok := committed[sn.k.topic][sn.k.partition]; ok {
				pos = eo.Offset
			} else if s.latest {
				pos = sn.hwm // nothing committed: starts at the end
			} else {
				pos = sn.logStart // nothing committed: starts at the beginning
			}
		}
		if pos < 0 {
			out[key] = pipeline.LagUnknown
			continue
		}
		// Records below the log start are gone (retention): not lag.
		pos = max(pos, sn.logStart)
		out[key] = max(0, sn.hwm-pos)
	}
	return out
}

// pollLag queries the assigned partitions' end (and, while some have
// nothing fetched yet, start) offsets every lagInterval.
func (s *Source) pollLag(ctx context.Context) {
	defer close(s.lagDone)
	adm := kadm.NewClient(s.cl)
	t := time.NewTicker(s.lagInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		seen := map[string]bool{}
		var topics []string
		for k := range s.parts {
			if !seen[k.topic] {
				seen[k.topic] = true
				topics = append(topics, k.topic)
			}
		}
		s.mu.Unlock()
		if len(topics) == 0 {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, max(s.lagInterval, 2*time.Second))
		ends, err := adm.ListEndOffsets(qctx, topics...)
		var starts kadm.ListedOffsets
		if err == nil {
			err = ends.Error()
		}
		// The start offsets too: for the lag of a partition not read yet,
		// and to see a log deleted above the source's position.
		if err == nil {
			if starts, err = adm.ListStartOffsets(qctx, topics...); err == nil {
				err = starts.Error()
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		var committed map[string]map[int32]kgo.EpochOffset
		if s.needStart.Load() {
			committed = s.cl.CommittedOffsets() // not under s.mu (see Lag)
		}
		now := time.Now()
		s.mu.Lock()
		if err != nil {
			s.lagErr, s.lagErrAt = err, now
		} else {
			s.lagErr = nil
		}
		ends.Each(func(o kadm.ListedOffset) {
			if st := s.parts[tp{o.Topic, o.Partition}]; st != nil && o.Err == nil {
				st.hwm, st.hwmAt = o.Offset, now
			}
		})
		starts.Each(func(o kadm.ListedOffset) {
			if st := s.parts[tp{o.Topic, o.Partition}]; st != nil && o.Err == nil {
				st.logStart = o.Offset
				s.checkEmpty(tp{o.Topic, o.Partition}, st, committed)
			}
		})
		s.mu.Unlock()
	}
}

// checkEmpty notes a skip that no record will ever show to FetchUpTo:
// retention deleted the whole log above the source's position (log start
// = log end > position), as it does to a backlog older than retention.
// Seen at two lag queries in a row with no record fetched in between (the
// client may have had records of it buffered), the records between the
// position and the log start are counted as skipped; one that comes
// after all is taken back (checkSkip). s.mu must be held.
func (s *Source) checkEmpty(k tp, st *partState, committed map[string]map[int32]kgo.EpochOffset) {
	if st.start < 0 && st.polled < 0 {
		if eo, ok := committed[k.topic][k.partition]; ok {
			st.start = eo.Offset
		}
	}
	pos := st.polled
	if pos < 0 {
		pos = st.start
	}
	if pos < 0 || st.logStart <= pos || st.hwm != st.logStart {
		st.emptyAt, st.emptySeen = -1, 0
		return
	}
	if st.emptyAt != pos {
		st.emptyAt, st.emptySeen = pos, 0
	}
	st.emptySeen++
	if st.emptySeen < 2 {
		return
	}
	s.noteSkip(k, pos, st.logStart)
	st.skipFrom, st.skipTo = pos, st.logStart
	if st.fetched == st.polled { // none of the partition's records waits in s.ahead
		st.fetched = st.logStart
	}
	st.polled = st.logStart
	st.emptyAt, st.emptySeen = -1, 0
}

// Condition implements pipeline.Conditioner: the last end-offset query's
// error, or a broker's recent connection or request error.
func (s *Source) Condition() error {
	s.mu.Lock()
	lagErr, at := s.lagErr, s.lagErrAt
	s.mu.Unlock()
	if lagErr != nil && time.Since(at) <= s.lagStale {
		return fmt.Errorf("end offsets: %w", s.cluster.Explain(lagErr, "", "list end offsets"))
	}
	if _, err := s.groupWatch.state(); err != nil {
		return s.cluster.Explain(err, "", fmt.Sprintf("consumer group %q", s.group))
	}
	return s.cluster.explainCondition(s.watch)
}

// Describe implements pipeline.Describer: the cluster and the group
// protocol the member runs ("consumer" is KIP-848; "" until it joined).
func (s *Source) Describe() map[string]string {
	p, _ := s.groupWatch.state()
	return map[string]string{"cluster": s.cluster.name(), "group": s.group, "group_protocol": p}
}

// closeTimeout bounds a Close whose ctx has no deadline: with the
// coordinator unreachable, franz-go would retry the leave (and the
// revoke's commit) for as long as its own retry timeout.
const closeTimeout = 5 * time.Second

// Close implements pipeline.Source: it leaves the group, a static member
// too, so that its partitions move to the other members at once
// (franz-go's Close does not leave for a static member), and closes the
// client, returning when ctx is done at the latest (in 5 s if ctx has no
// deadline): with the broker frozen or gone, the leave and the revoke's
// commit end with ctx, and a client close still waiting on the broker
// (franz-go gives a fetch session and a KIP-714 telemetry push a second
// each) is left to finish in the background. The error says what did
// not happen: a failed leave (the partitions then move after the
// session timeout), a client left closing.
func (s *Source) Close(ctx context.Context) error {
	cl := s.client()
	if cl == nil {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, closeTimeout)
		defer cancel()
	}
	s.closeCtx.Store(&ctx)
	s.stopLag()
	<-s.lagDone
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	memberID, _ := cl.GroupMetadata()
	protocol, _ := s.groupWatch.state()
	var errs []error
	// Stops the group session (revoking and committing what was
	// acknowledged) without a leave request for a static member...
	err := cl.LeaveGroupContext(ctx)
	switch {
	case s.instanceID != "" && protocol == "consumer":
		// ...and for a static KIP-848 member with a request the broker
		// refuses (group.go): leave as the member, for good.
		if err := leave848(ctx, cl, s.group, memberID, s.instanceID); err != nil {
			errs = append(errs, fmt.Errorf("leaving group %q as static member %q failed; its partitions move after the session timeout: %w", s.group, s.instanceID, err))
		}
	case err != nil:
		errs = append(errs, fmt.Errorf("leaving group %q failed; closed anyway: %w", s.group, err))
	case s.instanceID != "":
		// ...which leaves by instance ID here, as an admin would.
		resp, err := kadm.NewClient(cl).LeaveGroup(ctx, kadm.LeaveGroup(s.group).InstanceIDs(s.instanceID).Reason("streamd shutting down"))
		if err == nil {
			err = resp.Error()
		}
		if err != nil && !errors.Is(err, kerr.UnknownMemberID) {
			errs = append(errs, fmt.Errorf("leaving group %q as static member %q failed; its partitions move after the session timeout: %w", s.group, s.instanceID, err))
		}
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		cl.Close()
	}()
	select {
	case <-closed:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("the Kafka client was not closed by the deadline; left closing: %w", ctx.Err()))
	}
	if s.release != nil {
		s.release()
	}
	return errors.Join(errs...)
}
