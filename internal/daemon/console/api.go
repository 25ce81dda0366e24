package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamd/streamd/internal/daemon/dlq"
	"github.com/streamd/streamd/internal/daemon/recview"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
)

// pipelineInfo is a pipeline as /ui/api/info describes it.
type pipelineInfo struct {
	Name     string  `json:"name"`
	Source   Source  `json:"source"`
	Stages   []Stage `json:"stages"`
	Sink     Sink    `json:"sink"`
	Policy   string  `json:"policy"`
	DLQTopic string  `json:"dlq_topic,omitempty"`
	Journal  bool    `json:"journal,omitempty"`
	// Replay lists where dead letters can be replayed to.
	Replay []string `json:"replay,omitempty"`
}

func describe(p Pipeline) pipelineInfo {
	pi := pipelineInfo{Name: p.Name, Source: p.Source, Stages: p.Stages, Sink: p.Sink, Policy: p.Policy, Journal: p.Journal}
	if pi.Stages == nil {
		pi.Stages = []Stage{}
	}
	if p.DLQ != nil {
		pi.DLQTopic = p.DLQ.Topic()
		if p.ToSource != nil {
			pi.Replay = append(pi.Replay, "source")
		}
		if p.ThroughPipeline != nil {
			pi.Replay = append(pi.Replay, "pipeline")
		}
	}
	return pi
}

func (c *Console) hasObservers() bool {
	c.obsMu.Lock()
	defer c.obsMu.Unlock()
	return len(c.observers) > 0
}

func (c *Console) info(w http.ResponseWriter, _ *http.Request) {
	out := struct {
		Pipelines []pipelineInfo `json:"pipelines"`
		Journal   bool           `json:"journal"`
		Fluid     bool           `json:"fluid"`
		Broker    bool           `json:"broker"` // an embedded broker (broker.go)
		Interval  int64          `json:"interval_ms"`
		History   int64          `json:"history_ms"`
		// Tap is true when the engine reports stage calls (the tap works).
		Tap       bool      `json:"tap"`
		TapLimits TapLimits `json:"tap_limits"`
		TapsOpen  int64     `json:"taps_open"`
	}{TapLimits: c.o.tap, TapsOpen: c.openTaps.Load(), Pipelines: []pipelineInfo{}, Journal: c.o.journal != nil, Fluid: c.o.fluid != nil, Broker: c.o.broker != nil, Tap: c.hasObservers(),
		Interval: c.o.interval.Milliseconds(), History: c.o.history.Milliseconds()}
	for _, p := range c.o.pipelines() {
		out.Pipelines = append(out.Pipelines, describe(p))
	}
	writeJSON(w, http.StatusOK, out)
}

// stageView is a stage on the pipeline page.
type stageView struct {
	Stage
	Version string `json:"version,omitempty"`
	// Health is "" while the plugin is healthy.
	Health string `json:"health,omitempty"`
	// Reloads counts hot reloads; -1 for a stage that does not reload.
	Reloads int64 `json:"reloads"`
}

func viewStage(s Stage) stageView {
	v := stageView{Stage: s, Reloads: -1}
	if m, ok := s.Part.(interface{ Manifest() plugins.Manifest }); ok {
		v.Version = m.Manifest().Version
		if v.Plugin == "" {
			v.Plugin = m.Manifest().Name
		}
	}
	if h, ok := s.Part.(plugins.Healther); ok {
		if err := h.Health(); err != nil {
			v.Health = err.Error()
		}
	}
	if r, ok := s.Part.(plugins.Reloader); ok {
		v.Reloads = r.Reloads()
	}
	return v
}

// partitionView is one source partition on the pipeline page.
type partitionView struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Lag is -1 while it is unknown.
	Lag   int64  `json:"lag"`
	Owner string `json:"owner,omitempty"`
}

