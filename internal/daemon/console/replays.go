package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/streamd/streamd/internal/daemon/defaults"
	"github.com/streamd/streamd/internal/daemon/dlq"
)

// ReplayRequest is the body of POST /ui/api/dlq/{p}/replay.
type ReplayRequest struct {
	Filter dlq.Filter `json:"filter"`
	// To is "source" (default) or "pipeline".
	To string `json:"to"`
	// Topic, with To "source", sends every record to this topic instead
	// of its source topic.
	Topic string `json:"topic,omitempty"`
	// Batch is how many records go at once (default 500).
	Batch int `json:"batch,omitempty"`
	// MaxRecords bounds the dead letters this replay selects; 0 (and
	// anything above it) is the daemon's bound ([console]
	// replay_max_records).
	MaxRecords int64 `json:"max_records,omitempty"`
	// Force dead-letters a replayed record that is rejected again once
	// more (by default it is not: its dead letter is still there).
	Force bool `json:"force,omitempty"`
}

// ReplayJob is a replay the daemon runs, as GET /ui/api/replays/{id}
// shows it.
type ReplayJob struct {
	ID       string        `json:"id"`
	Pipeline string        `json:"pipeline"`
	Request  ReplayRequest `json:"request"`
	dlq.Progress
	// Rejected counts replayed records the pipeline rejected again
	// (To "pipeline": they went to its error policy, a new dead letter
	// with the dlq policy).
	Rejected int64 `json:"rejected"`
}

// maxReplayJobs bounds the finished jobs kept for their progress.
const maxReplayJobs = 50

// DefaultReplayMaxRecords bounds the dead letters one replay of the
// console selects (WithReplayMaxRecords).
const DefaultReplayMaxRecords = defaults.ReplayMaxRecords

// errReplayRunning is the error of a replay of a pipeline that has one
// running.
var errReplayRunning = errors.New("a replay of this pipeline is running")

type replays struct {
	maxRecords int64
	log        *slog.Logger
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup

	mu   sync.Mutex
	seq  int
	jobs []*ReplayJob
}

func newReplays(log *slog.Logger, maxRecords int64) *replays {
	ctx, cancel := context.WithCancel(context.Background())
	return &replays{log: log, ctx: ctx, cancel: cancel, maxRecords: maxRecords}
}

func (rs *replays) close() {
	rs.cancel()
	rs.wg.Wait()
}

func (rs *replays) get(id string) (ReplayJob, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, j := range rs.jobs {
		if j.ID == id {
			return *j, true
		}
	}
	return ReplayJob{}, false
}

func (rs *replays) list() []ReplayJob {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make([]ReplayJob, 0, len(rs.jobs))
	for _, j := range slices.Backward(rs.jobs) {
		out = append(out, *j)
	}
	return out
}

