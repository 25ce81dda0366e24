package fluid

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/x/kgox"
	"github.com/streamd/streamd/record"
)

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	// BridgeURL is the bridge's base URL, e.g. "http://127.0.0.1:9644".
	BridgeURL string
	// Topic is the main topic; Group the consumer group.
	Topic, Group string
	// CompatibleVersion is the schema version the application understands.
	CompatibleVersion int
	// BaselineVersion is the version of records without the
	// HeaderSchemaVersion header (default 1).
	BaselineVersion int
	// KafkaOptions are franz-go options for the group client (seed brokers,
	// TLS, SASL, ...). The consumer adds the group, topic and commit options.
	KafkaOptions []kgo.Opt
	// MaxPollRecords caps how many records one Poll returns (0: no cap).
	MaxPollRecords int
	// HTTPClient talks to the bridge (default: a client with a 30s timeout).
	HTTPClient *http.Client
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Consumer reads a topic through Fluid Messaging: it never returns a record
// of a newer, incompatible schema version. It follows the seed's procedure,
// per partition:
//
//  1. At start it asks the bridge for the downgrade topic of its version
//     (GET /fluid/downgrade-topic), which registers its group.
//  2. It reads each assigned partition of the main topic from the group's
//     committed position and, for every newer schema version it sees, asks
//     GET /fluid/compatible (answers are cached).
//  3. At a partition's first incompatible record it discards that record
//     and reads the same partition of the downgrade topic instead, from
//     where the bridge says that record's downgraded copy is (GET
//     /fluid/downgrade-offset). There it takes exactly the records that
//     continue the main partition from where it was (by the source headers:
//     HeaderSourceFrom <= position <= HeaderSourceOffset), drops those it
//     has, and asks the bridge to republish again if its position is
//     missing, so nothing is returned twice or skipped, whatever the
//     downgrade topic holds and whenever the group arrives.
//  4. On restart it does the same again.
//
// Commit stores both the downgrade-topic positions and the main-topic
// positions of the records returned, so a restarted or upgraded consumer
// resumes where this one stopped. A Consumer is not safe for concurrent use
// (but see Ack).
type Consumer struct {
	cfg    ConsumerConfig
	log    *slog.Logger
	http   *http.Client
	dtopic string
	kopts  []kgo.Opt // the reader's options (for reading the downgrade topic back)

	gc  *kgo.Client // group member: assignment and commits only (fetching paused)
	adm *kadm.Client
	rc  *kgo.Client // reads the assigned partitions, each from the main or the downgrade topic

	compat  map[int]bool
	pending []*kgo.Record

	mu       sync.Mutex // everything below (rebalance callbacks, Ack)
	gen      uint64
	parts    map[int32]*partState // assigned partitions
	ackMain  map[int32]int64      // main topic: position after the acknowledged records
	ackD     map[int32]int64      // downgrade topic: same
	switched bool
}

// partState is one assigned partition.
type partState struct {
	gen     uint64 // assignment it belongs to
	down    bool   // reading the downgrade topic
	next    int64  // main-topic position: the next record to return (-1: the first fetched)
	seg     int64  // downgrade: the newest segment known
	asked   int64  // downgrade: segment reported missing at next (-1: none)
	dCommit int64  // the group's committed downgrade-topic offset at assignment (-1: none)
}