func (c *Console) pipelineDetail(w http.ResponseWriter, r *http.Request) {
	p, ok := c.pipelineOf(w, r)
	if !ok {
		return
	}
	out := struct {
		pipelineInfo
		Status      pipeline.Status `json:"status"`
		StageParts  []stageView     `json:"stage_parts"`
		Partitions  []partitionView `json:"partitions"`
		OwnersError string          `json:"owners_error,omitempty"`
		// Errors are the last rejections; absent when the engine does
		// not report them.
		Errors *[]Rejection `json:"errors,omitempty"`
	}{pipelineInfo: describe(p), Partitions: []partitionView{}}
	if o := c.lookupObserver(p.Name); o != nil {
		errs := o.lastErrors()
		out.Errors = &errs
	}
	if p.P != nil {
		out.Status = p.P.Status()
	} else if p.Loading != nil {
		out.Status = *p.Loading
	}
	for _, s := range p.Stages {
		out.StageParts = append(out.StageParts, viewStage(s))
	}
	var owners map[string]string
	if p.Owners != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		var err error
		owners, err = p.Owners(ctx)
		cancel()
		if err != nil {
			out.OwnersError = err.Error()
		}
	}
	for tp, lag := range out.Status.Lag {
		t, ps, _ := strings.Cut(tp, "/")
		n, _ := strconv.Atoi(ps)
		out.Partitions = append(out.Partitions, partitionView{Topic: t, Partition: int32(n), Lag: lag, Owner: owners[tp]})
	}
	slices.SortFunc(out.Partitions, func(a, b partitionView) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	b, err := json.Marshal(out)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(c.redactJSON(b), '\n'))
}

// entryView is a dead letter as the API shows it.
type entryView struct {
	dlq.Entry
	Key     recview.Data     `json:"key"`
	Value   recview.Data     `json:"value"`
	Headers []recview.Header `json:"headers"`
}

func viewEntry(e *dlq.Entry, max int) entryView {
	v := recview.Of(&e.Record, max)
	return entryView{Entry: *e, Key: v.Key, Value: v.Value, Headers: v.Headers}
}

// Limits of the dead-letter API.
const (
	listValueBytes = 256
	listDefault    = 100
	listMax        = 5000
	getValueBytes  = 1 << 20
)

// filterFromQuery reads a dlq.Filter from the query string.
func filterFromQuery(r *http.Request) (dlq.Filter, int, error) {
	q := r.URL.Query()
	f := dlq.Filter{Stage: q.Get("stage"), Error: q.Get("error"), SourceTopic: q.Get("source_topic")}
	num := func(name string, lo, hi int64) (int64, bool, error) {
		s := q.Get(name)
		if s == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < lo || n > hi {
			return 0, false, fmt.Errorf("parameter %s=%q: want a number from %d to %d", name, s, lo, hi)
		}
		return n, true, nil
	}
	if n, ok, err := num("partition", 0, 1<<31-1); err != nil {
		return f, 0, err
	} else if ok {
		f.Partitions = []int32{int32(n)}
	}
	var err error
	if f.From, _, err = num("from", 0, 1<<62); err != nil {
		return f, 0, err
	}
	if f.Until, _, err = num("until", 0, 1<<62); err != nil {
		return f, 0, err
	}
	limit, ok, err := num("limit", 1, listMax)
	if err != nil {
		return f, 0, err
	}
	if !ok {
		limit = listDefault
	}
	return f, int(limit), nil
}

// readTimeout bounds a request's reading of a dead-letter or quarantine
// topic.
const readTimeout = 50 * time.Second

// listFilter is filterFromQuery for a listing: a bad query is answered
// 400.
func listFilter(w http.ResponseWriter, r *http.Request) (dlq.Filter, int, bool) {
	f, limit, err := filterFromQuery(r)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "%v", err)
		return f, 0, false
	}
	return f, limit, true
}

func (c *Console) dlqOf(w http.ResponseWriter, r *http.Request) (Pipeline, bool) {
	p, ok := c.pipelineOf(w, r)
	if ok && p.DLQ == nil {
		writeErr(w, http.StatusNotFound, "pipeline %q has no dead-letter topic (errors.policy = %q)", p.Name, p.Policy)
		return p, false
	}
	return p, ok
}

// pipelineOf returns the pipeline named by r's path, or answers 404.
func (c *Console) pipelineOf(w http.ResponseWriter, r *http.Request) (Pipeline, bool) {
	p, ok := c.pipeline(r.PathValue("p"))
	if !ok {
		writeErr(w, http.StatusNotFound, "no pipeline %q", r.PathValue("p"))
	}
	return p, ok
}

