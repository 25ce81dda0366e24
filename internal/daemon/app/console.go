package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/daemon/console"
	"github.com/streamd/streamd/internal/daemon/dlq"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// pipeParts are what a pipeline was built of, for the console: the
// replay through a pipeline runs a second pipeline of the same stages,
// sink and error policy.
type pipeParts struct {
	cfg    *config.Pipeline
	p      *pipeline.Pipeline
	stages []pipeline.Stage
	sink   plugins.Sink
	opts   []pipeline.Option
}

// keepParts remembers what the pipeline being built (a.cur) is built of;
// its pipeline is set when it is made (units.go).
func (a *App) keepParts(pc *config.Pipeline, stages []pipeline.Stage, sink plugins.Sink, opts []pipeline.Option) {
	a.cur.parts = &pipeParts{cfg: pc, stages: stages, sink: sink, opts: opts}
}

// Console returns the console, or nil when it is off (no [admin] listen,
// or [console] enabled = false).
func (a *App) Console() *console.Console { return a.console }

// newConsole makes the console (before the pipelines: their stages
// report to it); mountConsole puts it on the admin server.
func (a *App) newConsole() {
	if a.cfg.Admin.Listen == "" || !a.cfg.Console.Enabled {
		return
	}
	cc := &a.cfg.Console
	opts := []console.Option{console.WithPipelines(a.consolePipelines), console.WithLogger(a.log.With("component", "console")),
		console.WithRedactor(a.redact), console.WithReplayMaxRecords(cc.ReplayMaxRecords),
		console.WithTapLimits(console.TapLimits{Rate: float64(cc.TapMaxRate), ValueBytes: cc.TapMaxValueBytes, Open: cc.TapMaxOpen})}
	if jc := a.cfg.Journal; jc != nil {
		j := &console.Journal{Stats: a.journalStats}
		if jc.QuarantineTopic != "" {
			// The journal's client is the default cluster's (journal.go).
			if ko, err := a.clusterOpts(""); err == nil {
				j.Quarantine = dlq.NewReader(jc.QuarantineTopic, dlq.WithClientOpts(ko...))
			}
		}
		opts = append(opts, console.WithJournal(j))
	}
	if a.cfg.Fluid != nil {
		opts = append(opts, console.WithFluid(a.fluidStatus))
	}
	if a.cfg.Kafka.Embedded != nil {
		opts = append(opts, console.WithBroker(a.brokerStats))
	}
	a.console = console.New(opts...)
}

func (a *App) mountConsole() {
	if a.console == nil {
		return
	}
	a.Admin.HandlePrefix("/ui/", a.console)
	a.Admin.Handle("/ui", a.console) // redirects to /ui/
}

// consoleObserver returns the console's observer of pipeline name with
// stages (pipeline.WithObserver: stage calls and rejections), or nil
// without a console.
func (a *App) consoleObserver(name string, stages []pipeline.Stage) *console.StageObserver {
	if a.console == nil {
		return nil
	}
	names := make([]string, len(stages))
	for i, st := range stages {
		names[i] = st.Name
	}
	return a.console.Observer(name, names)
}

func (a *App) consolePipelines() []console.Pipeline {
	// A pipeline without parts is loading its plugins, or failed to: the
	// console shows it with its status (the cause, when it failed).
	type row struct {
		parts *pipeParts
		name  string
		pc    config.Pipeline
		state unitState
		err   error
		since time.Time
		pause bool
	}
	a.mu.Lock()
	rows := make([]row, 0, len(a.units))
	for _, u := range a.units { // a reload replaces a unit, and so its entry
		if u.built && u.parts != nil && u.p != nil { // parts are written while it builds
			rows = append(rows, row{parts: u.parts})
		} else if u.p == nil {
			rows = append(rows, row{name: u.name, pc: u.pc, state: u.state, err: u.err, since: u.since, pause: u.paused})
		}
	}
	a.mu.Unlock()
	out := make([]console.Pipeline, 0, len(rows))
	for _, r := range rows {
		if r.parts != nil {
			out = append(out, a.consolePipeline(r.parts))
			continue
		}
		st := unbuiltStatus(r.name, r.pc.Delivery, r.state, r.err, r.since, r.pause)
		out = append(out, console.Pipeline{Name: r.name, Loading: &st, Policy: r.pc.Errors.Policy, Journal: r.pc.Sink.Type == "journal",
			Source: console.Source{Type: r.pc.Source.Type, Topics: r.pc.Source.Topics, Group: r.pc.Source.Group},
			Sink:   console.Sink{Type: r.pc.Sink.Type, Topic: r.pc.Sink.Topic}})
	}
	return out
}

