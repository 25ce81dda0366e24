package fluid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
// of a newer, incompatible schema version. It follows the seed's procedure:
//
//  1. At start it asks the bridge for the downgrade topic of its version
//     (GET /fluid/downgrade-topic), which registers its group.
//  2. It reads the main topic and, for every newer schema version it sees,
//     asks GET /fluid/compatible (answers are cached).
//  3. At the first incompatible record it discards that record, stops
//     reading the main topic and reads the downgrade topic's matching
//     partitions instead, dropping records whose source offset it already
//     has (by the source headers), so nothing is returned twice or skipped.
//  4. On restart it does the same again.
//
// Commit stores both the downgrade-topic positions and the main-topic
// positions of the records returned, so a restarted or upgraded consumer
// resumes where this one stopped. A Consumer is not safe for concurrent use.
type Consumer struct {
	cfg    ConsumerConfig
	log    *slog.Logger
	http   *http.Client
	dtopic string

	gc  *kgo.Client // group member, main topic
	adm *kadm.Client
	dc  *kgo.Client // downgrade topic (direct partitions), after the switch

	compat   map[int]bool
	pending  []*kgo.Record
	switched bool

	mu       sync.Mutex // everything below (rebalance callbacks, Ack)
	assigned map[int32]bool
	mainNext map[int32]int64 // main topic: next offset not yet returned
	ackMain  map[int32]int64 // main topic: position after the acknowledged records
	ackD     map[int32]int64 // downgrade topic: same
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
		assigned: map[int32]bool{}, mainNext: map[int32]int64{}, ackMain: map[int32]int64{}, ackD: map[int32]int64{}}
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
	opts := append(append([]kgo.Opt(nil), cfg.KafkaOptions...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(defaultFetchMaxWait),
		kgo.OnPartitionsAssigned(c.onAssigned),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onRevoked),
	)
	gc, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("fluid consumer: %w", err)
	}
	c.gc = gc
	c.adm = kadm.NewClient(gc)
	return c, nil
}

// DowngradeTopic is the downgrade topic the bridge named at start.
func (c *Consumer) DowngradeTopic() string { return c.dtopic }

// Downgraded reports whether the consumer has switched to the downgrade
// topic.
func (c *Consumer) Downgraded() bool { return c.switched }

func (c *Consumer) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.BridgeURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("fluid bridge: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("fluid bridge: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fluid bridge: GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("fluid bridge: GET %s: bad response %q: %w", path, body, err)
	}
	return nil
}

func (c *Consumer) onAssigned(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	ps := m[c.cfg.Topic]
	c.mu.Lock()
	for _, p := range ps {
		c.assigned[p] = true
	}
	switched := c.switched
	c.mu.Unlock()
	if switched {
		if err := c.addDowngradePartitions(ctx, ps); err != nil {
			c.log.Error("fluid consumer: add downgrade partitions", "err", err)
		}
	}
}

func (c *Consumer) onRevoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	ps := m[c.cfg.Topic]
	c.mu.Lock()
	for _, p := range ps {
		delete(c.assigned, p)
		delete(c.mainNext, p)
		delete(c.ackMain, p)
		delete(c.ackD, p)
	}
	dc := c.dc
	c.mu.Unlock()
	if dc != nil {
		dc.RemoveConsumePartitions(map[string][]int32{c.dtopic: ps})
	}
}

// compatible asks the bridge (once per version) whether v can be read.
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