// listEntries reads the ranges of rd that pass rf, then calls add for
// each entry of them that passes ef, up to limit; more reports that there
// was another. It gives up after readTimeout.
func listEntries(ctx context.Context, rd *dlq.Reader, rf, ef dlq.Filter, limit int, add func(*dlq.Entry)) (ranges []dlq.Range, more bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	if ranges, err = rd.Ranges(ctx, rf); err != nil {
		return nil, false, err
	}
	n := 0
	err = rd.Scan(ctx, ranges, ef, func(e *dlq.Entry) error {
		if n >= limit {
			more = true
			return dlq.ErrStop
		}
		n++
		add(e)
		return nil
	}, nil)
	return ranges, more, err
}

func (c *Console) dlqList(w http.ResponseWriter, r *http.Request) {
	p, ok := c.dlqOf(w, r)
	if !ok {
		return
	}
	f, limit, ok := listFilter(w, r)
	if !ok {
		return
	}
	out := struct {
		Topic   string      `json:"topic"`
		Ranges  []dlq.Range `json:"ranges"`
		Entries []entryView `json:"entries"`
		More    bool        `json:"more"`
	}{Topic: p.DLQ.Topic(), Entries: []entryView{}}
	var err error
	out.Ranges, out.More, err = listEntries(r.Context(), p.DLQ, f, f, limit, func(e *dlq.Entry) {
		out.Entries = append(out.Entries, viewEntry(e, listValueBytes))
	})
	if err != nil {
		writeErr(w, http.StatusBadGateway, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Console) dlqGet(w http.ResponseWriter, r *http.Request) {
	p, ok := c.dlqOf(w, r)
	if !ok {
		return
	}
	part, err1 := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	off, err2 := strconv.ParseInt(r.PathValue("offset"), 10, 64)
	if err1 != nil || err2 != nil || part < 0 || off < 0 {
		writeErr(w, http.StatusBadRequest, "want /ui/api/dlq/PIPELINE/PARTITION/OFFSET, not %s", r.URL.Path)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	e, err := p.DLQ.Get(ctx, int32(part), off)
	if err != nil {
		writeErr(w, http.StatusNotFound, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, viewEntry(&e, getValueBytes))
}

func (c *Console) journalInfo(w http.ResponseWriter, _ *http.Request) {
	j := c.o.journal
	if j == nil {
		writeErr(w, http.StatusNotFound, "no [journal] in this daemon's config")
		return
	}
	out := struct {
		Pipelines       map[string]any `json:"pipelines"`
		QuarantineTopic string         `json:"quarantine_topic,omitempty"`
	}{Pipelines: map[string]any{}}
	if j.Stats != nil {
		out.Pipelines = j.Stats()
	}
	if j.Quarantine != nil {
		out.QuarantineTopic = j.Quarantine.Topic()
	}
	writeJSON(w, http.StatusOK, out)
}

// quarantined is a record the journal replicator quarantined.
type quarantined struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Time      time.Time `json:"time"`
	recview.Record
}

func (c *Console) journalQuarantine(w http.ResponseWriter, r *http.Request) {
	j := c.o.journal
	if j == nil || j.Quarantine == nil {
		writeErr(w, http.StatusNotFound, "no [journal] quarantine_topic in this daemon's config")
		return
	}
	f, limit, ok := listFilter(w, r)
	if !ok {
		return
	}
	out := struct {
		Topic   string        `json:"topic"`
		Records []quarantined `json:"records"`
		More    bool          `json:"more"`
	}{Topic: j.Quarantine.Topic(), Records: []quarantined{}}
	// Of the filters, only the positions apply to the quarantine.
	var err error
	_, out.More, err = listEntries(r.Context(), j.Quarantine, dlq.Filter{Partitions: f.Partitions, From: f.From, Until: f.Until}, dlq.Filter{}, limit, func(e *dlq.Entry) {
		out.Records = append(out.Records, quarantined{Partition: e.Partition, Offset: e.Offset, Time: e.Time, Record: recview.Of(&e.Record, listValueBytes)})
	})
	if err != nil {
		writeErr(w, http.StatusBadGateway, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Console) fluidInfo(w http.ResponseWriter, _ *http.Request) {
	if c.o.fluid == nil {
		writeErr(w, http.StatusNotFound, "no [fluid] in this daemon's config")
		return
	}
	out := struct {
		Bridge    any               `json:"bridge"`
		Consumers map[string]Source `json:"consumers"`
	}{Bridge: c.o.fluid(), Consumers: map[string]Source{}}
	for _, p := range c.o.pipelines() {
		if p.Source.Fluid > 0 {
			out.Consumers[p.Name] = p.Source
		}
	}
	writeJSON(w, http.StatusOK, out)
}
