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

	"github.com/streamd/streamd/internal/x/kgox"
)

// Handler serves the bridge endpoints under /fluid/:
//
//	GET    /fluid/downgrade-topic?topic=T&group=G&compatible-schema-version=V  -> {"topic": "..."}
//	GET    /fluid/compatible?topic=T&observed-schema-version=O&compatible-schema-version=C -> {"compatible": bool}
//	GET    /fluid/downgrade-offset?topic=T&group=G&compatible-schema-version=V&partition=P&source-offset=F
//	DELETE /fluid/topics/{topic}/groups/{group}/schema-version
//	GET    /fluid/status
//
// Every error is a JSON body {"error": "...", "parameter": "..."}: bad
// parameters (missing, malformed or repeated; an empty path segment) 400,
// unknown topics, versions, groups or paths 404, a wrong method 405 (with
// Allow), a busy group 409, Kafka failures 502. Paths are taken as sent
// (not cleaned or redirected); a group name may contain "/" as %2F.
//
// The handler lists these routes with a method Routes() []string, as
// http.ServeMux patterns (for a server that checks every route it
// mounts).
func (b *Bridge) Handler() http.Handler { return bridgeHandler{b} }

// bridgeHandler is the bridge's HTTP handler.
type bridgeHandler struct{ b *Bridge }

func (h bridgeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.b.serveHTTP(w, r) }

// Routes lists what serveHTTP answers, as http.ServeMux patterns.
func (bridgeHandler) Routes() []string {
	return []string{"GET /fluid/downgrade-topic", "GET /fluid/compatible", "GET /fluid/downgrade-offset", "GET /fluid/status",
		"DELETE /fluid/topics/{topic}/groups/{group}/schema-version"}
}

func (b *Bridge) serveHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	get := func(h func(http.ResponseWriter, *http.Request)) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeErr(w, http.StatusMethodNotAllowed, "", "%s %s: method not allowed (use GET)", r.Method, path)
			return
		}
		h(w, r)
	}
	switch path {
	case "/fluid/downgrade-topic":
		get(b.handleDowngradeTopic)
		return
	case "/fluid/compatible":
		get(b.handleCompatible)
		return
	case "/fluid/downgrade-offset":
		get(b.handleDowngradeOffset)
		return
	case "/fluid/status":
		get(b.handleStatus)
		return
	}
	if rest, ok := strings.CutPrefix(path, "/fluid/topics/"); ok {
		seg := strings.Split(rest, "/")
		if len(seg) == 4 && seg[1] == "groups" && seg[3] == "schema-version" {
			if r.Method != http.MethodDelete {
				w.Header().Set("Allow", "DELETE")
				writeErr(w, http.StatusMethodNotAllowed, "", "%s %s: method not allowed (use DELETE)", r.Method, path)
				return
			}
			topic, err1 := url.PathUnescape(seg[0])
			group, err2 := url.PathUnescape(seg[2])
			switch {
			case err1 != nil || topic == "":
				writeErr(w, http.StatusBadRequest, "topic", "%s: the topic (path segment after /fluid/topics/) is empty or badly escaped", path)
			case err2 != nil || group == "":
				writeErr(w, http.StatusBadRequest, "group", "%s: the group (path segment after /groups/) is empty or badly escaped", path)
			default:
				b.handleUpgrade(w, r, topic, group)
			}
			return
		}
	}
	writeErr(w, http.StatusNotFound, "", "%s: no such endpoint (see docs/fluid.md)", path)
}

