package fluid

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/streamd/streamd/fluid/internal/fastschema"
	"github.com/streamd/streamd/fluid/internal/schemanorm"
	"github.com/streamd/streamd/plugins"
)

// Header names used on records.
const (
	// HeaderSchemaVersion holds the schema version (decimal) a record was
	// written against.
	HeaderSchemaVersion = "fluid-schema-version"
	// HeaderSourcePartition and HeaderSourceOffset name the main-topic record
	// a downgrade-topic record was made from (decimal).
	HeaderSourcePartition = "fluid-source-partition"
	HeaderSourceOffset    = "fluid-source-offset"
	// HeaderSourceVersion is the schema version of that main-topic record.
	HeaderSourceVersion = "fluid-source-schema-version"
	// HeaderSourceFrom, on downgrade-topic records, is a main-topic position
	// (decimal offset) from which the record's source is the first record of
	// its partition: the partition holds no record at offsets from <= o <
	// HeaderSourceOffset. A reader whose next main-topic position is pos takes
	// the record when from <= pos <= its source offset, drops it when its
	// source offset is below pos, and knows that a record is missing when
	// from > pos. Offsets are never computed by arithmetic: from is where the
	// bridge's fetch stood, the position after the record before.
	HeaderSourceFrom = "fluid-source-from"
	// HeaderSegment, on downgrade-topic records, is the id of the
	// republishing segment that wrote the record (see GET
	// /fluid/downgrade-offset in docs/fluid.md).
	HeaderSegment = "fluid-segment"
)

// ManifestFile is the name of the manifest in each version folder.
const ManifestFile = "manifest.json"

// Errors that callers can test with errors.Is.
var (
	ErrUnknownTopic   = errors.New("unknown topic")
	ErrUnknownVersion = errors.New("unknown schema version")
)

// manifest is the JSON of one version folder's manifest.json.
type manifest struct {
	// Version, when present, must match the folder name.
	Version *int                     `json:"version,omitempty"`
	Topics  map[string]manifestTopic `json:"topics"`
}

type manifestTopic struct {
	// Schema is the JSON Schema file, relative to the version folder.
	Schema string `json:"schema,omitempty"`
	// Subject, instead of Schema, takes the schema from a Schema Registry:
	// version folder vN's schema is the subject's registry version N (a
	// JSON Schema). Needs LoadMetadataFrom with a SchemaSource.
	Subject string `json:"subject,omitempty"`
	// Downgrade is the plugin reference turning this version's records of
	// the topic into the previous version's.
	Downgrade string `json:"downgrade,omitempty"`
	// DowngradeConfig is passed to the downgrade plugin's init.
	DowngradeConfig map[string]any `json:"downgrade_config,omitempty"`
}

// TopicVersion is one topic at one schema version.
type TopicVersion struct {
	// SchemaFile is the absolute path of the JSON Schema, or for a schema
	// from a registry "registry:SUBJECT/versions/N".
	SchemaFile string
	// Normalized is the schema in canonical form (see Compatible).
	Normalized []byte
	// Downgrade is the plugin reference for version -> version-1 (resolved
	// against the version folder), empty when none is given.
	Downgrade string
	// DowngradeConfig is the downgrade plugin's config table.
	DowngradeConfig map[string]any
	// Subject is the registry subject the schema came from ("" for a
	// file); its version there is the version folder's number.
	Subject string

	text   string // the registry's schema text (Subject set)
	schema *jsonschema.Schema
	fast   *fastschema.Validator // nil when the schema is outside its subset
	epoch  int                   // bumps at each version where the schema changed
}

// Validate checks the JSON payload against this version's schema.
//
// Every payload is validated: a one-pass check over the bytes
// (fluid/internal/fastschema) accepts the payloads it can prove valid
// without decoding them; any other payload (invalid, or one the fast path
// cannot decide) is decoded and validated by the jsonschema library, whose
// answer and error are final.
func (tv *TopicVersion) Validate(payload []byte) error {
	if tv.fast != nil && tv.fast.Valid(payload) {
		return nil
	}
	return tv.validateSlow(payload)
}

// validateSlow validates with the jsonschema library only.
func (tv *TopicVersion) validateSlow(payload []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("payload is not JSON: %w", err)
	}
	return tv.schema.Validate(v)
}

// Metadata is a loaded, immutable fluid metadata directory.
type Metadata struct {
	dir      string
	first    int
	last     int
	versions map[int]map[string]*TopicVersion
}

