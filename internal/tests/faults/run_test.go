package faults

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv/faultproxy"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// policies are the error policies every case runs, one pipeline each.
var policies = []string{"stop", "drop", "dlq"}

// maxInFlight is the pipelines' max_in_flight. The records one crash,
// rebalance or abandoned shutdown can replay are bounded by it plus what
// was acknowledged since the last commit (README, "Delivery guarantees"):
// with the default commit_interval of 1 s and the cases' input rate, that
// is dupsPerEvent, the duplicates a case may see per such event.
const (
	maxInFlight  = 5000
	dupsPerEvent = maxInFlight + rate
)

// shutdownTimeout is the pipelines' shutdown_timeout; SIGTERM during a
// fault must end the process within it (plus exitSlack for the process to
// exit once its pipelines stopped).
const (
	shutdownTimeout = 5 * time.Second
	exitSlack       = 2 * time.Second
)

// stallTimeout is the pipelines' stall_timeout: /readyz says a pipeline
// with work pending is stalled once it has acknowledged nothing for this
// long. The default (30 s) would leave only the last seconds of a fault
// sized by the client timeouts (35 s) to see it; an operator who alerts on
// readiness sets it shorter, as the suite does. The stall clock runs from
// the last answer of the source's brokers (README, "Readiness"), so a
// broker that answers nothing (frozen, partitioned, down) shows as a stall
// stall_timeout after the fault began: stallBy is how late into a fault
// /readyz may say 503, stallSlack allowing for the sampling and a loaded
// machine.
const (
	stallTimeout = 10 * time.Second
	stallSlack   = 5 * time.Second
	stallBy      = stallTimeout + stallSlack
)

// run is one case: its topics, daemons, producer and collector.
type run struct {
	t      *testing.T
	e      *kenv
	name   string
	prefix string
	in     string
	pipes  []*pipe
	prod   *producer
	col    *collector
	// noOutputs: the case lets streamd create its output topics.
	noOutputs bool
}

// pipe is one pipeline of one daemon.
type pipe struct {
	role, policy string
	name         string // pipeline name
	group        string
	out, dlq     string
	d            *daemon
}

var runSeq struct {
	sync.Mutex
	n int
}

func newRun(t *testing.T, e *kenv, inputConfigs ...string) *run {
	r := newRunAt(t, e)
	e.createTopic(r.in, inputConfigs...)
	r.col.start()
	return r
}

// newRunAt is newRun for a broker that is not up yet: the caller creates
// the input topic and starts the collector.
func newRunAt(t *testing.T, e *kenv) *run {
	runSeq.Lock()
	runSeq.n++
	n := runSeq.n
	runSeq.Unlock()
	name := strings.TrimPrefix(t.Name(), "TestFaults/")
	name = strings.NewReplacer("/", "-", " ", "_").Replace(name)
	r := &run{t: t, e: e, name: name, prefix: fmt.Sprintf("f%d%d-%s", time.Now().UnixNano()%1e6, n, name)}
	r.in = r.prefix + "-in"
	r.col = &collector{r: r, first: map[string]map[int]time.Time{r.in: {}}}
	return r
}

// daemonOpts shape one daemon's config.
type daemonOpts struct {
	instanceID bool
	// transform is a Wasm plugin for a transform stage between source and
	// sink.
	transform string
	dataDir   string
	// embedded runs the embedded broker on this address (its data under
	// data_dir) instead of connecting to the case's broker.
	embedded string
	brokers  []string
	policies []string
	// source replaces the kafka source's TOML (the keys after
	// [pipeline.source]).
	source string
}

// daemon writes a config with one pipeline per policy for role, creates
// its output topics and starts `streamd run`.
func (r *run) daemon(role string, o daemonOpts) *daemon {
	r.t.Helper()
	d, msg := r.tryDaemon(role, o)
	if d == nil {
		r.t.Fatal(msg)
	}
	return d
}

