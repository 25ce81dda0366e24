package schema

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// Mode is what a stage does.
type Mode int

// The modes.
const (
	// Decode turns framed Avro, Protobuf or JSON Schema data into JSON.
	Decode Mode = iota
	// Encode turns JSON into framed data against a subject.
	Encode
)

// Strategy names the subject a record is encoded against.
type Strategy int

// The subject name strategies (Confluent's).
const (
	// TopicName is TOPIC-value (or TOPIC-key).
	TopicName Strategy = iota
	// RecordName is the schema's full record name.
	RecordName
	// TopicRecordName is TOPIC-RECORDNAME.
	TopicRecordName
)

// Config configures a stage; the zero value decodes values.
type Config struct {
	Mode Mode
	// Key makes the stage work on record keys instead of values.
	Key bool

	// Encode only.
	// Subject fixes the subject; "" derives it with Strategy.
	Subject  string
	Strategy Strategy
	// Topic is the topic in subject names; "" uses each record's topic.
	Topic string
	// Schema is the writer schema to encode with; nil uses the subject's
	// Version (0: its latest version).
	Schema  *sr.Schema
	Version int
	// Message is the Protobuf message to encode ("" the file's first).
	Message string
	// AutoRegister registers Schema under the subject; false looks it up.
	AutoRegister bool

	// NegativeTTL is how long a registry verdict (unknown id, subject or
	// schema; an incompatible schema) is remembered before it is asked
	// again (default 30s).
	NegativeTTL time.Duration
}

// Stage is the schema transform stage (a plugins.Transformer).
type Stage struct {
	cfg   Config
	cache *cache
	// name is the configured schema's record name, for the record-name
	// strategies.
	name    string
	nameErr error

	mu      sync.Mutex
	targets map[string]*target // encode: by subject

	ratio ratio // output bytes per input byte, for the next batch's arena
}

// target is the schema a subject encodes with, or why it cannot.
type target struct {
	s   *compiled
	md  protoreflect.MessageDescriptor
	idx []int
	err error // a verdict, remembered until at+NegativeTTL
	at  time.Time
}

// New returns a stage that asks reg for schemas.
func New(reg Registry, cfg Config) (*Stage, error) {
	if cfg.NegativeTTL == 0 {
		cfg.NegativeTTL = 30 * time.Second
	}
	if cfg.Mode == Encode && cfg.Schema == nil && (cfg.Strategy != TopicName && cfg.Subject == "") {
		return nil, errors.New("the record-name strategies need a schema to take the name from")
	}
	if cfg.Mode == Encode && cfg.Schema == nil && cfg.AutoRegister {
		return nil, errors.New("auto-register needs a schema")
	}
	st := &Stage{cfg: cfg, cache: newCache(reg, cfg.NegativeTTL), targets: map[string]*target{}}
	if cfg.Schema != nil {
		c, err := newCache(nil, 0).compile(context.Background(), *cfg.Schema)
		if err != nil {
			return nil, fmt.Errorf("writer schema: %w", err)
		}
		st.name, st.nameErr = c.fullName(cfg.Message)
		if cfg.Strategy != TopicName && st.nameErr != nil {
			return nil, st.nameErr
		}
	}
	return st, nil
}