type apiError struct {
	Error     string `json:"error"`
	Parameter string `json:"parameter,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
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

// query parses the query of r; a parameter given twice is an error (which
// one would count is not obvious), answered 400 naming it.
func query(w http.ResponseWriter, r *http.Request, names ...string) (url.Values, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "", "query %q: %v", r.URL.RawQuery, err)
		return nil, false
	}
	for _, n := range names {
		if len(q[n]) > 1 {
			writeErr(w, http.StatusBadRequest, n, "parameter %s is given %d times; give it once", n, len(q[n]))
			return nil, false
		}
	}
	return q, true
}

// groupQuery is the query of a consumer group's request (downgrade-topic,
// downgrade-offset).
type groupQuery struct {
	url.Values
	topic, group string
	version      int // compatible-schema-version, known for topic
}

// groupQuery reads a group's request: topic, group and
// compatible-schema-version, required, a version of a topic in the
// metadata; each parameter, these and more, given at most once. It answers
// the request and reports false if not.
func (b *Bridge) groupQuery(w http.ResponseWriter, r *http.Request, more ...string) (g groupQuery, ok bool) {
	const version = "compatible-schema-version"
	if g.Values, ok = query(w, r, append([]string{"topic", "group", version}, more...)...); !ok {
		return g, false
	}
	if g.topic, ok = requiredParam(w, g, "topic"); !ok {
		return g, false
	}
	if g.group, ok = requiredParam(w, g, "group"); !ok {
		return g, false
	}
	if g.version, ok = versionParam(w, g, version); !ok {
		return g, false
	}
	return g, b.knownTopicVersion(w, g.topic, g.version, version)
}

func requiredParam(w http.ResponseWriter, q interface{ Get(string) string }, name string) (string, bool) {
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

// inKafka answers 404 when topic (in the metadata) does not exist in Kafka,
// 502 when Kafka cannot tell. Topics found are remembered.
func (b *Bridge) inKafka(w http.ResponseWriter, ctx context.Context, topic string) bool {
	if _, ok := b.mainTopics.Load(topic); ok {
		return true
	}
	n, err := b.partitions(ctx, topic, kgox.UnknownTopicWait)
	if err != nil {
		writeErr(w, http.StatusBadGateway, "", "topic %q: %v", topic, err)
		return false
	}
	if n == 0 {
		writeErr(w, http.StatusNotFound, "topic", "topic %q does not exist in Kafka", topic)
		return false
	}
	b.mainTopics.Store(topic, n)
	return true
}

func (b *Bridge) handleDowngradeTopic(w http.ResponseWriter, r *http.Request) {
	g, ok := b.groupQuery(w, r)
	if !ok {
		return
	}
	topic, group, v := g.topic, g.group, g.version
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
	prev, err := b.register(ctx, topic, group, v)
	if err != nil {
		if errors.Is(err, errGroupActive) {
			writeErr(w, http.StatusConflict, "group", "%v", err)
			return
		}
		writeErr(w, http.StatusBadGateway, "", "%v", err)
		return
	}
	resp := map[string]any{"topic": name}
	if prev != 0 && prev != v {
		resp["previous-schema-version"] = prev
	}
	writeJSON(w, http.StatusOK, resp)
}

// register records that group reads topic at version v and returns the
// version it was on before (0: none). A group moving to a higher version
// is upgraded first (fast-forwarded past what it read from its old
// downgrade topic). A group moving to a lower version (a rolled-back
// consumer) keeps its committed positions: what it processed at the higher
// version is not delivered again, and from there it reads like any group
// on v (the downgrade topic serves any position, see downgradeOffset).
func (b *Bridge) register(ctx context.Context, topic, group string, v int) (int, error) {
	b.triggerMu.Lock()
	defer b.triggerMu.Unlock()
	prev, had := 0, false
	b.state.read(func(vw *view) { prev, had = vw.groups[topic][group] })
	if had && prev == v {
		return prev, nil
	}
	if had && prev < v {
		if _, err := b.fastForward(ctx, topic, group, prev); err != nil {
			return 0, err
		}
	}
	if had && prev > v {
		b.log.Info("fluid: group moved down to an older schema version; it resumes at its committed positions",
			"topic", topic, "group", group, "from_version", prev, "to_version", v)
	}
	return prev, b.state.put(ctx, groupKey(topic, group), groupState{Version: v})
}

var (
	compatTrue  = []byte("{\"compatible\":true}\n")
	compatFalse = []byte("{\"compatible\":false}\n")
)

// compatParams are the parameters of /fluid/compatible, parsed without
// building a url.Values (this is the hot endpoint). dup names a parameter
// given more than once.
type compatParams struct{ topic, observed, compatible, dup string }

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
		if i < 0 {
			continue
		}
		if seen[i] {
			if p.dup == "" {
				p.dup = k
			}
			continue
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
	if q.dup != "" {
		writeErr(w, http.StatusBadRequest, q.dup, "parameter %s is given more than once; give it once", q.dup)
		return
	}
	topic, ok := requiredParam(w, q, "topic")
	if !ok {
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
	if _, ok := b.mainTopics.Load(topic); !ok { // a Kafka round trip only until the topic was seen once
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		ok := b.inKafka(w, ctx, topic)
		cancel()
		if !ok {
			return
		}
	}
	compatible, err := b.compatible(r.Context(), topic, o, c)
	if err != nil {
		writeErr(w, http.StatusServiceUnavailable, "", "%v", err)
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
		_, _ = w.Write(compatTrue)
	} else {
		_, _ = w.Write(compatFalse)
	}
}

// compatible answers /fluid/compatible: by the registry's compatibility
// check when both versions are versions of one registry subject (and the
// bridge has WithRegistry), else, and for a subject at level NONE, by
// Metadata.Compatible. The registry's answers are kept for the bridge's
// life, as consumers keep the bridge's; an error is the registry's (503:
// the consumer asks again).
func (b *Bridge) compatible(ctx context.Context, topic string, o, c int) (bool, error) {
	tv, err := b.meta.Topic(topic, o)
	if err != nil {
		return false, err
	}
	tc, err := b.meta.Topic(topic, c)
	if err != nil {
		return false, err
	}
	if b.cfg.registry == nil || tv.Subject == "" || tc.Subject != tv.Subject {
		// Not two versions of one subject: nothing the registry can check.
		return b.meta.Compatible(topic, o, c)
	}
	key := compatKey{topic, o, c}
	if v, ok := b.regCompat.Load(key); ok {
		return v.(bool), nil
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ok, err := b.meta.RegistryCompatible(rctx, b.cfg.registry, topic, o, c)
	if errors.Is(err, ErrNoRegistryRule) {
		b.log.Info("fluid: the registry has no compatibility rule for the subject; comparing the schemas", "topic", topic, "subject", tv.Subject, "observed", o, "compatible", c)
		ok, err = b.meta.Compatible(topic, o, c)
	}
	if err != nil {
		return false, fmt.Errorf("schema registry: %w", err)
	}
	b.regCompat.Store(key, ok)
	return ok, nil
}

// trigger makes sure republishing of topic for version c is on, starting
// per partition at the lowest offset committed by the groups on c (so no
// group misses a record; consumers drop what they already have by the
// source-offset header). It reports false when no group is on c.
func (b *Bridge) trigger(ctx context.Context, topic string, o, c int) (bool, error) {
	b.triggerMu.Lock()
	defer b.triggerMu.Unlock()
	return b.triggerLocked(ctx, topic, o, c)
}

// triggerLocked is trigger with triggerMu held. Republishing that stopped
// (no group needed it) resumes where it was: the downgrade topic keeps
// what it holds, and a group needing more gets it through
// downgradeOffset.
func (b *Bridge) triggerLocked(ctx context.Context, topic string, o, c int) (bool, error) {
	tv := topicVersion{topic, c}
	var groups []string
	spec, exists := republishSpec{}, false
	b.state.read(func(vw *view) {
		spec, exists = vw.republish[tv]
		groups = vw.groupsOn(topic, c)
	})
	if exists && !spec.Stopped {
		return true, nil
	}
	if len(groups) == 0 {
		return false, nil
	}
	if exists {
		spec.Stopped = false
		if o > c {
			spec.Observed = o
		}
		b.log.Info("fluid: incompatible version observed, republishing resumes", "topic", topic, "observed", o, "compatible", c, "groups", groups)
		return true, b.state.put(ctx, republishKey(tv), spec)
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

func (b *Bridge) handleUpgrade(w http.ResponseWriter, r *http.Request, topic, group string) {
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
		rec := kgox.Record(last)
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
	Topic          string `json:"topic"`
	Version        int    `json:"version"`
	DowngradeTopic string `json:"downgrade_topic"`
	Observed       int    `json:"observed"`
	// Start is where republishing first began, per partition (segment 0).
	Start map[int32]int64 `json:"start"`
	// Segments are the later segments per partition: republishing started
	// again at From for a group that needed a position the downgrade topic
	// did not hold (the newest is the one being written).
	Segments map[int32][]SegmentStatus `json:"segments,omitempty"`
	// Running: this instance republishes (it is the leader).
	Running bool  `json:"running"`
	Records int64 `json:"records"`
	// Resumed is where this instance's run began, per partition: after the
	// last record in the downgrade topic, or at the newest segment's start.
	Resumed map[int32]int64 `json:"resumed,omitempty"`
	// Next is the main-topic position after the last record written, per
	// partition: live on the leader; elsewhere the progress the leader last
	// recorded (at most about a second old while it runs).
	Next  map[int32]int64 `json:"next,omitempty"`
	Error string          `json:"error,omitempty"`
}

// SegmentStatus is one segment of a downgrade partition.
type SegmentStatus struct {
	ID     int64  `json:"id"`
	From   int64  `json:"from"`
	Offset int64  `json:"offset"`
	Group  string `json:"group,omitempty"`
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
			if spec.Stopped {
				continue
			}
			rs := RepublishStatus{
				Topic: tv.topic, Version: tv.version, DowngradeTopic: b.DowngradeTopic(tv.topic, tv.version),
				Observed: spec.Observed, Start: spec.Start, Next: copyMap(vw.progress[tv]),
			}
			for p, ss := range vw.segments[tv] {
				for _, sg := range ss {
					if rs.Segments == nil {
						rs.Segments = map[int32][]SegmentStatus{}
					}
					rs.Segments[p] = append(rs.Segments[p], SegmentStatus{ID: sg.ID, From: sg.From, Offset: sg.Offset, Group: sg.Group})
				}
			}
			st.Republishing = append(st.Republishing, rs)
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
			if r.stat.resumed != nil {
				rs.Resumed = copyMap(r.stat.resumed)
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