// Dir is the directory the metadata was loaded from.
func (m *Metadata) Dir() string { return m.dir }

// First and Last are the lowest and highest schema versions.
func (m *Metadata) First() int { return m.first }

// Last is the highest schema version.
func (m *Metadata) Last() int { return m.last }

// Topics returns the names of the topics in any version, sorted.
func (m *Metadata) Topics() []string {
	set := map[string]bool{}
	for _, ts := range m.versions {
		for t := range ts {
			set[t] = true
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// HasTopic reports whether any version names topic.
func (m *Metadata) HasTopic(topic string) bool {
	for _, ts := range m.versions {
		if ts[topic] != nil {
			return true
		}
	}
	return false
}

// Topic returns topic at version v.
func (m *Metadata) Topic(topic string, v int) (*TopicVersion, error) {
	ts, ok := m.versions[v]
	if !ok {
		return nil, fmt.Errorf("%w %d (metadata has %d..%d)", ErrUnknownVersion, v, m.first, m.last)
	}
	tv := ts[topic]
	if tv == nil {
		if !m.HasTopic(topic) {
			return nil, fmt.Errorf("%w %q", ErrUnknownTopic, topic)
		}
		return nil, fmt.Errorf("%w: topic %q is not in version %d", ErrUnknownVersion, topic, v)
	}
	return tv, nil
}

// Compatible reports whether records of topic written against observed can
// be read by a consumer built against compatible: true when the topic's
// schema did not change at any version between the two (identical after
// normalisation, see fluid/internal/schemanorm). The answer is computed once
// at load and never changes for the same arguments.
func (m *Metadata) Compatible(topic string, observed, compatible int) (bool, error) {
	o, c, err := m.topicVersions(topic, observed, compatible)
	if err != nil {
		return false, err
	}
	return o.epoch == c.epoch, nil
}

// topicVersions returns topic at versions observed and compatible.
func (m *Metadata) topicVersions(topic string, observed, compatible int) (o, c *TopicVersion, err error) {
	if o, err = m.Topic(topic, observed); err != nil {
		return nil, nil, err
	}
	if c, err = m.Topic(topic, compatible); err != nil {
		return nil, nil, err
	}
	return o, c, nil
}

// Step is one downgrade in a chain: records of topic at From become From-1.
type Step struct {
	Topic string
	From  int
	*TopicVersion
}

// Chain returns the downgrade steps that turn records of topic at version
// from into version to (from > to), highest first. Versions where the schema
// did not change need no step and are skipped; a changed version without a
// downgrade is an error (fail closed).
func (m *Metadata) Chain(topic string, from, to int) ([]Step, error) {
	if from <= to {
		return nil, fmt.Errorf("fluid: cannot downgrade topic %q from version %d to %d", topic, from, to)
	}
	var steps []Step
	for v := from; v > to; v-- {
		cur, err := m.Topic(topic, v)
		if err != nil {
			return nil, err
		}
		prev, err := m.Topic(topic, v-1)
		if err != nil {
			return nil, err
		}
		if cur.epoch == prev.epoch {
			continue
		}
		if cur.Downgrade == "" {
			return nil, fmt.Errorf("fluid: topic %q changed in version %d but %s/v%d/%s has no downgrade for it", topic, v, m.dir, v, ManifestFile)
		}
		steps = append(steps, Step{Topic: topic, From: v, TopicVersion: cur})
	}
	return steps, nil
}

// LoadMetadata reads and validates the structure of a metadata directory:
// version folders v1, v2, ... (contiguous), each with a manifest.json whose
// schemas parse and compile. It does not load plugins (see Check).
func LoadMetadata(dir string) (*Metadata, error) { return LoadMetadataFrom(dir, nil) }

// SchemaSource returns the schema text of a registry subject's version.
type SchemaSource func(subject string, version int) (string, error)

// LoadMetadataFrom is LoadMetadata where a manifest topic may name a
// registry "subject" instead of a "schema" file: version folder vN's schema
// of that topic is the subject's version N, taken from src (nil: such a
// manifest is an error). Downgrade plugins still come from the manifests.
func LoadMetadataFrom(dir string, src SchemaSource) (*Metadata, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fluid metadata %s: %w", dir, err)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, fmt.Errorf("fluid metadata: %w", err)
	}
	var nums []int
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "v") {
			continue
		}
		n, err := strconv.Atoi(e.Name()[1:])
		if err != nil || n < 1 || e.Name() != "v"+strconv.Itoa(n) {
			return nil, fmt.Errorf("fluid metadata %s: folder %q is not a version folder (want v1, v2, ...)", abs, e.Name())
		}
		nums = append(nums, n)
	}
	if len(nums) == 0 {
		return nil, fmt.Errorf("fluid metadata %s: no version folders (v1, v2, ...)", abs)
	}
	sort.Ints(nums)
	for i := 1; i < len(nums); i++ {
		if nums[i] != nums[i-1]+1 {
			return nil, fmt.Errorf("fluid metadata %s: versions are not contiguous: v%d is followed by v%d", abs, nums[i-1], nums[i])
		}
	}
	m := &Metadata{dir: abs, first: nums[0], last: nums[len(nums)-1], versions: map[int]map[string]*TopicVersion{}}
	for _, n := range nums {
		ts, err := loadVersion(filepath.Join(abs, "v"+strconv.Itoa(n)), n, src)
		if err != nil {
			return nil, err
		}
		m.versions[n] = ts
	}
	// Epochs: a topic's epoch changes at each version where its normalised
	// schema differs from the previous version's (or where it reappears).
	for _, topic := range m.Topics() {
		epoch := 0
		var prev *TopicVersion
		for v := m.first; v <= m.last; v++ {
			tv := m.versions[v][topic]
			if tv == nil {
				prev = nil
				continue
			}
			if prev == nil || !bytes.Equal(prev.Normalized, tv.Normalized) {
				epoch++
			}
			tv.epoch = epoch
			prev = tv
		}
	}
	return m, nil
}