// start runs a replay of p's dead letters in the background; one at a
// time per pipeline (errReplayRunning, with the running one).
func (rs *replays) start(p Pipeline, req ReplayRequest) (ReplayJob, error) {
	if err := rs.ctx.Err(); err != nil {
		return ReplayJob{}, errors.New("the console is shutting down")
	}
	if req.MaxRecords <= 0 || req.MaxRecords > rs.maxRecords {
		req.MaxRecords = rs.maxRecords
	}
	// Claimed before the target is made (a replay through the pipeline
	// starts one): a placeholder job, done false, until it is replaced.
	rs.mu.Lock()
	for _, j := range rs.jobs {
		if j.Pipeline == p.Name && !j.Done {
			run := *j
			rs.mu.Unlock()
			return run, errReplayRunning
		}
	}
	rs.seq++
	job := &ReplayJob{ID: strconv.Itoa(rs.seq), Pipeline: p.Name, Request: req, Progress: dlq.Progress{Started: time.Now()}}
	rs.jobs = append(rs.jobs, job)
	if len(rs.jobs) > maxReplayJobs {
		for i, j := range rs.jobs {
			if j.Done {
				rs.jobs = slices.Delete(rs.jobs, i, i+1)
				break
			}
		}
	}
	rs.mu.Unlock()
	abandon := func(err error) (ReplayJob, error) {
		rs.mu.Lock()
		rs.jobs = slices.DeleteFunc(rs.jobs, func(j *ReplayJob) bool { return j == job })
		rs.mu.Unlock()
		return ReplayJob{}, err
	}
	var target dlq.Target
	var rejected func() int64
	var closeTarget func(context.Context) error
	switch req.To {
	case "source":
		if p.ToSource == nil {
			return abandon(errors.New("this pipeline's source is not a Kafka topic: replay with to = \"pipeline\""))
		}
		t, release, err := p.ToSource(req.Topic)
		if err != nil {
			return abandon(err)
		}
		target, closeTarget = t, func(context.Context) error { release(); return nil }
	case "pipeline":
		if req.Topic != "" {
			return abandon(errors.New("topic goes with to = \"source\""))
		}
		if p.ThroughPipeline == nil {
			return abandon(errors.New("this pipeline cannot replay through itself"))
		}
		t, err := p.ThroughPipeline(rs.ctx)
		if err != nil {
			return abandon(err)
		}
		target, rejected, closeTarget = t, t.Rejected, t.Close
	default:
		return abandon(errors.New(`to: want "source" or "pipeline", not ` + strconv.Quote(req.To)))
	}
	rs.mu.Lock()
	snap := *job
	rs.mu.Unlock()
	update := func(pr dlq.Progress) {
		rs.mu.Lock()
		job.Progress = pr
		if rejected != nil {
			job.Rejected = rejected()
		}
		rs.mu.Unlock()
	}
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		log := rs.log.With("pipeline", p.Name, "replay", job.ID, "to", req.To)
		log.Info("dead-letter replay started", "filter", req.Filter)
		pr, err := dlq.Replay(rs.ctx, p.DLQ, req.Filter, target, dlq.ReplayOptions{Batch: req.Batch, MaxRecords: req.MaxRecords, Force: req.Force, Progress: func(pr dlq.Progress) {
			pr.Done = false // only once the target is closed
			update(pr)
		}})
		// Not cancelled with the console: what the target was given is
		// written before the replay reports itself done.
		if cerr := closeTarget(context.WithoutCancel(rs.ctx)); cerr != nil && err == nil {
			err = cerr
			pr.Err = cerr.Error()
		}
		update(pr)
		if err != nil {
			log.Error("dead-letter replay stopped", "replayed", pr.Replayed, "skipped", pr.Skipped, "resume", pr.Resume, "err", err)
			return
		}
		log.Info("dead-letter replay done", "selected", pr.Matched, "replayed", pr.Replayed, "skipped", pr.Skipped, "stopped", pr.Stopped)
	}()
	return snap, nil
}

func (c *Console) dlqReplay(w http.ResponseWriter, r *http.Request) {
	p, ok := c.dlqOf(w, r)
	if !ok {
		return
	}
	var req ReplayRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, "replay request body: %v", err)
		return
	}
	if req.To == "" {
		req.To = "source"
	}
	if req.Batch < 0 || req.Batch > 10000 {
		writeErr(w, http.StatusBadRequest, "batch %d: want 1 to 10000 (0: 500)", req.Batch)
		return
	}
	if req.Filter.From < 0 || req.Filter.Until < 0 {
		writeErr(w, http.StatusBadRequest, "filter from/until: offsets are not negative")
		return
	}
	if req.MaxRecords < 0 {
		writeErr(w, http.StatusBadRequest, "max_records %d: want 1 or more (0: the daemon's bound, %d)", req.MaxRecords, c.replays.maxRecords)
		return
	}
	job, err := c.replays.start(p, req)
	if errors.Is(err, errReplayRunning) {
		writeJSON(w, http.StatusConflict, map[string]any{
			"error": fmt.Sprintf("replay %s of pipeline %s is running (started %s, %d of %d dead-letter offsets read, %d replayed): one replay of a pipeline runs at a time; "+
				"wait for it (GET /ui/api/replays/%s)", job.ID, job.Pipeline, job.Started.UTC().Format(time.RFC3339), job.Scanned, job.Total, job.Replayed, job.ID),
			"running": job})
		return
	}
	if err != nil {
		writeErr(w, http.StatusBadRequest, "%v", err)
		return
	}
	w.Header().Set("Location", "/ui/api/replays/"+job.ID)
	writeJSON(w, http.StatusAccepted, job)
}

func (c *Console) replayList(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, c.replays.list())
}

func (c *Console) replayGet(w http.ResponseWriter, r *http.Request) {
	j, ok := c.replays.get(r.PathValue("id"))
	if !ok {
		writeErr(w, http.StatusNotFound, "no replay %q (the last %d are kept)", r.PathValue("id"), maxReplayJobs)
		return
	}
	writeJSON(w, http.StatusOK, j)
}