// Poll returns the next records (possibly none, when ctx ends first). The
// records of one partition come in order; their Topic is the main topic or
// the downgrade topic they were read from.
func (c *Consumer) Poll(ctx context.Context) ([]record.Record, error) {
	if len(c.pending) == 0 {
		cl := c.gc
		if c.switched {
			cl = c.dc
		}
		var fs kgo.Fetches
		if c.cfg.MaxPollRecords > 0 {
			fs = cl.PollRecords(ctx, c.cfg.MaxPollRecords)
		} else {
			fs = cl.PollFetches(ctx)
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		for _, e := range fs.Errors() {
			return nil, fmt.Errorf("fluid consumer: fetch %s/%d: %w", e.Topic, e.Partition, e.Err)
		}
		c.pending = fs.Records()
	}
	if c.switched {
		return c.fromDowngrade()
	}
	return c.fromMain(ctx)
}

func (c *Consumer) fromMain(ctx context.Context) ([]record.Record, error) {
	var out []record.Record
	for len(c.pending) > 0 {
		r := c.pending[0]
		rec := fromKgo(r)
		v, err := recordVersion(&rec, c.cfg.BaselineVersion)
		if err != nil {
			return out, fmt.Errorf("fluid consumer: %w", err)
		}
		ok, err := c.compatible(ctx, v)
		if err != nil {
			return out, err // the record stays pending; Poll again retries
		}
		if !ok {
			c.log.Info("fluid consumer: incompatible schema version, switching to the downgrade topic",
				"topic", c.cfg.Topic, "partition", r.Partition, "offset", r.Offset, "observed", v,
				"compatible", c.cfg.CompatibleVersion, "downgrade_topic", c.dtopic)
			if err := c.switchToDowngrade(ctx); err != nil {
				return out, err
			}
			return out, nil
		}
		c.pending = c.pending[1:]
		c.mu.Lock()
		c.mainNext[r.Partition] = r.Offset + 1
		c.mu.Unlock()
		out = append(out, rec)
	}
	return out, nil
}

// switchToDowngrade stops reading the main topic and starts reading the
// downgrade topic's partitions matching the assigned main partitions.
func (c *Consumer) switchToDowngrade(ctx context.Context) error {
	c.pending = nil
	c.gc.PauseFetchTopics(c.cfg.Topic)
	dc, err := kgo.NewClient(append(append([]kgo.Opt(nil), c.cfg.KafkaOptions...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{}),
		kgo.FetchMaxWait(defaultFetchMaxWait),
	)...)
	if err != nil {
		return fmt.Errorf("fluid consumer: %w", err)
	}
	c.mu.Lock()
	c.dc = dc
	c.switched = true
	var ps []int32
	for p := range c.assigned {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	return c.addDowngradePartitions(ctx, ps)
}

// addDowngradePartitions starts reading downgrade partitions ps from the
// group's committed downgrade offsets; the main-topic positions that drop
// duplicates start at what was returned or committed.
func (c *Consumer) addDowngradePartitions(ctx context.Context, ps []int32) error {
	if len(ps) == 0 {
		return nil
	}
	resp, err := c.adm.FetchOffsets(ctx, c.cfg.Group)
	if err == nil {
		err = resp.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		resp, err = nil, nil // never committed
	}
	if err != nil {
		return fmt.Errorf("fluid consumer: committed offsets: %w", err)
	}
	add := map[int32]kgo.Offset{}
	c.mu.Lock()
	for _, p := range ps {
		if _, ok := c.mainNext[p]; !ok {
			if o, ok := resp.Lookup(c.cfg.Topic, p); ok && o.Err == nil && o.At >= 0 {
				c.mainNext[p] = o.At
			}
		}
		off := kgo.NewOffset().AtStart()
		if o, ok := resp.Lookup(c.dtopic, p); ok && o.Err == nil && o.At >= 0 {
			off = kgo.NewOffset().At(o.At)
		}
		add[p] = off
	}
	dc := c.dc
	c.mu.Unlock()
	dc.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.dtopic: add})
	return nil
}

func (c *Consumer) fromDowngrade() ([]record.Record, error) {
	var out []record.Record
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.pending) > 0 {
		r := c.pending[0]
		if !c.assigned[r.Partition] {
			c.pending = c.pending[1:]
			continue
		}
		rec := fromKgo(r)
		sp, so, err := sourcePosition(&rec)
		if err != nil {
			return out, fmt.Errorf("fluid consumer: %w", err)
		}
		if sp != r.Partition {
			return out, fmt.Errorf("fluid consumer: %s/%d@%d came from partition %d", r.Topic, r.Partition, r.Offset, sp)
		}
		v, err := recordVersion(&rec, c.cfg.BaselineVersion)
		if err != nil {
			return out, fmt.Errorf("fluid consumer: %w", err)
		}
		if v > c.cfg.CompatibleVersion && !c.compat[v] {
			return out, fmt.Errorf("fluid consumer: downgrade topic record %s/%d@%d has version %d, newer than %d", r.Topic, r.Partition, r.Offset, v, c.cfg.CompatibleVersion)
		}
		c.pending = c.pending[1:]
		if next, ok := c.mainNext[sp]; ok && so < next {
			continue // already returned (from the main topic or before a restart)
		}
		c.mainNext[sp] = so + 1
		out = append(out, rec)
	}
	return out, nil
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
		if !c.assigned[r.Partition] {
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
	return c.assigned[r.Partition]
}

// Commit commits the positions after the acknowledged records: on the main
// topic (for downgraded records, the position after their source record)
// and on the downgrade topic.
func (c *Consumer) Commit(ctx context.Context) error {
	m := map[string]map[int32]kgo.EpochOffset{}
	c.mu.Lock()
	for p, o := range c.ackMain {
		if m[c.cfg.Topic] == nil {
			m[c.cfg.Topic] = map[int32]kgo.EpochOffset{}
		}
		m[c.cfg.Topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	for p, o := range c.ackD {
		if m[c.dtopic] == nil {
			m[c.dtopic] = map[int32]kgo.EpochOffset{}
		}
		m[c.dtopic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	c.mu.Unlock()
	var cerr error
	c.gc.CommitOffsetsSync(ctx, m, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerrErr(p.ErrorCode); e != nil && cerr == nil {
					cerr = fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, e)
				}
			}
		}
	})
	if cerr != nil {
		return fmt.Errorf("fluid consumer: commit: %w", cerr)
	}
	return nil
}

// Close leaves the group. Uncommitted positions are lost.
func (c *Consumer) Close() {
	if c.dc != nil {
		c.dc.Close()
	}
	c.gc.Close()
}