func (a *App) consolePipeline(pp *pipeParts) console.Pipeline {
	pc := pp.cfg
	cp := console.Pipeline{
		Name: pc.Name, P: pp.p, Policy: pc.Errors.Policy, Journal: pc.Sink.Type == "journal",
		Source: console.Source{Type: pc.Source.Type, Topics: pc.Source.Topics, Group: pc.Source.Group},
		Sink:   console.Sink{Type: pc.Sink.Type, Topic: pc.Sink.Topic},
	}
	if pc.Source.Fluid != nil {
		cp.Source.Fluid = pc.Source.Fluid.CompatibleVersion
	}
	for j, st := range pp.stages {
		cp.Stages = append(cp.Stages, console.Stage{Name: st.Name, Type: pc.Transforms[j].Type, Plugin: st.Plugin, Part: st.Transformer})
	}
	if pc.Errors.Policy == "dlq" {
		if ko, err := a.clusterOpts(pc.Errors.DLQCluster); err == nil { // Build made it, or failed
			cp.DLQ = dlq.NewReader(pc.Errors.DLQTopic, dlq.WithClientOpts(ko...))
		}
		if pc.Source.Type == "kafka" {
			cluster := pc.Source.Cluster
			cp.ToSource = func(topic string) (dlq.Target, func(), error) { return a.toSource(cluster, topic) }
		}
		cp.ThroughPipeline = func(ctx context.Context) (console.ReplayTarget, error) { return a.throughPipeline(ctx, pp) }
	}
	if pc.Source.Type == "kafka" && pc.Source.Group != "" {
		group, cluster := pc.Source.Group, pc.Source.Cluster
		cp.Owners = func(ctx context.Context) (map[string]string, error) { return a.groupOwners(ctx, cluster, group) }
	}
	return cp
}

// guardReplays is the dead-letter sink of pipeline pc: sink, not writing
// again a replayed record that is rejected again (dlq.GuardReplays).
func (a *App) guardReplays(pc *config.Pipeline, sink plugins.Sink) plugins.Sink {
	ko, err := a.clusterOpts(pc.Errors.DLQCluster)
	if err != nil {
		return sink // the cluster's error is Build's
	}
	r := dlq.NewReader(pc.Errors.DLQTopic, dlq.WithClientOpts(ko...))
	return dlq.GuardReplays(sink, r, a.log.With("pipeline", pc.Name, "sink", "dlq"))
}

// toSource is a Target producing to the records' source topics, on the
// source's cluster.
func (a *App) toSource(cluster, topic string) (dlq.Target, func(), error) {
	ko, err := a.clusterOpts(cluster)
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(append(ko, kgo.RecordPartitioner(dlq.Partitioner()))...)
	if err != nil {
		return nil, nil, err
	}
	return dlq.ToTopic(cl, topic), cl.Close, nil
}

// groupOwners describes the consumer group: the member owning each
// "topic/partition".
func (a *App) groupOwners(ctx context.Context, cluster, group string) (map[string]string, error) {
	adm, err := a.adminClient(cluster)
	if err != nil {
		return nil, err
	}
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	g, ok := gs[group]
	if !ok {
		return nil, fmt.Errorf("group %s: not described", group)
	}
	if g.Err != nil {
		return nil, fmt.Errorf("group %s: %w", group, g.Err)
	}
	out := map[string]string{}
	for _, m := range g.Members {
		c, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		who := m.ClientID + " " + m.ClientHost
		if m.InstanceID != nil {
			who += " (instance " + *m.InstanceID + ")"
		}
		for _, t := range c.Topics {
			for _, p := range t.Partitions {
				out[t.Topic+"/"+strconv.Itoa(int(p))] = who
			}
		}
	}
	return out, nil
}

// adminClient is the app's own Kafka admin client of a cluster, made on
// first use.
func (a *App) adminClient(cluster string) (*kadm.Client, error) {
	ko, err := a.clusterOpts(cluster) // before a.mu: kafkaCluster takes it
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if adm, ok := a.adm[cluster]; ok {
		return adm, nil
	}
	cl, err := kgo.NewClient(ko...)
	if err != nil {
		return nil, err
	}
	if a.adm == nil {
		a.adm = map[string]*kadm.Client{}
	}
	a.adm[cluster] = kadm.NewClient(cl)
	a.closers = append(a.closers, func(context.Context) error { cl.Close(); return nil })
	return a.adm[cluster], nil
}