// NewConsumer registers with the bridge and joins the group.
func NewConsumer(ctx context.Context, cfg ConsumerConfig) (*Consumer, error) {
	if cfg.Topic == "" || cfg.Group == "" || cfg.BridgeURL == "" {
		return nil, errors.New("fluid consumer: BridgeURL, Topic and Group are required")
	}
	if cfg.CompatibleVersion < 1 {
		return nil, fmt.Errorf("fluid consumer: CompatibleVersion %d: must be >= 1", cfg.CompatibleVersion)
	}
	if cfg.BaselineVersion == 0 {
		cfg.BaselineVersion = 1
	}
	c := &Consumer{cfg: cfg, log: cfg.Logger, http: cfg.HTTPClient, compat: map[int]bool{},
		parts: map[int32]*partState{}, ackMain: map[int32]int64{}, ackD: map[int32]int64{}}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	var resp struct {
		Topic string `json:"topic"`
	}
	q := url.Values{"topic": {cfg.Topic}, "group": {cfg.Group}, "compatible-schema-version": {strconv.Itoa(cfg.CompatibleVersion)}}
	if err := c.get(ctx, "/fluid/downgrade-topic?"+q.Encode(), &resp); err != nil {
		return nil, err
	}
	if resp.Topic == "" {
		return nil, errors.New("fluid consumer: bridge returned no downgrade topic")
	}
	c.dtopic = resp.Topic
	// Aborted records are not delivered (the bridge reads committed too, so
	// positions mean the same to both); options given win.
	c.kopts = append([]kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}, cfg.KafkaOptions...)
	rc, err := kgo.NewClient(append(append([]kgo.Opt(nil), c.kopts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(defaultFetchMaxWait),
	)...)
	if err != nil {
		return nil, fmt.Errorf("fluid consumer: %w", err)
	}
	c.rc = rc
	c.adm = kadm.NewClient(rc) // before gc: its callbacks use it
	gc, err := kgo.NewClient(append(append([]kgo.Opt(nil), cfg.KafkaOptions...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(c.onAssigned),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
	)...)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("fluid consumer: %w", err)
	}
	// The group client only holds the assignment and commits; rc reads.
	gc.PauseFetchTopics(cfg.Topic)
	c.gc = gc
	return c, nil
}

// DowngradeTopic is the downgrade topic the bridge named at start.
func (c *Consumer) DowngradeTopic() string { return c.dtopic }

// Downgraded reports whether the consumer has switched a partition to the
// downgrade topic.
func (c *Consumer) Downgraded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.switched
}

// ErrBridgeUnavailable marks a bridge that did not answer: not reached, or
// answering 502, 503 or 504 (its Kafka or its Schema Registry could not
// answer). It is transient: Poll keeps the record it was handling, and the
// next Poll asks again.
var ErrBridgeUnavailable = errors.New("fluid bridge unavailable")

func (c *Consumer) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.BridgeURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("fluid bridge: %w (%w)", err, ErrBridgeUnavailable)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("fluid bridge: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return fmt.Errorf("fluid bridge: GET %s: %s: %s (%w)", path, resp.Status, bytes.TrimSpace(body), ErrBridgeUnavailable)
	default:
		return fmt.Errorf("fluid bridge: GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("fluid bridge: GET %s: bad response %q: %w", path, body, err)
	}
	return nil
}

// onAssigned starts reading newly assigned partitions of the main topic at
// the group's committed positions.
func (c *Consumer) onAssigned(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
	ps := m[c.cfg.Topic]
	if len(ps) == 0 {
		return
	}
	var resp kadm.OffsetResponses
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		var err error
		resp, err = c.adm.FetchOffsets(ctx, c.cfg.Group)
		if err == nil {
			err = resp.Error()
		}
		if errors.Is(err, kerr.GroupIDNotFound) {
			resp, err = nil, nil // never committed
		}
		if err == nil {
			break
		}
		// Without the committed positions a partition cannot start: it
		// would re-deliver or skip. Retry until the assignment ends.
		c.log.Warn("fluid consumer: committed offsets; retrying", "group", c.cfg.Group, "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
	add := map[int32]kgo.Offset{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range ps {
		c.gen++
		st := &partState{gen: c.gen, next: -1, seg: -1, asked: -1, dCommit: -1}
		off := kgo.NewOffset().AtStart()
		if o, ok := resp.Lookup(c.cfg.Topic, p); ok && o.Err == nil && o.At >= 0 {
			st.next = o.At
			off = kgo.NewOffset().At(o.At)
		}
		if o, ok := resp.Lookup(c.dtopic, p); ok && o.Err == nil && o.At >= 0 {
			st.dCommit = o.At
		}
		c.parts[p] = st
		add[p] = off
	}
	c.rc.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.cfg.Topic: add})
}

// onRevoked stops reading partitions taken away and commits what was
// acknowledged on them (the next owner starts there; records acknowledged
// later are ignored, and Live says so).
func (c *Consumer) onRevoked(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	c.drop(ctx, cl, m[c.cfg.Topic], true)
}

// onLost stops reading partitions lost (the group session ended): they
// cannot be committed any more; the next owner replays from the last
// commit.
func (c *Consumer) onLost(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	c.drop(ctx, cl, m[c.cfg.Topic], false)
}