// tryDaemon is daemon for a daemon that may fail to start: nil and what
// it said.
func (r *run) tryDaemon(role string, o daemonOpts) (*daemon, string) {
	t := r.t
	t.Helper()
	if o.policies == nil {
		o.policies = policies
	}
	if o.dataDir == "" {
		o.dataDir = t.TempDir()
	}
	if o.brokers == nil {
		o.brokers = r.e.seeds
	}
	var b strings.Builder
	fmt.Fprintf(&b, "data_dir = %q\n[log]\nlevel = \"info\"\n[admin]\nlisten = \"127.0.0.1:0\"\n", o.dataDir)
	if o.embedded != "" {
		fmt.Fprintf(&b, "[kafka.embedded]\nlisten = %q\n[kafka]\npartitions = 4\n", o.embedded)
	} else {
		fmt.Fprintf(&b, "[kafka]\nbrokers = [%s]\npartitions = 4\n", quoteList(o.brokers))
	}
	var pipes []*pipe
	for _, pol := range o.policies {
		p := &pipe{role: role, policy: pol, name: "policy-" + pol,
			group: fmt.Sprintf("%s-%s-%s", r.prefix, role, pol),
			out:   fmt.Sprintf("%s-%s-%s-out", r.prefix, role, pol)}
		if pol == "dlq" {
			p.dlq = fmt.Sprintf("%s-%s-%s-dlq", r.prefix, role, pol)
		}
		fmt.Fprintf(&b, "\n[[pipeline]]\nname = %q\nmax_in_flight = %d\nshutdown_timeout = %q\nstall_timeout = %q\n", p.name, maxInFlight, shutdownTimeout, stallTimeout)
		if o.source != "" {
			fmt.Fprintf(&b, "[pipeline.source]\n%s\n", o.source)
		} else {
			fmt.Fprintf(&b, "[pipeline.source]\ntype = \"kafka\"\ntopics = [%q]\ngroup = %q\n", r.in, p.group)
			if o.instanceID {
				fmt.Fprintf(&b, "instance_id = %q\n", p.group+"-instance")
			}
		}
		if o.transform != "" {
			fmt.Fprintf(&b, "[[pipeline.transform]]\ntype = \"wasm\"\npath = %q\n", o.transform)
		}
		fmt.Fprintf(&b, "[pipeline.sink]\ntype = \"kafka\"\ntopic = %q\n[pipeline.errors]\npolicy = %q\n", p.out, pol)
		if p.dlq != "" {
			fmt.Fprintf(&b, "dlq_topic = %q\n", p.dlq)
		}
		if !r.noOutputs && o.embedded == "" {
			r.e.createTopic(p.out)
			if p.dlq != "" {
				r.e.createTopic(p.dlq)
			}
		}
		pipes = append(pipes, p)
	}
	cfg := filepath.Join(t.TempDir(), role+".toml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := startDaemon(t, role, cfg, shutdownTimeout)
	if err != nil {
		return nil, err.Error()
	}
	for _, p := range pipes {
		p.d = d
		r.col.watch(p.out, p.dlq)
	}
	r.pipes = append(r.pipes, pipes...)
	return d, ""
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func (r *run) pipesOf(d *daemon) []*pipe {
	var out []*pipe
	for _, p := range r.pipes {
		if p.d == d {
			out = append(out, p)
		}
	}
	return out
}

// ---- input

// producer writes the case's input: key k-SEQ, a valid v2 order whose
// order_id is o-SEQ, padded to ~250 bytes (or to big bytes for seqs in
// big), timestamp ts(SEQ) when ts is set.
type producer struct {
	r   *run
	cl  *kgo.Client
	ts  func(seq int) time.Time
	big map[int]int

	mu     sync.Mutex
	next   int
	acked  map[int]bool
	failed []int
	errs   []string

	cancel func() // stops start's loop
	done   chan struct{}
}

func (r *run) producer(ts func(int) time.Time, big map[int]int) *producer {
	p := &producer{r: r, ts: ts, big: big, acked: map[int]bool{}}
	p.cl = r.e.client(kgo.DefaultProduceTopic(r.in), kgo.ProducerBatchMaxBytes(8<<20),
		kgo.MaxBufferedRecords(1<<20), kgo.ProducerLinger(5*time.Millisecond))
	r.prod = p
	return p
}

func orderValue(seq, size int) []byte {
	v := fmt.Sprintf(`{"order_id":"o-%d","customer":{"id":"c-%d"},"amount_cents":%d,"currency":"EUR","note":"`, seq, seq%97, seq%10000)
	pad := max(1, size-len(v)-2)
	return append(append([]byte(v), bytes.Repeat([]byte{'x'}, pad)...), '"', '}')
}

// seqOf reads SEQ from a record's order_id (v2 or downgraded v1).
func seqOf(v []byte) (int, bool) {
	i := bytes.Index(v, []byte(`"order_id":"o-`))
	if i < 0 {
		return 0, false
	}
	rest := v[i+len(`"order_id":"o-`):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(rest[:j]))
	return n, err == nil
}

func (p *producer) produce(ctx context.Context, seq int) {
	size := 250
	if n, ok := p.big[seq]; ok {
		size = n
	}
	rec := &kgo.Record{Key: []byte("k-" + strconv.Itoa(seq)), Value: orderValue(seq, size)}
	if p.ts != nil {
		rec.Timestamp = p.ts(seq)
	}
	p.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				p.failed = append(p.failed, seq)
				if len(p.errs) < 5 {
					p.errs = append(p.errs, err.Error())
				}
			}
			return
		}
		p.acked[seq] = true
	})
}

