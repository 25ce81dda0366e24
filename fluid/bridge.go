package fluid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/x/kgox"
)

// Bridge is the Fluid Messaging bridge: the /fluid/ HTTP endpoints and, on
// the one instance that holds leadership, the republishers that fill
// downgrade topics. Create it with NewBridge, serve Handler, Close it.
type Bridge struct {
	cfg   config
	meta  *Metadata
	log   *slog.Logger
	cl    *kgo.Client // producer (manual partitioner) and admin
	adm   *kadm.Client
	state *stateStore
	dg    *downgrader

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}

	mu      sync.Mutex // leader, running
	leader  bool
	running map[topicVersion]*runner

	topicsMu sync.Mutex
	topics   map[string]int // downgrade topics known to exist -> partitions

	mainTopics sync.Map // main topics seen in Kafka -> partitions

	triggerMu sync.Mutex // serialises state changes from HTTP
	compat    sync.Map   // compatKey -> bool (answers already acted on)
	regCompat sync.Map   // compatKey -> bool (the registry's answers)
}

type compatKey struct {
	topic string
	o, c  int
}

// runner is one running republisher.
type runner struct {
	cancel context.CancelFunc
	done   chan struct{}
	stat   *republishStats
	fp     string // segments it runs with (view.segmentsFingerprint)
}

// wantRun is a republisher the state asks for.
type wantRun struct {
	spec republishSpec
	segs map[int32][]segment
	fp   string
}

// NewBridge loads the metadata, connects to Kafka, reads the bridge state
// and starts competing for leadership. The bridge runs until Close or ctx
// ends.
func NewBridge(ctx context.Context, opts ...Option) (*Bridge, error) {
	cfg := config{stateTopic: DefaultStateTopic, leaderGroup: DefaultLeaderGroup, metaDir: ".fluid", replication: 1, suffix: DefaultTopicSuffix, batchSize: 256}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.log == nil {
		cfg.log = slog.Default()
	}
	meta := cfg.meta
	if meta == nil {
		var err error
		var src SchemaSource
		if cfg.registry != nil {
			src = RegistrySource(ctx, cfg.registry)
		}
		if meta, err = LoadMetadataFrom(cfg.metaDir, src); err != nil {
			return nil, err
		}
	}
	if cfg.baseline == 0 {
		cfg.baseline = meta.First()
	}
	if _, ok := meta.versions[cfg.baseline]; !ok {
		return nil, fmt.Errorf("fluid: baseline version %d is not in the metadata (%d..%d)", cfg.baseline, meta.First(), meta.Last())
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), cfg.kopts...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	)...)
	if err != nil {
		return nil, fmt.Errorf("fluid: kafka client: %w", err)
	}
	b := &Bridge{
		cfg:     cfg,
		meta:    meta,
		log:     cfg.log,
		cl:      cl,
		adm:     kadm.NewClient(cl),
		dg:      newDowngrader(meta, cfg.load, cfg.pluginOpts, cfg.baseline),
		kick:    make(chan struct{}, 1),
		running: map[topicVersion]*runner{},
		topics:  map[string]int{},
	}
	b.state = &stateStore{cl: cl, topic: cfg.stateTopic, log: cfg.log, v: newView(), onChange: b.poke}
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if err := b.start(ctx); err != nil {
		b.cancel()
		b.wg.Wait()
		cl.Close()
		return nil, err
	}
	go func() {
		select {
		case <-ctx.Done():
			_ = b.Close(context.Background())
		case <-b.ctx.Done():
		}
	}()
	return b, nil
}