func (c *Consumer) drop(ctx context.Context, cl *kgo.Client, ps []int32, commitAcked bool) {
	if len(ps) == 0 {
		return
	}
	c.mu.Lock()
	var commit map[string]map[int32]kgo.EpochOffset
	if commitAcked {
		commit = c.commitMap(ps)
	}
	for _, p := range ps {
		delete(c.parts, p)
		delete(c.ackMain, p)
		delete(c.ackD, p)
	}
	c.rc.RemoveConsumePartitions(map[string][]int32{c.cfg.Topic: ps, c.dtopic: ps})
	c.mu.Unlock()
	if len(commit) > 0 && ctx.Err() == nil {
		if err := kgox.Commit(ctx, cl, commit); err != nil {
			c.log.Warn("fluid consumer: commit of revoked partitions; the next owner replays from the last commit", "err", err)
		}
	}
}

// commitMap is what Commit commits for partitions ps (all when nil); c.mu
// is held.
func (c *Consumer) commitMap(ps []int32) map[string]map[int32]kgo.EpochOffset {
	want := func(p int32) bool { return ps == nil || slices.Contains(ps, p) }
	m := map[string]map[int32]kgo.EpochOffset{}
	for p, o := range c.ackMain {
		if want(p) {
			if m[c.cfg.Topic] == nil {
				m[c.cfg.Topic] = map[int32]kgo.EpochOffset{}
			}
			m[c.cfg.Topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
		}
	}
	for p, o := range c.ackD {
		if want(p) {
			if m[c.dtopic] == nil {
				m[c.dtopic] = map[int32]kgo.EpochOffset{}
			}
			m[c.dtopic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
		}
	}
	return m
}

// compatible asks the bridge (once per version) whether v can be read.
// recordCompatible returns rec's schema version and whether the group's
// compatible version can read it.
func (c *Consumer) recordCompatible(ctx context.Context, rec *record.Record) (v int, ok bool, err error) {
	if v, err = recordVersion(rec, c.cfg.BaselineVersion); err != nil {
		return v, false, fmt.Errorf("fluid consumer: %w", err)
	}
	ok, err = c.compatible(ctx, v)
	return v, ok, err
}

func (c *Consumer) compatible(ctx context.Context, v int) (bool, error) {
	if v <= c.cfg.CompatibleVersion {
		return true, nil // same or older: nothing to downgrade
	}
	if ok, known := c.compat[v]; known {
		return ok, nil
	}
	var resp struct {
		Compatible *bool `json:"compatible"`
	}
	q := url.Values{"topic": {c.cfg.Topic}, "observed-schema-version": {strconv.Itoa(v)}, "compatible-schema-version": {strconv.Itoa(c.cfg.CompatibleVersion)}}
	if err := c.get(ctx, "/fluid/compatible?"+q.Encode(), &resp); err != nil {
		return false, err
	}
	if resp.Compatible == nil {
		return false, errors.New("fluid bridge: /fluid/compatible returned no \"compatible\"")
	}
	c.compat[v] = *resp.Compatible
	return *resp.Compatible, nil
}

// downgradeOffset asks the bridge where partition p of the downgrade topic
// holds main-topic position pos (missing: the segment found not to hold it,
// or -1).
func (c *Consumer) downgradeOffset(ctx context.Context, p int32, pos, missing int64) (DowngradeOffset, error) {
	q := url.Values{"topic": {c.cfg.Topic}, "group": {c.cfg.Group}, "compatible-schema-version": {strconv.Itoa(c.cfg.CompatibleVersion)},
		"partition": {strconv.Itoa(int(p))}, "source-offset": {strconv.FormatInt(pos, 10)}}
	if missing >= 0 {
		q.Set("missing-segment", strconv.FormatInt(missing, 10))
	}
	var ans DowngradeOffset
	if err := c.get(ctx, "/fluid/downgrade-offset?"+q.Encode(), &ans); err != nil {
		return ans, err
	}
	if ans.Topic != c.dtopic || ans.Partition != p || ans.Offset < 0 {
		return ans, fmt.Errorf("fluid bridge: /fluid/downgrade-offset answered %+v for %s/%d", ans, c.dtopic, p)
	}
	return ans, nil
}

// Poll returns the next records (possibly none, when ctx ends first: also
// while it asks the bridge where a partition goes on, which the next Poll
// asks again). The records of one partition come in order; their Topic is
// the main topic or the downgrade topic they were read from. When Poll
// returns an error, the record it could not handle is handled again by the
// next Poll (a bridge that did not answer is asked again).
func (c *Consumer) Poll(ctx context.Context) ([]record.Record, error) {
	if len(c.pending) == 0 {
		var fs kgo.Fetches
		if c.cfg.MaxPollRecords > 0 {
			fs = c.rc.PollRecords(ctx, c.cfg.MaxPollRecords)
		} else {
			fs = c.rc.PollFetches(ctx)
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		for _, e := range fs.Errors() {
			return nil, fmt.Errorf("fluid consumer: fetch %s/%d: %w", e.Topic, e.Partition, e.Err)
		}
		c.pending = fs.Records()
	}
	var out []record.Record
	for len(c.pending) > 0 {
		r := c.pending[0]
		var rec record.Record
		var keep bool
		var err error
		switch r.Topic {
		case c.cfg.Topic:
			rec, keep, err = c.fromMain(ctx, r)
		case c.dtopic:
			rec, keep, err = c.fromDowngrade(ctx, r)
		}
		if err != nil {
			if ctx.Err() != nil {
				// ctx ended first (a poll timeout): what there is, and
				// r, still pending, is handled by the next Poll.
				return out, nil
			}
			return out, err // r stays pending
		}
		c.pending = c.pending[1:]
		if keep {
			out = append(out, rec)
		}
	}
	return out, nil
}

// fromMain handles a main-topic record: returned if compatible, else its
// partition switches to the downgrade topic at it.
func (c *Consumer) fromMain(ctx context.Context, r *kgo.Record) (record.Record, bool, error) {
	c.mu.Lock()
	st := c.parts[r.Partition]
	if st == nil || st.down || r.Offset < st.next {
		c.mu.Unlock()
		return record.Record{}, false, nil // revoked, switched, or stale
	}
	gen := st.gen
	c.mu.Unlock()
	rec := kgox.Record(r)
	v, ok, err := c.recordCompatible(ctx, &rec)
	if err != nil {
		return rec, false, err
	}
	if !ok {
		return rec, false, c.switchPartition(ctx, r, v, gen)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.parts[r.Partition]; st == nil || st.gen != gen || st.down {
		return rec, false, nil
	}
	c.parts[r.Partition].next = r.Offset + 1
	return rec, true, nil
}

// switchPartition stops reading partition p of the main topic at its
// incompatible record r and reads the downgrade topic from where the
// bridge says r's copy is, or from the group's committed downgrade offset
// when that is further on and provably before it (the record before it
// came from below r).
func (c *Consumer) switchPartition(ctx context.Context, r *kgo.Record, v int, gen uint64) error {
	p, pos := r.Partition, r.Offset
	ans, err := c.downgradeOffset(ctx, p, pos, -1)
	if err != nil {
		return err
	}
	c.mu.Lock()
	st := c.parts[p]
	if st == nil || st.gen != gen {
		c.mu.Unlock()
		return nil
	}
	dCommit := st.dCommit
	c.mu.Unlock()
	start := ans.Offset
	if dCommit > start {
		last, err := lastBefore(ctx, c.kopts, c.adm, c.dtopic, p, dCommit)
		if err != nil {
			return fmt.Errorf("fluid consumer: read %s/%d before %d: %w", c.dtopic, p, dCommit, err)
		}
		if last != nil {
			lr := kgox.Record(last)
			if sp, _, so, _, err := sourceRange(&lr); err == nil && sp == p && so < pos {
				start = dCommit
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.parts[p]; st == nil || st.gen != gen || st.down {
		return nil
	}
	st.down, st.next, st.seg, st.asked = true, pos, ans.Segment, -1
	c.switched = true
	c.rc.RemoveConsumePartitions(map[string][]int32{c.cfg.Topic: {p}})
	c.rc.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.dtopic: {p: kgo.NewOffset().At(start)}})
	c.log.Info("fluid consumer: incompatible schema version, partition switches to the downgrade topic",
		"topic", c.cfg.Topic, "partition", p, "offset", pos, "observed", v, "compatible", c.cfg.CompatibleVersion,
		"downgrade_topic", c.dtopic, "from_offset", start, "segment", ans.Segment)
	return nil
}

// fromDowngrade handles a downgrade-topic record: returned when it covers
// the partition's position, dropped when it is behind it; when it is ahead
// (the record for the position is not where it should be) the bridge is
// told, and republishes the partition again from the position.
func (c *Consumer) fromDowngrade(ctx context.Context, r *kgo.Record) (record.Record, bool, error) {
	rec := kgox.Record(r)
	c.mu.Lock()
	st := c.parts[r.Partition]
	if st == nil || !st.down {
		c.mu.Unlock()
		return rec, false, nil
	}
	sp, from, so, seg, err := sourceRange(&rec)
	if err == nil && sp != r.Partition {
		err = fmt.Errorf("%s/%d@%d came from partition %d", r.Topic, r.Partition, r.Offset, sp)
	}
	if err != nil {
		c.mu.Unlock()
		return rec, false, fmt.Errorf("fluid consumer: %w", err)
	}
	st.seg = max(st.seg, seg)
	gen, pos := st.gen, st.next
	switch {
	case so < pos: // already returned (here, from the main topic, or before a restart)
		c.mu.Unlock()
		return rec, false, nil
	case from > pos: // ahead of the position
		if seg < st.seg || st.asked == seg {
			c.mu.Unlock()
			return rec, false, nil // an older segment's record, or already reported
		}
		c.mu.Unlock()
		ans, err := c.downgradeOffset(ctx, r.Partition, pos, seg)
		if err != nil {
			return rec, false, err
		}
		c.log.Warn("fluid consumer: the downgrade topic skips this partition's position; the bridge republishes from there",
			"downgrade_topic", c.dtopic, "partition", r.Partition, "position", pos, "found_source_offset", so,
			"found_from", from, "segment", seg, "new_segment", ans.Segment)
		c.mu.Lock()
		if st := c.parts[r.Partition]; st != nil && st.gen == gen && st.next == pos {
			st.asked = seg
			st.seg = max(st.seg, ans.Segment)
		}
		c.mu.Unlock()
		return rec, false, nil
	}
	c.mu.Unlock()
	// from <= pos <= so: the next record of the partition.
	v, ok, err := c.recordCompatible(ctx, &rec)
	if err != nil {
		return rec, false, err
	}
	if !ok {
		return rec, false, fmt.Errorf("fluid consumer: downgrade topic record %s/%d@%d has version %d, not compatible with %d", r.Topic, r.Partition, r.Offset, v, c.cfg.CompatibleVersion)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.parts[r.Partition]; st == nil || st.gen != gen || st.next != pos {
		return rec, false, nil
	}
	st.next = so + 1
	return rec, true, nil
}

// Ack marks records returned by Poll as processed; Commit makes that
// durable. Ack may be called from another goroutine than Poll; records of
// one partition must be acknowledged in order. Records of partitions no
// longer assigned are ignored.
func (c *Consumer) Ack(rs []record.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range rs {
		r := &rs[i]
		if c.parts[r.Partition] == nil {
			continue
		}
		if r.Topic == c.dtopic {
			c.ackD[r.Partition] = r.Offset + 1
			if sp, so, err := sourcePosition(r); err == nil && so+1 > c.ackMain[sp] {
				c.ackMain[sp] = so + 1
			}
			continue
		}
		c.ackMain[r.Partition] = r.Offset + 1
	}
}

// Live reports whether r's partition is still assigned to this member.
func (c *Consumer) Live(r *record.Record) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parts[r.Partition] != nil
}

// Commit commits the positions after the acknowledged records: on the main
// topic (for downgraded records, the position after their source record)
// and on the downgrade topic.
func (c *Consumer) Commit(ctx context.Context) error {
	c.mu.Lock()
	m := c.commitMap(nil)
	c.mu.Unlock()
	if err := kgox.Commit(ctx, c.gc, m); err != nil {
		return fmt.Errorf("fluid consumer: %w", err)
	}
	return nil
}

// Close leaves the group and closes the clients, returning when ctx is
// done at the latest: a leave still waiting on the broker then fails, and
// clients still closing are left to finish in the background. Call Commit
// first: what was not committed is delivered again to the group's next
// member.
func (c *Consumer) Close(ctx context.Context) error {
	var errs []error
	if err := c.gc.LeaveGroupContext(ctx); err != nil {
		errs = append(errs, fmt.Errorf("fluid consumer: leaving the group: %w", err))
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		c.gc.Close()
		c.rc.Close()
	}()
	select {
	case <-closed:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("fluid consumer: the Kafka clients were not closed by the deadline; left closing: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}