func (p *producer) take(n int) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	seqs := append([]int(nil), p.failed...)
	p.failed = p.failed[:0]
	for i := 0; i < n; i++ {
		seqs = append(seqs, p.next)
		p.next++
	}
	return seqs
}

// backlog writes n records and waits until all are acknowledged.
func (p *producer) backlog(n int) {
	t := p.r.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, seq := range p.take(n) {
		p.produce(ctx, seq)
	}
	p.flush(ctx)
}

func (p *producer) flush(ctx context.Context) {
	t := p.r.t
	for {
		if err := p.cl.Flush(ctx); err != nil {
			p.mu.Lock()
			errs := append([]string(nil), p.errs...)
			p.mu.Unlock()
			fatalf(t, "producing the input: %v (%d records not acknowledged; first produce errors: %q)", err, p.cl.BufferedProduceRecords(), errs)
		}
		retry := p.take(0)
		if len(retry) == 0 {
			return
		}
		for _, seq := range retry {
			p.produce(ctx, seq)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// start produces rate records per second in the background until halt.
// When the broker does not take them (an outage of the test's own
// connection too) production pauses and resumes: records are retried,
// never skipped.
func (p *producer) start(rate int) {
	// The loop stops on stop; the records keep a context that is never
	// cancelled, so that none is failed while the broker may have it
	// (and then written twice).
	stop := make(chan struct{})
	p.cancel, p.done = func() { close(stop) }, make(chan struct{})
	go func() {
		defer close(p.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, seq := range p.take(rate / 10) {
				p.produce(context.Background(), seq)
			}
		}
	}()
}

// halt stops producing and waits until every record produced is in the
// input topic.
func (p *producer) halt() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	p.cancel = nil
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p.flush(ctx)
}

// count is how many records were produced.
func (p *producer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

// ---- output: a streaming collector for timing, a final read for counts

// collector follows the case's topics as they are written, noting when
// each record was first seen.
type collector struct {
	r       *run
	cl      *kgo.Client
	mu      sync.Mutex
	first   map[string]map[int]time.Time // topic -> seq -> first seen
	cancel  context.CancelFunc
	done    chan struct{}
	cleanup bool
}

// start starts following the topics.
func (c *collector) start() {
	r := c.r
	c.mu.Lock()
	var topics []string
	for tp := range c.first {
		topics = append(topics, tp)
	}
	c.mu.Unlock()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(r.e.direct...)}, r.e.opts...),
		kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.FetchMaxBytes(16<<20), kgo.MetadataMinAge(time.Second), kgo.MetadataMaxAge(2*time.Second))...)
	if err != nil {
		r.t.Fatal(err)
	}
	c.mu.Lock()
	c.cl = cl
	c.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	if !c.cleanup {
		c.cleanup = true
		r.t.Cleanup(c.stop)
	}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			c.mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) {
				m := c.first[rec.Topic]
				if m == nil {
					return
				}
				seq, ok := seqOf(rec.Value)
				if !ok {
					return
				}
				if _, seen := m[seq]; !seen {
					m[seq] = now
				}
			})
			c.mu.Unlock()
		}
	}()
}