func loadVersion(dir string, n int, src SchemaSource) (map[string]*TopicVersion, error) {
	path := filepath.Join(dir, ManifestFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fluid metadata: %w", err)
	}
	var mf manifest
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&mf); err != nil {
		return nil, fmt.Errorf("fluid metadata %s: %w", path, err)
	}
	if mf.Version != nil && *mf.Version != n {
		return nil, fmt.Errorf("fluid metadata %s: \"version\" is %d but the folder is v%d", path, *mf.Version, n)
	}
	if len(mf.Topics) == 0 {
		return nil, fmt.Errorf("fluid metadata %s: \"topics\" is empty", path)
	}
	out := make(map[string]*TopicVersion, len(mf.Topics))
	for topic, mt := range mf.Topics {
		if err := validTopicName(topic); err != nil {
			return nil, fmt.Errorf("fluid metadata %s: topics: %w", path, err)
		}
		if (mt.Schema == "") == (mt.Subject == "") {
			return nil, fmt.Errorf("fluid metadata %s: topics.%s: set schema (a file) or subject (a schema registry subject)", path, topic)
		}
		sf := mt.Schema
		c := jsonschema.NewCompiler()
		var raw []byte
		if mt.Subject != "" {
			if src == nil {
				return nil, fmt.Errorf("fluid metadata %s: topics.%s.subject needs a schema registry ([fluid] registry)", path, topic)
			}
			text, err := src(mt.Subject, n)
			if err != nil {
				return nil, fmt.Errorf("fluid metadata %s: topics.%s.subject %s version %d: %w", path, topic, mt.Subject, n, err)
			}
			raw, sf = []byte(text), fmt.Sprintf("registry:%s/versions/%d", mt.Subject, n)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				return nil, fmt.Errorf("fluid metadata %s: %s is not JSON: %w", path, sf, err)
			}
			if err := c.AddResource(sf, doc); err != nil {
				return nil, fmt.Errorf("fluid metadata %s: %s: %w", path, sf, err)
			}
		} else {
			if !filepath.IsAbs(sf) {
				sf = filepath.Join(dir, sf)
			}
			var err error
			if raw, err = os.ReadFile(sf); err != nil {
				return nil, fmt.Errorf("fluid metadata %s: topics.%s.schema: %w", path, topic, err)
			}
		}
		norm, err := schemanorm.Normalize(raw)
		if err != nil {
			return nil, fmt.Errorf("fluid metadata %s: %w", sf, err)
		}
		sch, err := c.Compile(sf)
		if err != nil {
			return nil, fmt.Errorf("fluid metadata %s: schema does not compile: %w", sf, err)
		}
		out[topic] = &TopicVersion{
			SchemaFile:      sf,
			Normalized:      norm,
			Downgrade:       resolveRef(dir, mt.Downgrade),
			DowngradeConfig: mt.DowngradeConfig,
			Subject:         mt.Subject,
			text:            textOf(mt.Subject, raw),
			schema:          sch,
			fast:            fastschema.Compile(sch),
		}
	}
	return out, nil
}

