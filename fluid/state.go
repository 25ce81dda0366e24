package fluid

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The bridge's state is a compacted topic with one partition. Keys:
//
//	g/<topic>/<group>        {"version":V}                   group is on version V (tombstone: upgraded)
//	r/<topic>/<V>            {"observed":O,"start":{p:off}}  republishing for version V (stopped: true
//	                                                          while no group needs it; never deleted, so
//	                                                          where segment 0 began is kept)
//	s/<topic>/<V>/<p>/<id>   {"from":F,"offset":D}           segment id of partition p: republishing
//	                                                          restarted at main-topic position F for a
//	                                                          group that needed it; its records follow
//	                                                          downgrade offset D
//	p/<topic>/<V>            {"next":{p:off}}                republishing progress (informational)
//
// Topic names cannot contain "/", so the group (last) may.

type topicVersion struct {
	topic   string
	version int
}

type republishSpec struct {
	Observed int             `json:"observed"`
	Start    map[int32]int64 `json:"start"`
	// Stopped: no group needs the downgrade topic; the entry is kept so
	// that republishing resumes where it was if one does again.
	Stopped bool `json:"stopped,omitempty"`
}

// segment is one run of republishing on a partition of a downgrade topic:
// every main-topic record from position From on, in order, each record
// carrying HeaderSegment = ID. Segment 0 starts at the republishSpec's
// Start; a later one (a larger ID) is started for a reader that needs a
// main-topic position the downgrade topic does not hold (never did, or no
// longer does), and replaces the one being written. Its records are
// written after downgrade-topic offset Offset.
type segment struct {
	ID     int64  `json:"-"`
	From   int64  `json:"from"`
	Offset int64  `json:"offset"`
	Group  string `json:"group,omitempty"` // who needed it (for the log and status)
}

type groupState struct {
	Version int `json:"version"`
}

type progressState struct {
	Next map[int32]int64 `json:"next"`
}

// view is the bridge state as read from the state topic.
type view struct {
	groups    map[string]map[string]int // topic -> group -> version
	republish map[topicVersion]republishSpec
	segments  map[topicVersion]map[int32][]segment // sorted by ID
	progress  map[topicVersion]map[int32]int64
}

func newView() *view {
	return &view{groups: map[string]map[string]int{}, republish: map[topicVersion]republishSpec{},
		segments: map[topicVersion]map[int32][]segment{}, progress: map[topicVersion]map[int32]int64{}}
}

func segmentKey(tv topicVersion, p int32, id int64) string {
	return "s/" + tv.topic + "/" + strconv.Itoa(tv.version) + "/" + strconv.Itoa(int(p)) + "/" + strconv.FormatInt(id, 10)
}

// newest returns the segment being written on partition p of tv's
// downgrade topic: the one with the largest ID, or segment 0 (from the
// republishing start).
func (v *view) newest(tv topicVersion, p int32) segment {
	if ss := v.segments[tv][p]; len(ss) > 0 {
		return ss[len(ss)-1]
	}
	return segment{ID: 0, From: v.republish[tv].Start[p]}
}

// segmentsFingerprint identifies the newest segment of every partition of
// tv (a running republisher restarts when it changes).
func (v *view) segmentsFingerprint(tv topicVersion) string {
	var ps []int
	for p := range v.segments[tv] {
		ps = append(ps, int(p))
	}
	sort.Ints(ps)
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%d:%d ", p, v.newest(tv, int32(p)).ID)
	}
	return b.String()
}

func groupKey(topic, group string) string { return "g/" + topic + "/" + group }
func republishKey(tv topicVersion) string { return "r/" + tv.topic + "/" + strconv.Itoa(tv.version) }
func progressKey(tv topicVersion) string  { return "p/" + tv.topic + "/" + strconv.Itoa(tv.version) }
func parseTV(topic, v string) (topicVersion, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return topicVersion{}, err
	}
	return topicVersion{topic, n}, nil
}