func (c *collector) watch(topics ...string) {
	var add []string
	c.mu.Lock()
	for _, tp := range topics {
		if tp != "" && c.first[tp] == nil {
			c.first[tp] = map[int]time.Time{}
			add = append(add, tp)
		}
	}
	started := c.cl != nil
	c.mu.Unlock()
	if len(add) > 0 && started {
		c.cl.AddConsumeTopics(add...)
	}
}

func (c *collector) stop() {
	if c.cancel != nil {
		c.cancel()
		<-c.done
		c.cancel = nil
		c.cl.Close()
	}
}

// restart follows every topic again from the start with a new client,
// forgetting what it saw of the topics in gone (deleted: franz-go's
// consumer does not follow a topic deleted and created again). What it saw
// of the others keeps its first-seen time.
func (c *collector) restart(gone ...string) {
	c.stop()
	c.mu.Lock()
	for _, tp := range gone {
		c.first[tp] = map[int]time.Time{}
	}
	c.cl = nil
	c.mu.Unlock()
	c.start()
}

// seen returns how many distinct records of topic were seen.
func (c *collector) seen(topic string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.first[topic])
}

// firstSeen returns when seq was first seen in topic.
func (c *collector) firstSeen(topic string, seq int) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.first[topic][seq]
	return at, ok
}

// inputBefore returns the input records first seen at or before t.
func (c *collector) inputBefore(t time.Time) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var seqs []int
	for seq, at := range c.first[c.r.in] {
		if !at.After(t) {
			seqs = append(seqs, seq)
		}
	}
	return seqs
}

// delivered reports whether every input record seen so far reached the
// pipeline's output or DLQ (except skip).
func (c *collector) delivered(p *pipe, skip map[int]bool) (done bool, left int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, dlq := c.first[p.out], c.first[p.dlq]
	for seq := range c.first[c.r.in] {
		if skip[seq] {
			continue
		}
		if _, ok := out[seq]; ok {
			continue
		}
		if _, ok := dlq[seq]; ok {
			continue
		}
		left++
	}
	return left == 0, left
}

// waitFlowing waits until every pipeline of ps wrote output since now.
func (r *run) waitFlowing(timeout time.Duration, ps ...*pipe) {
	r.t.Helper()
	base := map[*pipe]int{}
	for _, p := range ps {
		base[p] = r.col.seen(p.out)
	}
	deadline := time.Now().Add(timeout)
	for {
		var stuck []string
		for _, p := range ps {
			if r.col.seen(p.out) <= base[p] {
				stuck = append(stuck, p.role+"/"+p.name)
			}
		}
		if len(stuck) == 0 {
			return
		}
		if time.Now().After(deadline) {
			fatalf(r.t, "no output from %v within %v before the fault", stuck, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitDelivered waits until every record produced is in the collector's
// input and every pipeline of ps delivered all of them (less skip), or
// the deadline passes; it returns the pipelines still short.
func (r *run) waitDelivered(deadline time.Time, skip map[int]bool, ps ...*pipe) (short []string) {
	want := r.prod.count()
	for {
		short = short[:0]
		if n := r.col.seen(r.in); n < want {
			short = append(short, fmt.Sprintf("input (%d of %d seen)", n, want))
		} else {
			for _, p := range ps {
				if ok, left := r.col.delivered(p, skip); !ok {
					short = append(short, fmt.Sprintf("%s/%s (%d left)", p.role, p.name, left))
				}
			}
		}
		if len(short) == 0 || time.Now().After(deadline) {
			return short
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rec is one record of a final read.
type rec struct {
	seq       int
	ok        bool // seq parsed
	partition int32
	offset    int64
	ts        time.Time
	srcPart   int32 // DLQ: streamd-source-partition, else -1
	srcOffset int64
}

// readAll reads topic from its start to its end offsets as of now.
func (r *run) readAll(topic string) []rec {
	t := r.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	starts, err := r.e.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Errorf("read %s: list start offsets: %v", topic, err)
		return nil
	}
	ends, err := r.e.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Errorf("read %s: list end offsets: %v", topic, err)
		return nil
	}
	parts := map[int32]kgo.Offset{}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		if o.Offset > s.Offset {
			parts[o.Partition] = kgo.NewOffset().At(s.Offset)
			left[o.Partition] = o.Offset
		}
	})
	if len(parts) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(r.e.direct...)}, r.e.opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}), kgo.FetchMaxBytes(32<<20))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []rec
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Errorf("read %s: %d partitions not read to their end within 2m", topic, len(left))
			return out
		}
		fs.EachError(func(_ string, p int32, err error) {
			t.Logf("read %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(kr *kgo.Record) {
			end, ok := left[kr.Partition]
			if !ok || kr.Offset >= end {
				return
			}
			x := rec{partition: kr.Partition, offset: kr.Offset, ts: kr.Timestamp, srcPart: -1}
			x.seq, x.ok = seqOf(kr.Value)
			for _, h := range kr.Headers {
				switch h.Key {
				case "streamd-source-partition":
					n, _ := strconv.Atoi(string(h.Value))
					x.srcPart = int32(n)
				case "streamd-source-offset":
					x.srcOffset, _ = strconv.ParseInt(string(h.Value), 10, 64)
				}
			}
			out = append(out, x)
			if kr.Offset+1 >= end {
				delete(left, kr.Partition)
			}
		})
	}
	return out
}