func textOf(subject string, raw []byte) string {
	if subject == "" {
		return ""
	}
	return string(raw)
}

// resolveRef makes the path of a plugin reference absolute against dir:
// "wasm:x.wasm", "native:bin" and bare "x.wasm" paths; other references
// (e.g. a name an in-process loader knows) are left alone.
func resolveRef(dir, ref string) string {
	if ref == "" {
		return ""
	}
	for _, scheme := range []string{"wasm:", "native:"} {
		if p, ok := strings.CutPrefix(ref, scheme); ok {
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			return scheme + p
		}
	}
	if !strings.Contains(ref, ":") && strings.HasSuffix(ref, ".wasm") && !filepath.IsAbs(ref) {
		return filepath.Join(dir, ref)
	}
	return ref
}

// validTopicName checks Kafka's topic name rules.
func validTopicName(t string) error {
	if t == "" || len(t) > 249 || t == "." || t == ".." {
		return fmt.Errorf("bad topic name %q", t)
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("bad topic name %q: %q is not allowed", t, r)
		}
	}
	return nil
}

// Problem is one finding of Check.
type Problem struct {
	// Path is the file the problem is in.
	Path string
	// Warning is true for findings that do not make the metadata unusable.
	Warning bool
	Msg     string
}

func (p Problem) String() string {
	level := "error"
	if p.Warning {
		level = "warning"
	}
	return fmt.Sprintf("%s: %s: %s", p.Path, level, p.Msg)
}

// Check validates what LoadMetadata cannot: every version after the first has
// a downgrade for each topic whose schema changed, and every downgrade
// plugin loads as a transform through load (nil skips loading). Warnings
// flag downgrades given for unchanged topics (never used).
func (m *Metadata) Check(ctx context.Context, load plugins.OpenFunc) []Problem {
	var probs []Problem
	for v := m.first + 1; v <= m.last; v++ {
		mpath := filepath.Join(m.dir, "v"+strconv.Itoa(v), ManifestFile)
		topics := make([]string, 0, len(m.versions[v]))
		for t := range m.versions[v] {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		for _, t := range topics {
			tv := m.versions[v][t]
			prev := m.versions[v-1][t]
			changed := prev != nil && prev.epoch != tv.epoch
			switch {
			case changed && tv.Downgrade == "":
				probs = append(probs, Problem{Path: mpath, Msg: fmt.Sprintf("topic %q: schema changed since v%d but no downgrade is given", t, v-1)})
			case prev == nil && tv.Downgrade != "":
				probs = append(probs, Problem{Path: mpath, Warning: true, Msg: fmt.Sprintf("topic %q: not in v%d, its downgrade is never used", t, v-1)})
			case !changed && prev != nil && tv.Downgrade != "":
				probs = append(probs, Problem{Path: mpath, Warning: true, Msg: fmt.Sprintf("topic %q: schema unchanged since v%d, its downgrade is never used", t, v-1)})
			}
			if tv.Downgrade != "" && load != nil {
				if err := checkPlugin(ctx, load, tv); err != nil {
					probs = append(probs, Problem{Path: mpath, Msg: fmt.Sprintf("topic %q: downgrade %s: %v", t, tv.Downgrade, err)})
				}
			}
		}
	}
	return probs
}

func checkPlugin(ctx context.Context, load plugins.OpenFunc, tv *TopicVersion) error {
	p, err := load(ctx, tv.Downgrade, plugins.Options{Kind: plugins.KindTransform, Config: tv.DowngradeConfig})
	if err != nil {
		return err
	}
	defer func() { _ = p.Close(context.WithoutCancel(ctx)) }()
	if _, ok := p.(plugins.Transformer); !ok {
		return fmt.Errorf("plugin %q is a %s, not a transform", p.Manifest().Name, p.Manifest().Kind)
	}
	return nil
}

// renameTopic returns a copy of m with topic from renamed to to (tests on a
// shared broker use unique topic names).
func (m *Metadata) renameTopic(from, to string) *Metadata {
	c := *m
	c.versions = map[int]map[string]*TopicVersion{}
	for v, ts := range m.versions {
		c.versions[v] = map[string]*TopicVersion{}
		for t, tv := range ts {
			if t == from {
				t = to
			}
			c.versions[v][t] = tv
		}
	}
	return &c
}