func (a *App) journalStats() map[string]any {
	out := map[string]any{}
	if a.journal == nil {
		return out
	}
	for _, s := range a.journal.sinks {
		if r := s.r.Load(); r != nil {
			out[s.pipeline] = r.Stats()
		} else {
			out[s.pipeline] = map[string]any{}
		}
	}
	return out
}

func (a *App) fluidStatus() any {
	a.mu.Lock()
	b := a.bridge
	a.mu.Unlock()
	if b == nil {
		return map[string]any{"error": "the bridge is not running"}
	}
	return b.Status()
}

// throughPipeline starts a pipeline of pp's stages, sink and error policy
// that reads what the returned Target is given, until ctx ends or the
// Target is closed.
func (a *App) throughPipeline(ctx context.Context, pp *pipeParts) (console.ReplayTarget, error) {
	if st := pp.p.Status().State; st == pipeline.StateStarting {
		return nil, fmt.Errorf("pipeline %s is not running yet (%s)", pp.cfg.Name, st)
	}
	src := &feedSource{in: make(chan []pipeline.Msg), batches: map[uint64]*feedBatch{}}
	opts := append(append([]pipeline.Option(nil), pp.opts...),
		pipeline.WithLogger(a.log.With("replay", pp.cfg.Name)), pipeline.WithCommitInterval(-1), // -1: commit after every batch
		pipeline.WithPaused(false)) // a replay runs while its pipeline is paused
	p := pipeline.New(pp.cfg.Name+" (replay)", src, pp.sink, opts...)
	t := &through{p: p, src: src, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		// ctx ends when the console closes (the daemon stops): the replay
		// pipeline then drains for its shutdown timeout, like any other.
		t.err = p.Run(ctx)
	}()
	return t, nil
}

// through is a console.ReplayTarget: a pipeline fed by Replay.
type through struct {
	p    *pipeline.Pipeline
	src  *feedSource
	done chan struct{}
	err  error
	once sync.Once
}

func (t *through) Replay(ctx context.Context, recs []record.Record) error {
	b := t.src.add(recs)
	select {
	case t.src.in <- b.msgs:
	case <-t.done:
		return t.ended()
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-b.acked:
		return nil
	case <-t.done:
		return t.ended()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *through) ended() error {
	if t.err != nil {
		return t.err
	}
	return errors.New("the replay pipeline stopped")
}

func (t *through) Rejected() int64 { return t.p.Status().Errors }

func (t *through) Close(ctx context.Context) error {
	t.once.Do(func() { close(t.src.in) })
	select {
	case <-t.done:
		return t.err
	case <-ctx.Done():
		return fmt.Errorf("the replay pipeline had not stopped by the deadline: %w", ctx.Err())
	}
}

// feedSource is a pipeline.Source of the batches sent on in; a closed in
// is the end.
type feedSource struct {
	in chan []pipeline.Msg

	mu      sync.Mutex
	seq     uint64
	batches map[uint64]*feedBatch
}

type feedBatch struct {
	msgs  []pipeline.Msg
	left  int
	acked chan struct{}
}

func (s *feedSource) add(recs []record.Record) *feedBatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	b := &feedBatch{msgs: make([]pipeline.Msg, len(recs)), left: len(recs), acked: make(chan struct{})}
	for i := range recs {
		b.msgs[i] = pipeline.Msg{Record: recs[i], Token: s.seq}
	}
	s.batches[s.seq] = b
	if b.left == 0 {
		close(b.acked)
	}
	return b
}

func (s *feedSource) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	select {
	case msgs, ok := <-s.in:
		if !ok {
			return nil, io.EOF
		}
		return msgs, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *feedSource) Ack(msgs []pipeline.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range msgs {
		b := s.batches[msgs[i].Token]
		if b == nil {
			continue
		}
		b.left--
		if b.left == 0 {
			close(b.acked)
			delete(s.batches, msgs[i].Token)
		}
	}
}

func (s *feedSource) Commit(context.Context) error { return nil }
func (s *feedSource) Close(context.Context) error  { return nil }

// consoleURL is where the console is, for the log.
func (a *App) consoleURL() string {
	scheme := "http"
	if a.Admin.TLS() {
		scheme = "https"
	}
	return scheme + "://" + a.AdminAddr + "/ui/"
}

// brokerStats is the embedded broker's figures for the console, nil
// before it starts.
func (a *App) brokerStats() any {
	if b := a.brokerp.Load(); b != nil {
		return b.Stats()
	}
	return nil
}