// committed returns the group's committed offsets of the input topic.
func (r *run) committed(group string) map[int32]int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := r.e.adm.FetchOffsets(ctx, group)
	out := map[int32]int64{}
	if err != nil {
		r.t.Logf("committed offsets of %s: %v", group, err)
		return out
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == r.in && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// ---- accounting

// input is the final read of the input topic.
type input struct {
	recs  []rec
	count map[int]int // seq -> copies
	at    map[[2]int64]int
}

func (r *run) readInput() *input {
	in := &input{recs: r.readAll(r.in), count: map[int]int{}, at: map[[2]int64]int{}}
	for _, x := range in.recs {
		if x.ok {
			in.count[x.seq]++
			in.at[[2]int64{int64(x.partition), x.offset}] = x.seq
		}
	}
	return in
}

// account is what a pipeline delivered of the input.
type account struct {
	in, out, dlq, missing, dups, held int
	// dlqGood counts good records dead-lettered: a verdict on a record
	// for what was not its fault.
	dlqGood int
	// badOut counts bad records found in the output.
	badOut       int
	missingSeqs  []int
	committedBad []string // partitions committed past a bad record (stop)
	outRecs      []rec
}

// account reads p's output and DLQ and accounts for every input record.
// bad are the records the policy must keep out of the output: dropped
// (drop), dead-lettered (dlq), or stopped at, with what follows held back
// uncommitted (stop).
// gone are records out of the account (taken by the fault itself).
func (r *run) account(in *input, p *pipe, bad, gone map[int]bool) account {
	a := account{in: len(in.count)}
	for seq := range gone {
		if in.count[seq] > 0 {
			a.in--
		}
	}
	outCount := map[int]int{}
	a.outRecs = r.readAll(p.out)
	for _, x := range a.outRecs {
		if x.ok {
			outCount[x.seq]++
		}
	}
	a.out = len(a.outRecs)
	dlq := map[int]bool{}
	if p.dlq != "" {
		for _, x := range r.readAll(p.dlq) {
			seq, ok := x.seq, x.ok
			if x.srcPart >= 0 {
				if s, found := in.at[[2]int64{int64(x.srcPart), x.srcOffset}]; found {
					seq, ok = s, true
				}
			}
			if ok {
				dlq[seq] = true
				a.dlq++
				if !bad[seq] {
					a.dlqGood++
				}
			}
		}
	}
	// Under stop, the first bad record stops the pipeline: it and what
	// follows are not committed (they are read again after a restart),
	// in its partition and the others.
	firstBad := map[int32]int64{}
	var committed map[int32]int64
	if p.policy == "stop" && len(bad) > 0 {
		for _, x := range in.recs {
			if x.ok && bad[x.seq] {
				if o, ok := firstBad[x.partition]; !ok || x.offset < o {
					firstBad[x.partition] = x.offset
				}
			}
		}
		committed = r.committed(p.group)
		for part, o := range firstBad {
			if c, ok := committed[part]; ok && c > o {
				a.committedBad = append(a.committedBad, fmt.Sprintf("%d: committed %d past the bad record at %d", part, c, o))
			}
		}
	}
	done := map[int]bool{}
	for _, x := range in.recs {
		if !x.ok || done[x.seq] || gone[x.seq] {
			continue
		}
		done[x.seq] = true
		delivered := outCount[x.seq] > 0
		if bad[x.seq] {
			if delivered {
				a.badOut++
			}
			if p.policy == "dlq" && !dlq[x.seq] {
				a.missing++
				a.missingSeqs = append(a.missingSeqs, x.seq)
			}
			continue
		}
		if delivered || dlq[x.seq] { // a good record in the DLQ: counted in dlqGood
			continue
		}
		if len(firstBad) > 0 {
			// stop stopped the whole pipeline: what it did not commit
			// is held back, in every partition.
			if c, ok := committed[x.partition]; !ok || x.offset >= c {
				a.held++
				continue
			}
		}
		a.missing++
		a.missingSeqs = append(a.missingSeqs, x.seq)
	}
	for seq, n := range outCount {
		if extra := n - in.count[seq]; extra > 0 {
			a.dups += extra
		}
	}
	sort.Ints(a.missingSeqs)
	return a
}

// recovery is how long after end the last input record seen before end
// reached p's output or DLQ; -1 if one never did (as far as the collector
// saw).
func (r *run) recovery(p *pipe, end time.Time, skip map[int]bool) float64 {
	worst := 0.0
	for _, seq := range r.col.inputBefore(end) {
		if skip[seq] {
			continue
		}
		at, ok := r.col.firstSeen(p.out, seq)
		if !ok {
			if at, ok = r.col.firstSeen(p.dlq, seq); !ok {
				return -1
			}
		}
		if d := at.Sub(end).Seconds(); d > worst {
			worst = d
		}
	}
	return worst
}

// fail notes a failure in res and fails the test.
func (res *result) fail(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	res.Failures = append(res.Failures, msg)
	errorf(t, "%s/%s/%s: %s", res.Case, res.Role, res.Policy, msg)
}

// fill copies an account into res and checks it: nothing missing, no good
// record dead-lettered, duplicates within bound.
func (res *result) fill(t *testing.T, a account, dupEvents int) {
	t.Helper()
	res.In, res.Out, res.DLQ, res.Missing, res.Duplicates, res.Held = a.in, a.out, a.dlq, a.missing, a.dups, a.held
	res.DupBound = dupEvents * dupsPerEvent
	if a.missing > 0 {
		res.fail(t, "%d of %d input records missing (first: %v)", a.missing, a.in, a.missingSeqs[:min(10, len(a.missingSeqs))])
	}
	if a.dlqGood > 0 {
		res.fail(t, "%d good records dead-lettered", a.dlqGood)
	}
	if a.badOut > 0 {
		res.fail(t, "%d bad records in the output", a.badOut)
	}
	if a.dups > res.DupBound {
		res.fail(t, "%d duplicates, more than %d (%d events x (max_in_flight %d + 1 s of input))", a.dups, res.DupBound, dupEvents, maxInFlight)
	}
	for _, c := range a.committedBad {
		res.fail(t, "partition %s", c)
	}
}

// setProxy puts the broker's proxy in mode m; one that cannot fails the
// case (the fault was not injected or not healed).
func (r *run) setProxy(m faultproxy.Mode) {
	if err := r.e.proxy.Set(m); err != nil {
		errorf(r.t, "proxy: %v", err)
	}
}

// failures are the failure messages of each case, said again when the case
// ends (repeatFailures), after the daemons' log tails: CI shows the end of
// a failed test's output.
var failures struct {
	sync.Mutex
	m map[*testing.T][]string
}

func noteFailure(t *testing.T, msg string) {
	failures.Lock()
	defer failures.Unlock()
	if failures.m == nil {
		failures.m = map[*testing.T][]string{}
	}
	failures.m[t] = append(failures.m[t], msg)
}

// errorf is t.Errorf, and the message is said again at the case's end.
func errorf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	noteFailure(t, msg)
	t.Error(msg)
}

// fatalf is t.Fatalf, and the message is said again at the case's end.
func fatalf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	noteFailure(t, msg)
	t.Fatal(msg)
}

// repeatFailures says t's failures again; TestFaults runs it last in each
// case.
func repeatFailures(t *testing.T) {
	failures.Lock()
	msgs := failures.m[t]
	delete(failures.m, t)
	failures.Unlock()
	if len(msgs) > 0 {
		t.Logf("%s failed (said again after the logs):\n  %s", t.Name(), strings.Join(msgs, "\n  "))
	}
}