// ReadSchemaFile reads a writer schema for Config.Schema; its type comes
// from format ("avro", "protobuf", "json") or else from the file's
// extension (.avsc, .proto, .json).
func ReadSchemaFile(path, format string) (*sr.Schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if format == "" {
		switch strings.ToLower(filepath.Ext(path)) {
		case ".avsc", ".avro":
			format = "avro"
		case ".proto":
			format = "protobuf"
		case ".json":
			format = "json"
		default:
			return nil, fmt.Errorf("%s: set format (avro, protobuf or json): the extension does not say", path)
		}
	}
	t, err := ParseFormat(format)
	if err != nil {
		return nil, err
	}
	s := &sr.Schema{Schema: string(b), Type: t}
	// Check it compiles now: a bad file is a config error, not a record's.
	if _, err := newCache(nil, 0).compile(context.Background(), *s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ParseFormat maps a config format name to a registry schema type.
func ParseFormat(f string) (sr.SchemaType, error) {
	switch f {
	case "avro":
		return sr.TypeAvro, nil
	case "protobuf":
		return sr.TypeProtobuf, nil
	case "json":
		return sr.TypeJSON, nil
	}
	return 0, fmt.Errorf("unknown format %q (want avro, protobuf or json)", f)
}

func (st *Stage) part(r *record.Record) []byte {
	if st.cfg.Key {
		return r.Key
	}
	return r.Value
}

func (st *Stage) partName() string {
	if st.cfg.Key {
		return "key"
	}
	return "value"
}

// Transform implements plugins.Transformer. A record that does not decode
// or does not fit its schema gets a per-record error naming the schema id,
// the subject and why; a registry that cannot be reached fails the whole
// batch with a plugins.Transient error, so that it is retried.
func (st *Stage) Transform(ctx context.Context, batch []record.Record) ([]plugins.Result, error) {
	if st.cfg.Mode == Encode {
		return st.encode(ctx, batch)
	}
	return st.decode(ctx, batch)
}

// arena hands out output buffers cut from few allocations per batch,
// sized by the ratio of output to input bytes the stage saw in its last
// batch (a ratio): one allocation for the batch when its records are like
// the last batch's.
type arena struct {
	buf     []byte
	ratio   uint64 // output bytes per 1024 input bytes (estimate)
	rest    int    // input bytes of the batch not yet started
	in, out int    // this batch's bytes, for the next ratio
}

// newArena prepares an arena for a batch of total input bytes.
func newArena(total int, r *ratio) *arena {
	a := &arena{ratio: r.get(), rest: total}
	a.buf = make([]byte, 0, a.size(total)+64)
	return a
}

func (a *arena) size(in int) int { return int(uint64(in) * a.ratio / 1024) }

// start returns an empty buffer to append the output for n input bytes to.
func (a *arena) start(n int) []byte {
	hint := a.size(n) + n/4 + 32
	a.rest -= n
	a.in += n
	if cap(a.buf)-len(a.buf) < hint {
		a.buf = make([]byte, 0, hint+a.size(max(a.rest, 0)))
	}
	return a.buf[len(a.buf):len(a.buf)]
}

// keep takes out, which start returned and the caller appended to, out of
// the arena (if it still lives there) and returns it with its capacity cut.
func (a *arena) keep(out []byte) []byte {
	n := len(out)
	a.out += n
	rest := a.buf[len(a.buf):cap(a.buf)]
	if n > 0 && len(rest) >= n && &rest[0] == &out[0] {
		a.buf = a.buf[:len(a.buf)+n]
	}
	return out[:n:n]
}

// ratio is a stage's output bytes per 1024 input bytes, as last seen.
type ratio struct{ v atomic.Uint64 }

func (r *ratio) get() uint64 {
	if v := r.v.Load(); v != 0 {
		return v
	}
	return 2048
}

// done records what a batch's arena saw.
func (r *ratio) done(a *arena) {
	if a.in > 0 && a.out > 0 {
		r.v.Store(min(max(uint64(a.out)*1024/uint64(a.in), 64), 64*1024))
	}
}

func (st *Stage) decode(ctx context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	ids := make([]int, len(batch))
	// First the ids: fetch each unknown one once, before any record is
	// judged, so that a registry outage fails the batch as a whole.
	need := map[int]bool{}
	for i := range batch {
		p := st.part(&batch[i])
		if p == nil {
			ids[i] = -1
			continue
		}
		id, _, err := ParseFrame(p)
		if err != nil {
			ids[i] = -1
			out[i].Err = fmt.Errorf("schema decode (%s): %w", st.partName(), err)
			continue
		}
		ids[i] = id
		need[id] = true
	}
	schemas := make(map[int]*compiled, len(need))
	verdicts := map[int]error{}
	for id := range need {
		s, err := st.cache.get(ctx, id)
		if err != nil {
			var v *verdictError
			if !errors.As(err, &v) {
				return nil, err // transient: the whole batch
			}
			verdicts[id] = err
			continue
		}
		schemas[id] = s
	}
	lastID, lastS, lastErr := -1, (*compiled)(nil), error(nil)
	st.convert(batch, out, func(a *arena, i int, p []byte) ([]byte, error) {
		if ids[i] != lastID { // runs of one id: no map lookups
			lastID, lastS, lastErr = ids[i], schemas[ids[i]], verdicts[ids[i]]
		}
		if lastErr != nil {
			return nil, fmt.Errorf("schema decode (%s): %w", st.partName(), lastErr)
		}
		js, err := st.decodeOne(a, lastS, p[headerSize:])
		if err != nil {
			return nil, st.recordErr(ctx, "decode", lastS, st.topicSubject(&batch[i]), err)
		}
		return js, nil
	})
	return out, nil
}

// convert is the second half of decode and encode: each record of batch
// not refused yet (out[i].Err) becomes a copy, in one slab for the batch,
// whose key or value is conv's output, written in one arena; a null part
// stays null. conv's error is the record's.
func (st *Stage) convert(batch []record.Record, out []plugins.Result, conv func(a *arena, i int, part []byte) ([]byte, error)) {
	total := 0
	for i := range batch {
		total += len(st.part(&batch[i]))
	}
	a := newArena(total, &st.ratio)
	defer st.ratio.done(a)
	slab := make([]record.Record, len(batch)) // one allocation for every output
	for i := range batch {
		if out[i].Err != nil {
			continue
		}
		slab[i] = batch[i]
		r := &slab[i]
		if p := st.part(r); p != nil {
			b, err := conv(a, i, p)
			if err != nil {
				out[i].Err = err
				continue
			}
			if st.cfg.Key {
				r.Key = b
			} else {
				r.Value = b
			}
		}
		out[i].Records = slab[i : i+1 : i+1]
	}
}

func (st *Stage) decodeOne(a *arena, s *compiled, payload []byte) ([]byte, error) {
	dst := a.start(len(payload))
	var err error
	switch {
	case s.avro != nil:
		dst, err = s.avro.decode(dst, payload)
	case s.proto != nil:
		var idx []int
		idx, payload, err = ParseIndexes(payload)
		if err != nil {
			return nil, err
		}
		md, merr := s.proto.message(idx)
		if merr != nil {
			return nil, merr
		}
		dst, err = decodeProto(dst, md, payload)
		if err != nil {
			err = fmt.Errorf("message %s: %w", md.FullName(), err)
		}
	case s.json != nil:
		if err = s.json.validate(payload); err == nil {
			dst = append(dst, payload...)
		}
	}
	if err != nil {
		return nil, err
	}
	return a.keep(dst), nil
}

// topicSubject is the topic-name subject of r, the likeliest of the
// subjects that share a schema id.
func (st *Stage) topicSubject(r *record.Record) string {
	if r.Topic == "" {
		return ""
	}
	return r.Topic + "-" + st.partName()
}

// recordErr is a per-record error naming the schema id, its subject and
// format, and why. On decode, subject is the one preferred among those
// that use the id.
func (st *Stage) recordErr(ctx context.Context, op string, s *compiled, subject string, err error) error {
	if op == "decode" {
		subject = st.cache.subjectOf(ctx, s.id, subject)
	}
	if subject == "" {
		subject = "unknown"
	}
	return fmt.Errorf("schema %s (%s): schema id %d (subject %s, %s): %w", op, st.partName(), s.id, subject, s.format(), err)
}

// subject returns the subject record r encodes against.
func (st *Stage) subject(r *record.Record) (string, error) {
	if st.cfg.Subject != "" {
		return st.cfg.Subject, nil
	}
	topic := st.cfg.Topic
	if topic == "" {
		topic = r.Topic
	}
	if st.cfg.Strategy == TopicName {
		if topic == "" {
			return "", errors.New("the record has no topic to name the subject by (set topic or subject)")
		}
		return topic + "-" + st.partName(), nil
	}
	name, err := st.writerName()
	if err != nil {
		return "", err
	}
	if st.cfg.Strategy == RecordName {
		return name, nil
	}
	if topic == "" {
		return "", errors.New("the record has no topic to name the subject by (set topic or subject)")
	}
	return topic + "-" + name, nil
}

// writerName is the configured schema's record name.
func (st *Stage) writerName() (string, error) { return st.name, st.nameErr }

// resolve returns the encode target of subject, asking the registry on the
// first use and after a verdict's NegativeTTL.
func (st *Stage) resolve(ctx context.Context, subject string) (*target, error) {
	st.mu.Lock()
	t := st.targets[subject]
	st.mu.Unlock()
	if t != nil && (t.err == nil || time.Since(t.at) < st.cfg.NegativeTTL) {
		return t, nil
	}
	t, err := st.fetchTarget(ctx, subject)
	if err != nil {
		var v *verdictError
		if !errors.As(err, &v) {
			return nil, err
		}
		t = &target{err: err, at: time.Now()}
	}
	st.mu.Lock()
	st.targets[subject] = t
	st.mu.Unlock()
	return t, nil
}

func (st *Stage) fetchTarget(ctx context.Context, subject string) (*target, error) {
	var id int
	var s *compiled
	if st.cfg.Schema == nil {
		version := st.cfg.Version
		if version == 0 {
			version = -1 // latest
		}
		ss, err := st.cache.reg.SchemaByVersion(ctx, subject, version)
		if err != nil {
			err = classify(err)
			if v := (*verdictError)(nil); errors.As(err, &v) {
				return nil, &verdictError{fmt.Errorf("subject %s version %s: %w", subject, st.versionName(), v.err)}
			}
			return nil, err
		}
		id = ss.ID
		if s, err = st.cache.get(ctx, id); err != nil {
			return nil, err
		}
	} else {
		var err error
		if st.cfg.AutoRegister {
			id, err = st.cache.reg.RegisterSchema(ctx, subject, *st.cfg.Schema, -1, -1)
		} else {
			var ss sr.SubjectSchema
			ss, err = st.cache.reg.LookupSchema(ctx, subject, *st.cfg.Schema)
			id = ss.ID
		}
		if err != nil {
			err = classify(err)
			if v := (*verdictError)(nil); errors.As(err, &v) {
				what := "looking the schema up in"
				if st.cfg.AutoRegister {
					what = "registering the schema under"
				}
				return nil, &verdictError{fmt.Errorf("%s subject %s: %w", what, subject, v.err)}
			}
			return nil, err
		}
		// The registry's copy of the schema by its id: what readers get.
		if s, err = st.cache.get(ctx, id); err != nil {
			return nil, err
		}
	}
	t := &target{s: s}
	if s.proto != nil {
		md, idx, err := s.proto.byName(st.cfg.Message)
		if err != nil {
			return nil, &verdictError{fmt.Errorf("subject %s, schema id %d: %w", subject, id, err)}
		}
		t.md, t.idx = md, idx
	}
	return t, nil
}

func (st *Stage) versionName() string {
	if st.cfg.Version == 0 {
		return "latest"
	}
	return fmt.Sprint(st.cfg.Version)
}

func (st *Stage) encode(ctx context.Context, batch []record.Record) ([]plugins.Result, error) {
	out := make([]plugins.Result, len(batch))
	subjects := make([]string, len(batch))
	targets := map[string]*target{}
	lastTopic, lastSubject := "", ""
	for i := range batch {
		if st.part(&batch[i]) == nil {
			continue
		}
		var s string
		var err error
		if i > 0 && batch[i].Topic == lastTopic && lastSubject != "" {
			s = lastSubject
		} else {
			s, err = st.subject(&batch[i])
			lastTopic, lastSubject = batch[i].Topic, s
		}
		if err != nil {
			out[i].Err = fmt.Errorf("schema encode (%s): %w", st.partName(), err)
			continue
		}
		subjects[i] = s
		if _, ok := targets[s]; !ok {
			t, err := st.resolve(ctx, s)
			if err != nil {
				return nil, err // transient: the whole batch
			}
			targets[s] = t
		}
	}
	st.convert(batch, out, func(a *arena, i int, p []byte) ([]byte, error) {
		t := targets[subjects[i]]
		if t.err != nil {
			return nil, fmt.Errorf("schema encode (%s): %w", st.partName(), t.err)
		}
		enc, err := st.encodeOne(a, t, p)
		if err != nil {
			return nil, st.recordErr(ctx, "encode", t.s, subjects[i], err)
		}
		return enc, nil
	})
	return out, nil
}

func (st *Stage) encodeOne(a *arena, t *target, js []byte) ([]byte, error) {
	dst := a.start(len(js))
	dst = AppendFrame(dst, t.s.id)
	var err error
	switch {
	case t.s.avro != nil:
		dst, err = t.s.avro.encode(dst, js)
	case t.s.proto != nil:
		dst = AppendIndexes(dst, t.idx)
		dst, err = encodeProto(dst, t.md, js)
	case t.s.json != nil:
		if err = t.s.json.validate(js); err == nil {
			dst = append(dst, js...)
		}
	}
	if err != nil {
		return nil, err
	}
	return a.keep(dst), nil
}