// apply applies one state record (value nil: tombstone).
func (v *view) apply(key string, value []byte) error {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) != 3 {
		return fmt.Errorf("bad state key %q", key)
	}
	switch parts[0] {
	case "g":
		if value == nil {
			delete(v.groups[parts[1]], parts[2])
			return nil
		}
		var g groupState
		if err := json.Unmarshal(value, &g); err != nil {
			return fmt.Errorf("state key %q: %w", key, err)
		}
		if v.groups[parts[1]] == nil {
			v.groups[parts[1]] = map[string]int{}
		}
		v.groups[parts[1]][parts[2]] = g.Version
	case "r", "p":
		tv, err := parseTV(parts[1], parts[2])
		if err != nil {
			return fmt.Errorf("bad state key %q: %w", key, err)
		}
		if parts[0] == "r" {
			return applyEntry(v.republish, tv, key, value, func(r republishSpec) republishSpec { return r })
		}
		return applyEntry(v.progress, tv, key, value, func(p progressState) map[int32]int64 { return p.Next })
	case "s":
		rest := strings.Split(parts[2], "/")
		if len(rest) != 3 {
			return fmt.Errorf("bad state key %q", key)
		}
		tv, err := parseTV(parts[1], rest[0])
		if err != nil {
			return fmt.Errorf("bad state key %q: %w", key, err)
		}
		p, err1 := strconv.ParseInt(rest[1], 10, 32)
		id, err2 := strconv.ParseInt(rest[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 || id < 0 {
			return fmt.Errorf("bad state key %q", key)
		}
		ss := v.segments[tv][int32(p)]
		i := sort.Search(len(ss), func(i int) bool { return ss[i].ID >= id })
		if value == nil {
			if i < len(ss) && ss[i].ID == id {
				v.segments[tv][int32(p)] = append(ss[:i:i], ss[i+1:]...)
			}
			return nil
		}
		var sg segment
		if err := json.Unmarshal(value, &sg); err != nil {
			return fmt.Errorf("state key %q: %w", key, err)
		}
		sg.ID = id
		if v.segments[tv] == nil {
			v.segments[tv] = map[int32][]segment{}
		}
		if i < len(ss) && ss[i].ID == id {
			ss[i] = sg
		} else {
			ss = append(ss[:i:i], append([]segment{sg}, ss[i:]...)...)
		}
		v.segments[tv][int32(p)] = ss
	default:
		return fmt.Errorf("bad state key %q", key)
	}
	return nil
}

// applyEntry applies the state record key to entry tv of m: a tombstone
// (value nil) deletes it, else value decoded as a J is stored as val(j).
func applyEntry[J, V any](m map[topicVersion]V, tv topicVersion, key string, value []byte, val func(J) V) error {
	if value == nil {
		delete(m, tv)
		return nil
	}
	var j J
	if err := json.Unmarshal(value, &j); err != nil {
		return fmt.Errorf("state key %q: %w", key, err)
	}
	m[tv] = val(j)
	return nil
}

// groupsOn returns the groups of topic on version.
func (v *view) groupsOn(topic string, version int) []string {
	var out []string
	for g, gv := range v.groups[topic] {
		if gv == version {
			out = append(out, g)
		}
	}
	return out
}

// stateStore reads the state topic into a view and writes to it.
type stateStore struct {
	cl       *kgo.Client // shared producer
	topic    string
	log      *slog.Logger
	onChange func()

	mu sync.RWMutex
	v  *view
}

// ensureStateTopic creates the compacted state topic if it does not exist.
func ensureStateTopic(ctx context.Context, adm *kadm.Client, topic string, replication int16) error {
	cfg := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	resp, err := adm.CreateTopic(ctx, 1, replication, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("fluid: create state topic %s: %w", topic, err)
	}
	return nil
}

// run tails the state topic until ctx ends; loaded is closed once every
// record present at start has been applied.
func (s *stateStore) run(ctx context.Context, seeds []kgo.Opt, end int64, loaded chan<- struct{}) error {
	if end <= 0 {
		close(loaded)
		loaded = nil
	}
	opts := append(append([]kgo.Opt(nil), seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(defaultFetchMaxWait),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, e := range fs.Errors() {
			s.log.Warn("fluid: reading state topic", "topic", e.Topic, "err", e.Err)
		}
		var last int64 = -1
		changed := false
		s.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			if err := s.v.apply(string(r.Key), r.Value); err != nil {
				s.log.Warn("fluid: skipping bad state record", "offset", r.Offset, "err", err)
			}
			last = r.Offset
			changed = true
		})
		s.mu.Unlock()
		if changed && s.onChange != nil {
			s.onChange()
		}
		if loaded != nil && last+1 >= end {
			close(loaded)
			loaded = nil
		}
	}
}

// put writes key=value (nil value: tombstone), waits for it to be durable,
// and applies it to the local view.
func (s *stateStore) put(ctx context.Context, key string, value any) error {
	var b []byte
	if value != nil {
		var err error
		if b, err = json.Marshal(value); err != nil {
			return err
		}
	}
	if err := s.cl.ProduceSync(ctx, &kgo.Record{Topic: s.topic, Key: []byte(key), Value: b}).FirstErr(); err != nil {
		return fmt.Errorf("fluid: write state %s: %w", key, err)
	}
	s.mu.Lock()
	err := s.v.apply(key, b)
	s.mu.Unlock()
	if s.onChange != nil {
		s.onChange()
	}
	return err
}

// putAsync writes without waiting (progress records).
func (s *stateStore) putAsync(key string, value any) {
	b, err := json.Marshal(value)
	if err != nil {
		return
	}
	s.cl.Produce(context.Background(), &kgo.Record{Topic: s.topic, Key: []byte(key), Value: b}, func(_ *kgo.Record, err error) {
		if err != nil {
			s.log.Warn("fluid: write state", "key", key, "err", err)
		}
	})
}

// read runs fn with the view read-locked.
func (s *stateStore) read(fn func(v *view)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.v)
}
