package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kfake applies retention by itself only to topics that set retention.ms,
// retention.bytes or cleanup.policy, and then only hourly; the topics
// streamd creates set none, so the broker would keep every record forever,
// with a 72-byte index entry in memory for each batch and a read handle for
// each segment a fetch touched. The retainer applies retention to every
// topic on a short ticker, through kfake's public API and the Kafka
// protocol (no fork): Kafka's rules (a topic's own retention.ms and
// retention.bytes over the broker's; a cleanup.policy of compact alone
// keeps records), then the disk budget. Deleting records moves the log
// start offset (DeleteRecords); kfake then drops every segment wholly
// below it: its file, its read handle and its index.

// Reasons records are deleted, as the metrics and logs name them.
const (
	reasonTime   = "time"
	reasonSize   = "size"
	reasonBudget = "disk_budget"
)

// budgetTrimTo is the share of the disk budget the broker trims to once
// past it, so that it does not trim again at every check.
const budgetTrimTo = 0.95

// Log rate limits.
const (
	warnEvery = 10 * time.Minute // near the budget
	skipEvery = time.Minute      // per group and topic
	trimEvery = time.Minute      // over the budget
)

// retainer applies retention and the disk budget every cfg.RetentionCheck
// and keeps the broker's figures (Stats).
type retainer struct {
	c   *kfake.Cluster
	cfg Config
	log *slog.Logger
	cl  *kgo.Client

	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	stats   Stats
	deleted map[[2]string]int64 // {topic, reason}
	skipped map[[2]string]int64 // {topic, group}
	runs    int64
	fails   int64
	// Rate limits of the warnings, and what they have not said yet.
	nearWarned   time.Time
	near         bool
	trimLogged   time.Time
	trimPending  int64
	skipLogged   map[[2]string]time.Time
	skipPending  map[[2]string]int64
	skipPartsMsg map[[2]string]string
}

// part is one partition in one retention check.
type part struct {
	topic     string
	p         int32
	start     int64 // log start offset
	end       int64 // high watermark
	lso       int64 // last stable offset
	bytes     int64
	maxTS     int64 // max timestamp of the retained batches
	retMs     int64 // -1: forever
	retBytes  int64 // -1: no bound
	compacted bool  // cleanup.policy compact without delete

	cut    int64  // the new log start offset (start: none)
	reason string // why
}

func (p *part) setCut(o int64, reason string) {
	if o > p.cut {
		p.cut, p.reason = o, reason
	}
}

// bytesAfter estimates the bytes left once the records before cut are
// deleted, at the partition's average record size.
func (p *part) bytesAfter() int64 {
	if p.end <= p.start {
		return p.bytes
	}
	return int64(float64(p.bytes) * float64(p.end-p.cut) / float64(p.end-p.start))
}

// cutToBytes sets the cut that leaves about keep bytes, at the average
// record size.
func (p *part) cutToBytes(keep int64, reason string) {
	if p.bytes <= keep || p.end <= p.start {
		return
	}
	records := int64(float64(p.end-p.start) * float64(keep) / float64(p.bytes))
	p.setCut(p.end-records, reason)
}

func startRetainer(c *kfake.Cluster, cfg Config) (*retainer, error) {
	addrs := c.ListenAddrs()
	if len(addrs) == 0 {
		return nil, errors.New("the broker listens nowhere")
	}
	host, port, err := net.SplitHostPort(addrs[0])
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(net.JoinHostPort(host, port)), kgo.ClientID("streamd-embedded-retention"))
	if err != nil {
		return nil, err
	}
	r := &retainer{c: c, cfg: cfg, log: cfg.Logger, cl: cl, stop: make(chan struct{}), done: make(chan struct{}),
		deleted: map[[2]string]int64{}, skipped: map[[2]string]int64{},
		skipLogged: map[[2]string]time.Time{}, skipPending: map[[2]string]int64{}, skipPartsMsg: map[[2]string]string{}}
	go r.loop()
	return r, nil
}

func (r *retainer) close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
	r.cl.Close()
}

