package fluid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Handler serves the bridge endpoints under /fluid/:
//
//	GET    /fluid/downgrade-topic?topic=T&group=G&compatible-schema-version=V  -> {"topic": "..."}
//	GET    /fluid/compatible?topic=T&observed-schema-version=O&compatible-schema-version=C -> {"compatible": bool}
//	DELETE /fluid/topics/{topic}/groups/{group}/schema-version
//	GET    /fluid/status
//
// Bad parameters get 400 and unknown topics or versions 404, with a JSON
// body {"error": "...", "parameter": "..."}.
func (b *Bridge) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /fluid/downgrade-topic", b.handleDowngradeTopic)
	mux.HandleFunc("GET /fluid/compatible", b.handleCompatible)
	mux.HandleFunc("DELETE /fluid/topics/{topic}/groups/{group}/schema-version", b.handleUpgrade)
	mux.HandleFunc("GET /fluid/status", b.handleStatus)
	return mux
}

type apiError struct {
	Error     string `json:"error"`
	Parameter string `json:"parameter,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code int, param, format string, args ...any) {
	writeJSON(w, code, apiError{Error: fmt.Sprintf(format, args...), Parameter: param})
}

// versionParam reads a required schema version parameter.
func versionParam(w http.ResponseWriter, q interface{ Get(string) string }, name string) (int, bool) {
	s := q.Get(name)
	if s == "" {
		writeErr(w, http.StatusBadRequest, name, "parameter %s is required", name)
		return 0, false
	}
	v, err := parseVersion(s)
	if err != nil {
		writeErr(w, http.StatusBadRequest, name, "parameter %s: %v", name, err)
		return 0, false
	}
	return v, true
}

func requiredParam(w http.ResponseWriter, q url.Values, name string) (string, bool) {
	s := q.Get(name)
	if s == "" {
		writeErr(w, http.StatusBadRequest, name, "parameter %s is required", name)
		return "", false
	}
	return s, true
}

// knownTopicVersion answers 404 when topic or version is not in the metadata.
func (b *Bridge) knownTopicVersion(w http.ResponseWriter, topic string, v int, param string) bool {
	if !b.meta.HasTopic(topic) {
		writeErr(w, http.StatusNotFound, "topic", "topic %q is not in the fluid metadata", topic)
		return false
	}
	if _, err := b.meta.Topic(topic, v); err != nil {
		writeErr(w, http.StatusNotFound, param, "%s: %v", param, err)
		return false
	}
	return true
}

func (b *Bridge) handleDowngradeTopic(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	topic, ok := requiredParam(w, q, "topic")
	if !ok {
		return
	}
	group, ok := requiredParam(w, q, "group")
	if !ok {
		return
	}
	v, ok := versionParam(w, q, "compatible-schema-version")
	if !ok || !b.knownTopicVersion(w, topic, v, "compatible-schema-version") {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	name, _, err := b.ensureDowngradeTopic(ctx, topic, v)
	if errors.Is(err, errNoTopic) {
		writeErr(w, http.StatusNotFound, "topic", "topic %q does not exist in Kafka", topic)
		return
	}
	if err != nil {
		writeErr(w, http.StatusBadGateway, "", "downgrade topic: %v", err)
		return
	}
	if err := b.register(ctx, topic, group, v); err != nil {
		if errors.Is(err, errGroupActive) {
			writeErr(w, http.StatusConflict, "group", "%v", err)
			return
		}
		writeErr(w, http.StatusBadGateway, "", "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"topic": name})
}

// register records that group reads topic at version v. A group moving to
// a higher version is upgraded first (fast-forwarded past what it read from
// its old downgrade topic).
func (b *Bridge) register(ctx context.Context, topic, group string, v int) error {
	b.triggerMu.Lock()
	defer b.triggerMu.Unlock()
	prev, had := 0, false
	b.state.read(func(vw *view) { prev, had = vw.groups[topic][group] })
	if had && prev == v {
		return nil
	}
	if had && prev < v {
		if _, err := b.fastForward(ctx, topic, group, prev); err != nil {
			return err
		}
	}
	return b.state.put(ctx, groupKey(topic, group), groupState{Version: v})
}

var (
	compatTrue  = []byte("{\"compatible\":true}\n")
	compatFalse = []byte("{\"compatible\":false}\n")
)

// compatParams are the parameters of /fluid/compatible, parsed without
// building a url.Values (this is the hot endpoint).
type compatParams struct{ topic, observed, compatible string }

func (p compatParams) Get(name string) string {
	switch name {
	case "topic":
		return p.topic
	case "observed-schema-version":
		return p.observed
	case "compatible-schema-version":
		return p.compatible
	}
	return ""
}

func parseCompatParams(raw string) compatParams {
	var p compatParams
	var seen [3]bool
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(kv, "=")
		if strings.ContainsAny(k, "%+") {
			if u, err := url.QueryUnescape(k); err == nil {
				k = u
			}
		}
		i := -1
		switch k {
		case "topic":
			i = 0
		case "observed-schema-version":
			i = 1
		case "compatible-schema-version":
			i = 2
		}
		if i < 0 || seen[i] {
			continue // url.Values.Get semantics: the first value wins
		}
		seen[i] = true
		if strings.ContainsAny(v, "%+") {
			u, err := url.QueryUnescape(v)
			if err != nil {
				u = "\x00bad" // not a topic or version: answered 400/404
			}
			v = u
		}
		switch i {
		case 0:
			p.topic = v
		case 1:
			p.observed = v
		case 2:
			p.compatible = v
		}
	}
	return p
}

func (b *Bridge) handleCompatible(w http.ResponseWriter, r *http.Request) {
	q := parseCompatParams(r.URL.RawQuery)
	topic := q.Get("topic")
	if topic == "" {
		writeErr(w, http.StatusBadRequest, "topic", "parameter topic is required")
		return
	}
	o, ok := versionParam(w, q, "observed-schema-version")
	if !ok {
		return
	}
	c, ok := versionParam(w, q, "compatible-schema-version")
	if !ok {
		return
	}
	if !b.knownTopicVersion(w, topic, o, "observed-schema-version") || !b.knownTopicVersion(w, topic, c, "compatible-schema-version") {
		return
	}
	compatible, err := b.meta.Compatible(topic, o, c)
	if err != nil { // cannot happen after the checks above
		writeErr(w, http.StatusNotFound, "", "%v", err)
		return
	}
	if !compatible && o > c {
		key := compatKey{topic, o, c}
		if _, done := b.compat.Load(key); !done {
			ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
			started, err := b.trigger(ctx, topic, o, c)
			cancel()
			if err != nil {
				writeErr(w, http.StatusBadGateway, "", "start republishing: %v", err)
				return
			}
			if started {
				b.compat.Store(key, true)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if compatible {
		w.Write(compatTrue)
	} else {
		w.Write(compatFalse)
	}
}

// trigger makes sure republishing of topic for version c is on, starting
// per partition at the lowest offset committed by the groups on c (so no
// group misses a record; consumers drop what they already have by the
// source-offset header). It reports false when no group is on c.
func (b *Bridge) trigger(ctx context.Context, topic string, o, c int) (bool, error) {
	b.triggerMu.Lock()
	defer b.triggerMu.Unlock()
	tv := topicVersion{topic, c}
	var groups []string
	running := false
	b.state.read(func(vw *view) {
		_, running = vw.republish[tv]
		groups = vw.groupsOn(topic, c)
	})
	if running {
		return true, nil
	}
	if len(groups) == 0 {
		return false, nil
	}
	_, n, err := b.ensureDowngradeTopic(ctx, topic, c)
	if err != nil {
		return false, err
	}
	starts, err := b.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return false, err
	}
	start := map[int32]int64{}
	for p := int32(0); p < int32(n); p++ {
		so, ok := starts.Lookup(topic, p)
		if !ok || so.Err != nil {
			return false, fmt.Errorf("start offset of %s/%d: %v", topic, p, so.Err)
		}
		start[p] = -1
		for _, g := range groups {
			com, err := b.committed(ctx, g, topic)
			if err != nil {
				return false, fmt.Errorf("offsets of group %s: %w", g, err)
			}
			at, ok := com[p]
			if !ok {
				at = so.Offset
			}
			if start[p] < 0 || at < start[p] {
				start[p] = at
			}
		}
		start[p] = max(start[p], so.Offset)
	}
	b.log.Info("fluid: incompatible version observed, republishing", "topic", topic, "observed", o, "compatible", c, "groups", groups, "start", start)
	return true, b.state.put(ctx, republishKey(tv), republishSpec{Observed: o, Start: start})
}

var errGroupActive = errors.New("group has active members; offsets can only be moved while it is empty")

func (b *Bridge) handleUpgrade(w http.ResponseWriter, r *http.Request) {
	topic, group := r.PathValue("topic"), r.PathValue("group")
	if !b.meta.HasTopic(topic) {
		writeErr(w, http.StatusNotFound, "topic", "topic %q is not in the fluid metadata", topic)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	b.triggerMu.Lock()
	defer b.triggerMu.Unlock()
	v, ok := 0, false
	b.state.read(func(vw *view) { v, ok = vw.groups[topic][group] })
	if !ok {
		writeErr(w, http.StatusNotFound, "group", "group %q has no schema version for topic %q", group, topic)
		return
	}
	ff, err := b.fastForward(ctx, topic, group, v)
	if errors.Is(err, errGroupActive) {
		writeErr(w, http.StatusConflict, "group", "group %q: %v", group, err)
		return
	}
	if err != nil {
		writeErr(w, http.StatusBadGateway, "", "fast-forward group %q: %v", group, err)
		return
	}
	if err := b.state.put(ctx, groupKey(topic, group), nil); err != nil {
		writeErr(w, http.StatusBadGateway, "", "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"topic": topic, "group": group, "schema-version": v, "offsets": ff})
}

// fastForward moves group's committed offsets on topic past the last record
// it consumed from the downgrade topic for version v, found through that
// record's source headers. It returns the offsets it set.
func (b *Bridge) fastForward(ctx context.Context, topic, group string, v int) (map[int32]int64, error) {
	dtopic := b.DowngradeTopic(topic, v)
	com, err := b.committed(ctx, group, dtopic)
	if err != nil {
		return nil, fmt.Errorf("offsets of group %s: %w", group, err)
	}
	if len(com) == 0 {
		return map[int32]int64{}, nil
	}
	dg, err := b.adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	if d, ok := dg[group]; ok && d.Err == nil && d.State != "Empty" && d.State != "Dead" && d.State != "" {
		return nil, fmt.Errorf("%w (state %s)", errGroupActive, d.State)
	}
	main, err := b.committed(ctx, group, topic)
	if err != nil {
		return nil, err
	}
	var offs kadm.Offsets
	out := map[int32]int64{}
	for p, o := range com {
		last, err := b.lastBefore(ctx, dtopic, p, o)
		if err != nil {
			return nil, err
		}
		if last == nil {
			continue
		}
		rec := fromKgo(last)
		sp, so, err := sourcePosition(&rec)
		if err != nil {
			return nil, err
		}
		if cur, ok := main[sp]; ok && cur >= so+1 {
			continue
		}
		offs.AddOffset(topic, sp, so+1, -1)
		out[sp] = so + 1
	}
	if len(out) > 0 {
		resp, err := b.adm.CommitOffsets(ctx, group, offs)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("commit offsets of group %s: %w", group, err)
		}
		b.log.Info("fluid: group upgraded, offsets fast-forwarded", "topic", topic, "group", group, "from_version", v, "offsets", out)
	}
	return out, nil
}

// Status is what GET /fluid/status reports.
type Status struct {
	Leader       bool                      `json:"leader"`
	Groups       map[string]map[string]int `json:"groups"`
	Republishing []RepublishStatus         `json:"republishing"`
}

// RepublishStatus describes one downgrade topic being filled.
type RepublishStatus struct {
	Topic          string          `json:"topic"`
	Version        int             `json:"version"`
	DowngradeTopic string          `json:"downgrade_topic"`
	Observed       int             `json:"observed"`
	Start          map[int32]int64 `json:"start"`
	Running        bool            `json:"running"`
	Records        int64           `json:"records"`
	Next           map[int32]int64 `json:"next,omitempty"`
	Error          string          `json:"error,omitempty"`
}

// Status returns the bridge's state as this instance sees it.
func (b *Bridge) Status() Status {
	st := Status{Groups: map[string]map[string]int{}}
	b.state.read(func(vw *view) {
		for t, gs := range vw.groups {
			if len(gs) == 0 {
				continue
			}
			st.Groups[t] = map[string]int{}
			for g, v := range gs {
				st.Groups[t][g] = v
			}
		}
		for tv, spec := range vw.republish {
			st.Republishing = append(st.Republishing, RepublishStatus{
				Topic: tv.topic, Version: tv.version, DowngradeTopic: b.DowngradeTopic(tv.topic, tv.version),
				Observed: spec.Observed, Start: spec.Start, Next: vw.progress[tv],
			})
		}
	})
	b.mu.Lock()
	st.Leader = b.leader
	for i := range st.Republishing {
		rs := &st.Republishing[i]
		if r, ok := b.running[topicVersion{rs.Topic, rs.Version}]; ok {
			rs.Running = true
			rs.Records = r.stat.records.Load()
			r.stat.mu.Lock()
			if r.stat.next != nil {
				rs.Next = copyMap(r.stat.next)
			}
			rs.Error = r.stat.lastErr
			r.stat.mu.Unlock()
		}
	}
	b.mu.Unlock()
	sort.Slice(st.Republishing, func(i, j int) bool {
		a, c := st.Republishing[i], st.Republishing[j]
		return a.Topic < c.Topic || a.Topic == c.Topic && a.Version < c.Version
	})
	return st
}

func (b *Bridge) handleStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, b.Status())
}