func (b *Bridge) start(ctx context.Context) error {
	if err := ensureStateTopic(ctx, b.adm, b.cfg.stateTopic, b.cfg.replication); err != nil {
		return err
	}
	// A topic just created is not known to every broker at once: ask for
	// its end offset until its partition is there (a real broker takes a
	// moment; kfake answers at once).
	var end kadm.ListedOffset
	for deadline := time.Now().Add(15 * time.Second); ; {
		ends, err := b.adm.ListEndOffsets(ctx, b.cfg.stateTopic)
		var ok bool
		if err == nil {
			end, ok = ends.Lookup(b.cfg.stateTopic, 0)
			if ok && end.Err == nil {
				break
			}
			err = end.Err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fluid: state topic %s: no end offset: %v", b.cfg.stateTopic, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	loaded := make(chan struct{})
	b.wg.Add(3)
	go func() {
		defer b.wg.Done()
		if err := b.state.run(b.ctx, b.cfg.kopts, end.Offset, loaded); err != nil && b.ctx.Err() == nil {
			b.log.Error("fluid: state reader stopped", "err", err)
		}
	}()
	select {
	case <-loaded:
	case <-ctx.Done():
		return ctx.Err()
	}
	go func() { defer b.wg.Done(); b.reconcileLoop() }()
	go func() { defer b.wg.Done(); b.leadership() }()
	return nil
}

// Close stops republishing, leaves the leader group and closes plugins and
// clients.
func (b *Bridge) Close(ctx context.Context) error {
	b.cancel()
	b.wg.Wait()
	b.stopAll()
	err := b.dg.close(ctx)
	// The last progress records are written asynchronously: let them out.
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if ferr := b.cl.Flush(fctx); ferr != nil {
		err = errors.Join(err, fmt.Errorf("fluid bridge: flushing the last progress records: %w", ferr))
	}
	cancel()
	b.cl.Close()
	return err
}

func (b *Bridge) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// leadership joins the leader group; the member assigned the state topic's
// only partition is the leader.
func (b *Bridge) leadership() {
	opts := append(append([]kgo.Opt(nil), b.cfg.kopts...),
		kgo.ConsumerGroup(b.cfg.leaderGroup),
		kgo.ConsumeTopics(b.cfg.stateTopic),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(10*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			if len(m[b.cfg.stateTopic]) > 0 {
				b.setLeader(true)
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			if len(m[b.cfg.stateTopic]) > 0 {
				b.setLeader(false)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			if len(m[b.cfg.stateTopic]) > 0 {
				b.setLeader(false)
			}
		}),
	)
	if b.cfg.instanceID != "" {
		opts = append(opts, kgo.InstanceID(b.cfg.instanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.log.Error("fluid: leader group client", "err", err)
		return
	}
	// The group client exists only for its assignment; records are read by
	// the state reader, so fetching is paused and polling only drives the
	// group.
	cl.PauseFetchTopics(b.cfg.stateTopic)
	for b.ctx.Err() == nil {
		cl.PollFetches(b.ctx)
	}
	b.setLeader(false)
	if b.cfg.instanceID == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = cl.LeaveGroupContext(ctx)
		cancel()
	}
	cl.Close()
}

func (b *Bridge) setLeader(on bool) {
	b.mu.Lock()
	changed := b.leader != on
	b.leader = on
	b.mu.Unlock()
	if changed {
		b.log.Info("fluid: bridge leadership", "leader", on)
	}
	if !on {
		b.stopAll()
	}
	b.poke()
}

// IsLeader reports whether this instance republishes.
func (b *Bridge) IsLeader() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.leader
}

func (b *Bridge) stopAll() {
	b.mu.Lock()
	rs := b.running
	b.running = map[topicVersion]*runner{}
	b.mu.Unlock()
	for _, r := range rs {
		r.cancel()
	}
	for _, r := range rs {
		<-r.done
	}
}

func (b *Bridge) reconcileLoop() {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.kick:
		case <-tick.C:
		}
		b.reconcile()
	}
}

// reconcile starts a republisher for every republish entry that some group
// still needs, restarts those whose segments changed, stops the others, and
// (leader only) marks entries nobody needs any more as stopped.
func (b *Bridge) reconcile() {
	want := map[topicVersion]wantRun{}
	var obsolete []topicVersion
	b.state.read(func(v *view) {
		for tv, spec := range v.republish {
			if spec.Stopped {
				continue
			}
			if len(v.groupsOn(tv.topic, tv.version)) == 0 {
				obsolete = append(obsolete, tv)
				continue
			}
			segs := map[int32][]segment{}
			for p, ss := range v.segments[tv] {
				segs[p] = append([]segment(nil), ss...)
			}
			want[tv] = wantRun{spec: spec, segs: segs, fp: v.segmentsFingerprint(tv)}
		}
	})
	b.mu.Lock()
	if !b.leader {
		b.mu.Unlock()
		return
	}
	var stop []*runner
	for tv, r := range b.running {
		if w, ok := want[tv]; !ok || w.fp != r.fp {
			stop = append(stop, r)
			delete(b.running, tv)
		}
	}
	b.mu.Unlock()
	// A republisher is stopped (and its writes acknowledged) before its
	// successor reads where the downgrade topic ends.
	for _, r := range stop {
		r.cancel()
		<-r.done
	}
	b.mu.Lock()
	if b.leader {
		for tv, w := range want {
			if _, ok := b.running[tv]; ok {
				continue
			}
			ctx, cancel := context.WithCancel(b.ctx)
			r := &runner{cancel: cancel, done: make(chan struct{}), stat: &republishStats{}, fp: w.fp}
			b.running[tv] = r
			go func() {
				defer close(r.done)
				b.runRepublisher(ctx, tv, w.spec, w.segs, r.stat)
			}()
		}
	}
	b.mu.Unlock()
	for _, tv := range obsolete {
		b.triggerMu.Lock()
		// Re-check under the lock: a group may have registered meanwhile.
		still, spec, ok := false, republishSpec{}, false
		b.state.read(func(v *view) {
			still = len(v.groupsOn(tv.topic, tv.version)) > 0
			spec, ok = v.republish[tv]
		})
		if !still && ok && !spec.Stopped {
			b.log.Info("fluid: no group needs the downgrade topic any more, republishing stopped", "topic", tv.topic, "version", tv.version)
			spec.Stopped = true
			ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
			if err := b.state.put(ctx, republishKey(tv), spec); err != nil {
				b.log.Warn("fluid: record that republishing stopped", "err", err)
			}
			cancel()
			b.compat.Range(func(k, _ any) bool {
				if ck := k.(compatKey); ck.topic == tv.topic && ck.c == tv.version {
					b.compat.Delete(k)
				}
				return true
			})
		}
		b.triggerMu.Unlock()
	}
}

// runRepublisher runs one republisher until ctx ends, restarting it with
// backoff after errors. A record that cannot be downgraded stops progress
// there (fail closed) and is retried until the metadata or plugin is fixed.
func (b *Bridge) runRepublisher(ctx context.Context, tv topicVersion, spec republishSpec, segs map[int32][]segment, stat *republishStats) {
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		err := b.republish(ctx, tv, spec, segs, stat)
		if ctx.Err() != nil {
			return
		}
		stat.setErr(err)
		b.log.Error("fluid: republishing failed; retrying", "topic", tv.topic, "version", tv.version, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// DowngradeTopic is the name of the downgrade topic of topic for version.
func (b *Bridge) DowngradeTopic(topic string, version int) string {
	return topic + b.cfg.suffix + strconv.Itoa(version)
}

// partitions returns the partition count of topic, or 0 if it does not
// exist, asking a broker (not franz-go's metadata cache, which keeps a
// topic unknown for 5 s after it was created); a topic the broker does not
// know is asked about again until wait has passed (kgox.UnknownTopicWait
// for a topic that should exist).
func (b *Bridge) partitions(ctx context.Context, topic string, wait time.Duration) (int, error) {
	n, err := kgox.TopicPartitions(ctx, b.cl, topic, wait)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return 0, nil
	}
	return n, err
}

// endOffsets returns the end offsets of partitions parts of topic. A
// partition the client does not know yet (a downgrade topic created a
// moment ago: brokers apply a new topic some time after CreateTopics
// answers, and franz-go caches what it was told) is asked about again,
// with the client's metadata of the topic forgotten, for up to
// kgox.UnknownTopicWait; then the error names it.
func (b *Bridge) endOffsets(ctx context.Context, topic string, parts ...int32) (map[int32]int64, error) {
	var out map[int32]int64
	err := kgox.AskAgain(ctx, kgox.UnknownTopicWait, func() (bool, error) {
		ends, err := b.adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, err
		}
		out = make(map[int32]int64, len(parts))
		for _, p := range parts {
			e, ok := ends.Lookup(topic, p)
			switch {
			case ok && e.Err == nil:
				out[p] = e.Offset
				continue
			case !ok:
				e.Err = kerr.UnknownTopicOrPartition
			}
			// Asked again with the client's metadata of the topic
			// forgotten.
			b.cl.PurgeTopicsFromClient(topic)
			return true, fmt.Errorf("end offset of %s/%d: %w", topic, p, e.Err)
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ensureDowngradeTopic creates the downgrade topic of (topic, version) with
// topic's partition count. errNoTopic: topic is not in Kafka.
func (b *Bridge) ensureDowngradeTopic(ctx context.Context, topic string, version int) (string, int, error) {
	name := b.DowngradeTopic(topic, version)
	b.topicsMu.Lock()
	n, ok := b.topics[name]
	b.topicsMu.Unlock()
	if ok {
		return name, n, nil
	}
	if err := validTopicName(name); err != nil {
		return "", 0, err
	}
	n, err := b.partitions(ctx, topic, kgox.UnknownTopicWait)
	if err != nil {
		return "", 0, err
	}
	if n == 0 {
		return "", 0, errNoTopic
	}
	dn, err := b.partitions(ctx, name, 0) // created when unknown
	if err != nil {
		return "", 0, err
	}
	if dn == 0 {
		resp, err := b.adm.CreateTopic(ctx, int32(n), b.cfg.replication, nil, name)
		if err == nil {
			err = resp.Err
		}
		switch {
		case err == nil:
			dn = n
		case errors.Is(err, kerr.TopicAlreadyExists):
			if dn, err = b.partitions(ctx, name, kgox.UnknownTopicWait); err != nil {
				return "", 0, err
			}
		default:
			return "", 0, fmt.Errorf("create downgrade topic %s: %w", name, err)
		}
	}
	if dn != n {
		return "", 0, fmt.Errorf("downgrade topic %s has %d partitions but %s has %d", name, dn, topic, n)
	}
	b.topicsMu.Lock()
	b.topics[name] = n
	b.topicsMu.Unlock()
	return name, n, nil
}

var errNoTopic = errors.New("topic does not exist in Kafka")

// lastBefore returns the last record of topic/partition with an offset below
// end (nil if there is none), reading backwards in growing windows so that
// gaps in offsets (transaction markers, compaction) do not matter.
func (b *Bridge) lastBefore(ctx context.Context, topic string, partition int32, end int64) (*kgo.Record, error) {
	return lastBefore(ctx, b.cfg.kopts, b.adm, topic, partition, end)
}

// lastBefore is Bridge.lastBefore for any client options.
func lastBefore(ctx context.Context, kopts []kgo.Opt, adm *kadm.Client, topic string, partition int32, end int64) (*kgo.Record, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	so, ok := starts.Lookup(topic, partition)
	if !ok || so.Err != nil {
		return nil, fmt.Errorf("start offset of %s/%d: %v", topic, partition, so.Err)
	}
	for window := int64(1); ; window *= 16 {
		from := max(so.Offset, end-window)
		if from >= end {
			return nil, nil
		}
		recs, err := readRange(ctx, kopts, topic, partition, from, end)
		if err != nil {
			return nil, err
		}
		if len(recs) > 0 {
			return recs[len(recs)-1], nil
		}
		if from == so.Offset {
			return nil, nil
		}
	}
}

// readRange reads the records of topic/partition with from <= offset < to.
// It stops at the first record at or past to-1, or after a quiet period
// (offsets near to may be markers, not records).
func readRange(ctx context.Context, kopts []kgo.Opt, topic string, partition int32, from, to int64) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), kopts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchMaxWait(100*time.Millisecond),
	)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []*kgo.Record
	quiet := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		done := false
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("read %s/%d: %w", topic, partition, e.Err)
			}
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if r.Offset >= to {
				done = true
				return
			}
			out = append(out, r)
			if r.Offset >= to-1 {
				done = true
			}
		})
		if done {
			return out, nil
		}
		if n == 0 {
			if quiet++; quiet >= 2 {
				return out, nil
			}
		}
	}
}

// committed returns group's committed offsets for topic (partition -> offset).
func (b *Bridge) committed(ctx context.Context, group, topic string) (map[int32]int64, error) {
	resp, err := b.adm.FetchOffsets(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{}, nil // never committed
	}
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		if o.Err == nil && o.At >= 0 {
			out[p] = o.At
		}
	}
	return out, nil
}