func (r *retainer) loop() {
	defer close(r.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(r.cfg.RetentionCheck)
	defer t.Stop()
	for {
		r.run(ctx, time.Now())
		select {
		case <-t.C:
		case <-r.stop:
			return
		}
	}
}

// run is one retention check, bounded by the check interval (at least
// 10 s) so that a stuck request does not stop the next ones.
func (r *retainer) run(ctx context.Context, now time.Time) {
	ctx, cancel := context.WithTimeout(ctx, max(r.cfg.RetentionCheck, 10*time.Second))
	defer cancel()
	err := r.check(ctx, now)
	r.mu.Lock()
	r.runs++
	if err != nil {
		r.fails++
		r.stats.LastError = err.Error()
	} else {
		r.stats.LastError = ""
	}
	r.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		r.log.Warn("embedded broker retention check failed", "err", err)
	}
}

// check applies retention and the disk budget once, then takes the
// broker's figures.
func (r *retainer) check(ctx context.Context, now time.Time) error {
	parts, err := r.partitions(ctx)
	if err != nil {
		return err
	}
	if err := r.cutByTime(ctx, parts, now); err != nil {
		return err
	}
	for _, p := range parts {
		if !p.compacted && p.retBytes >= 0 {
			p.cutToBytes(p.retBytes, reasonSize)
		}
	}
	d := r.disk()
	r.cutByBudget(parts, d, now)
	var cuts []*part
	for _, p := range parts {
		p.cut = min(p.cut, p.lso, p.end)
		if p.cut > p.start {
			cuts = append(cuts, p)
		}
	}
	if len(cuts) > 0 {
		if err := r.reportSkips(ctx, cuts); err != nil {
			return err
		}
		r.deleteRecords(cuts)
		if parts, err = r.partitions(ctx); err != nil {
			return err
		}
		d = r.disk()
	}
	r.flushLogs(now)
	return r.takeStats(ctx, parts, d, now)
}

// partitions lists every partition with its topic's retention.
func (r *retainer) partitions(ctx context.Context) ([]*part, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // all
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	var parts []*part
	for _, t := range resp.Topics {
		if t.Topic == nil || t.IsInternal || t.ErrorCode != 0 {
			continue
		}
		ti := r.c.TopicInfo(*t.Topic)
		if ti == nil {
			continue // deleted meanwhile
		}
		retMs, retBytes, compacted := r.topicRetention(ti.Configs)
		for _, pi := range r.c.PartitionInfos(*t.Topic) {
			parts = append(parts, &part{topic: *t.Topic, p: pi.Partition, start: pi.LogStartOffset, end: pi.HighWatermark,
				lso: pi.LastStableOffset, bytes: pi.NumBytes, maxTS: pi.MaxTimestamp,
				retMs: retMs, retBytes: retBytes, compacted: compacted, cut: pi.LogStartOffset})
		}
	}
	slices.SortFunc(parts, func(a, b *part) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.p - b.p)
	})
	return parts, nil
}

// topicRetention is a topic's retention.ms and retention.bytes (its own,
// else the broker's) and whether its cleanup.policy keeps records from
// retention (compact without delete).
func (r *retainer) topicRetention(configs map[string]*string) (retMs, retBytes int64, compacted bool) {
	retMs, retBytes = retentionMs(r.cfg.Retention), max(-1, r.cfg.RetentionBytes)
	num := func(k string, v *int64) {
		if s, ok := configs[k]; ok && s != nil {
			if n, err := strconv.ParseInt(*s, 10, 64); err == nil {
				*v = max(-1, n)
			}
		}
	}
	num("retention.ms", &retMs)
	num("retention.bytes", &retBytes)
	if s, ok := configs["cleanup.policy"]; ok && s != nil {
		compacted = strings.Contains(*s, "compact") && !strings.Contains(*s, "delete")
	}
	return retMs, retBytes, compacted
}

// cutByTime cuts each partition before its first record that is not
// older than its retention, as Kafka does: the broker's ListOffsets for
// now-retention.ms answers the first record whose timestamp, or that of
// one before it, reaches that time, so a record with an old timestamp
// never takes newer ones before it.
func (r *retainer) cutByTime(ctx context.Context, parts []*part, now time.Time) error {
	found, err := r.listOffsets(ctx, parts, func(p *part) (int64, bool) {
		if p.compacted || p.retMs < 0 || p.end <= p.start {
			return 0, false
		}
		ts := now.UnixMilli() - p.retMs
		if p.maxTS < ts {
			p.setCut(p.end, reasonTime) // every retained record is older
			return 0, false
		}
		return ts, true
	})
	if err != nil {
		return fmt.Errorf("list offsets by time: %w", err)
	}
	for _, p := range parts {
		// Not found while some record is recent enough: the broker
		// answers so when the first segment to reach the time holds
		// the record only below the log start. Nothing is cut until it
		// answers.
		if o, ok := found[tp{p.topic, p.p}]; ok {
			p.setCut(o.Offset, reasonTime)
		}
	}
	return nil
}

// listOffsets asks the broker, in one ListOffsets request, for the first
// record at or after the time at(p) of each partition p for which it
// returns true; it returns the records found.
func (r *retainer) listOffsets(ctx context.Context, parts []*part, at func(p *part) (int64, bool)) (map[tp]kmsg.ListOffsetsResponseTopicPartition, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	byTopic := map[string]int{}
	for _, p := range parts {
		ts, ok := at(p)
		if !ok {
			continue
		}
		i, ok := byTopic[p.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[p.topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p.p
		rp.CurrentLeaderEpoch = -1
		rp.Timestamp = ts
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	found := map[tp]kmsg.ListOffsetsResponseTopicPartition{}
	if len(req.Topics) == 0 {
		return found, nil
	}
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return nil, err
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if _, asked := byTopic[t.Topic]; asked && rp.ErrorCode == 0 && rp.Offset >= 0 {
				found[tp{t.Topic, rp.Partition}] = rp
			}
		}
	}
	return found, nil
}

// cutByBudget cuts the largest partitions to a common size (what they
// would keep after retention, the largest giving first) until the data
// directory would fit in budgetTrimTo of the budget, once it is past the
// budget; it warns past DiskWarnRatio.
func (r *retainer) cutByBudget(parts []*part, d diskUse, now time.Time) {
	budget := r.cfg.DiskBudget
	if budget < 0 {
		return
	}
	ratio := float64(d.bytes) / float64(budget)
	r.mu.Lock()
	wasNear := r.near
	r.near = ratio >= DiskWarnRatio
	warn := r.near && (!wasNear || now.Sub(r.nearWarned) >= warnEvery)
	if warn {
		r.nearWarned = now
	}
	r.mu.Unlock()
	if warn {
		r.log.Warn("embedded broker disk use is near its budget: past it, the largest partitions lose their oldest records",
			"used_bytes", d.bytes, "budget_bytes", budget, "used_percent", int(ratio*100), "data_dir", r.cfg.DataDir)
	}
	if d.bytes <= budget {
		return
	}
	var logical, fixed int64 // all partitions'; compacted ones' (never cut)
	var sizes []int64
	for _, p := range parts {
		logical += p.bytes
		if p.compacted {
			fixed += p.bytes
		} else {
			sizes = append(sizes, p.bytesAfter())
		}
	}
	overhead := max(0, d.bytes-logical) // index files, partly deleted segments, group and producer logs
	target := int64(float64(budget)*budgetTrimTo) - overhead - fixed
	level, ok := waterLevel(sizes, max(0, target))
	if !ok {
		return // retention alone brings it within the budget
	}
	for _, p := range parts {
		if !p.compacted {
			p.cutToBytes(level, reasonBudget)
		}
	}
}

// waterLevel is the size every partition larger than it is cut to so that
// sizes add up to total: it reports false if they already do.
func waterLevel(sizes []int64, total int64) (int64, bool) {
	sorted := slices.Clone(sizes)
	slices.Sort(sorted)
	var sum int64
	for _, s := range sorted {
		sum += s
	}
	if sum <= total {
		return 0, false
	}
	left := total
	for i, s := range sorted {
		share := left / int64(len(sorted)-i)
		if s > share {
			return share, true
		}
		left -= s
	}
	return 0, false // unreachable: sum > total
}

// reportSkips warns of, and counts, the records the cuts delete that a
// consumer group has committed offsets for but not read.
func (r *retainer) reportSkips(ctx context.Context, cuts []*part) error {
	req := kmsg.NewPtrListGroupsRequest()
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	byTopic := map[string][]*part{}
	for _, p := range cuts {
		byTopic[p.topic] = append(byTopic[p.topic], p)
	}
	type line struct {
		n     int64
		parts []string
	}
	lines := map[[2]string]*line{}
	for _, g := range resp.Groups {
		gi := r.c.GroupInfo(g.Group)
		if gi == nil {
			continue
		}
		for topic, commits := range gi.Commits {
			for _, p := range byTopic[topic] {
				c, ok := commits[p.p]
				if !ok || c.Offset < 0 || c.Offset >= p.cut {
					continue
				}
				n := p.cut - max(c.Offset, p.start)
				if n <= 0 {
					continue
				}
				k := [2]string{topic, g.Group}
				l := lines[k]
				if l == nil {
					l = &line{}
					lines[k] = l
				}
				l.n += n
				l.parts = append(l.parts, fmt.Sprintf("%d@%d..%d(%s)", p.p, max(c.Offset, p.start), p.cut, p.reason))
			}
		}
	}
	r.mu.Lock()
	for k, l := range lines {
		r.skipped[k] += l.n
		r.skipPending[k] += l.n
		r.skipPartsMsg[k] = strings.Join(l.parts, " ")
	}
	r.mu.Unlock()
	return nil
}

// flushLogs writes the warnings that waited for their rate limits: the
// records deleted unread per group and topic, and those deleted for the
// budget.
func (r *retainer) flushLogs(now time.Time) {
	type skip struct {
		k     [2]string
		n     int64
		parts string
	}
	var skips []skip
	r.mu.Lock()
	for k, n := range r.skipPending {
		if n > 0 && now.Sub(r.skipLogged[k]) >= skipEvery {
			skips = append(skips, skip{k, n, r.skipPartsMsg[k]})
			r.skipLogged[k], r.skipPending[k] = now, 0
		}
	}
	trimmed := r.trimPending
	if trimmed > 0 && now.Sub(r.trimLogged) >= trimEvery {
		r.trimLogged, r.trimPending = now, 0
	} else {
		trimmed = 0
	}
	r.mu.Unlock()
	slices.SortFunc(skips, func(a, b skip) int { return strings.Compare(a.k[0]+"\x00"+a.k[1], b.k[0]+"\x00"+b.k[1]) })
	for _, s := range skips {
		r.log.Warn("embedded broker retention deleted records a consumer group had not read",
			"topic", s.k[0], "group", s.k[1], "skipped", s.n, "last", s.parts,
			"hint", "the group reads on from the new log start; keep retention longer than the group falls behind")
	}
	if trimmed > 0 {
		r.log.Warn("embedded broker is over its disk budget: deleted the oldest records of its largest partitions",
			"deleted_records", trimmed, "budget_bytes", r.cfg.DiskBudget, "data_dir", r.cfg.DataDir,
			"hint", "raise kafka.embedded.disk_budget_bytes, or lower retention or retention_bytes")
	}
}

// deleteRecords moves each partition's log start to its cut.
func (r *retainer) deleteRecords(cuts []*part) {
	var budgetDeleted int64
	for _, p := range cuts {
		if err := r.c.DeleteRecords(p.topic, p.p, p.cut); err != nil {
			// The log start moved meanwhile (a DeleteRecords of a
			// client's) or the topic went: the next check sees.
			r.log.Debug("embedded broker retention: delete records", "topic", p.topic, "partition", p.p, "to", p.cut, "err", err)
			continue
		}
		n := p.cut - p.start
		r.mu.Lock()
		r.deleted[[2]string{p.topic, p.reason}] += n
		r.mu.Unlock()
		if p.reason == reasonBudget {
			budgetDeleted += n
		}
	}
	r.mu.Lock()
	r.trimPending += budgetDeleted
	r.mu.Unlock()
}
