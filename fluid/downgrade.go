package fluid

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// downgrader turns records of any version of a topic into one target
// version: loaded plugins are cached per step and closed by close.
type downgrader struct {
	meta     *Metadata
	load     plugins.OpenFunc
	opts     plugins.Options
	baseline int

	mu      sync.Mutex
	plugins map[stepKey]plugins.Plugin
}

type stepKey struct {
	topic string
	from  int
}

func newDowngrader(meta *Metadata, load plugins.OpenFunc, opts plugins.Options, baseline int) *downgrader {
	return &downgrader{meta: meta, load: load, opts: opts, baseline: baseline, plugins: map[stepKey]plugins.Plugin{}}
}

func (d *downgrader) step(ctx context.Context, s Step) (plugins.Transformer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := stepKey{s.Topic, s.From}
	if p, ok := d.plugins[k]; ok {
		return p.(plugins.Transformer), nil
	}
	if d.load == nil {
		return nil, fmt.Errorf("fluid: no plugin loader configured to load downgrade %s", s.Downgrade)
	}
	opts := d.opts
	opts.Kind = plugins.KindTransform
	opts.Config = s.DowngradeConfig
	p, err := d.load(ctx, s.Downgrade, opts)
	if err != nil {
		return nil, fmt.Errorf("fluid: load downgrade v%d->v%d of %q (%s): %w", s.From, s.From-1, s.Topic, s.Downgrade, err)
	}
	t, ok := p.(plugins.Transformer)
	if !ok {
		_ = p.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("fluid: downgrade %s is a %s plugin, not a transform", s.Downgrade, p.Manifest().Kind)
	}
	d.plugins[k] = p
	return t, nil
}

func (d *downgrader) close(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for k, p := range d.plugins {
		errs = append(errs, p.Close(ctx))
		delete(d.plugins, k)
	}
	return errors.Join(errs...)
}

// version returns the schema version of r: its header, or the baseline.
func recordVersion(r *record.Record, baseline int) (int, error) {
	h, ok := r.Header(HeaderSchemaVersion)
	if !ok {
		return baseline, nil
	}
	v, err := parseVersion(string(h))
	if err != nil {
		return 0, fmt.Errorf("record %s/%d@%d: header %s: %w", r.Topic, r.Partition, r.Offset, HeaderSchemaVersion, err)
	}
	return v, nil
}

// parseVersion parses a schema version: a positive decimal, optionally
// prefixed with "v".
func parseVersion(s string) (int, error) {
	if len(s) > 1 && (s[0] == 'v' || s[0] == 'V') {
		s = s[1:]
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || s[0] == '+' {
		return 0, fmt.Errorf("%q is not a schema version (a positive integer)", s)
	}
	return v, nil
}

// toVersion turns batch (records of topic, any versions, in order) into the
// records a consumer on version target must see, one output per input, in
// order:
//   - records compatible with target are copied unchanged;
//   - records of a newer, incompatible version go through every downgrade
//     step down to target, and the result must validate against target's
//     schema; the output carries HeaderSchemaVersion = target;
//   - records of an older, incompatible version cannot be upgraded and are
//     copied unchanged.
//
// Every output carries the HeaderSource* headers naming its input. Any
// failure (unknown version, missing step, plugin error, invalid result)
// fails the whole batch: nothing wrong is ever written.
//
// batch is not modified, and outputs share no header slice with it; they
// share key and value bytes with it (and with the plugins' results), which
// nobody modifies. Per batch, not per record: one slab of headers for the
// plugins' inputs, one for the outputs, one buffer for the offset headers.
func (d *downgrader) toVersion(ctx context.Context, topic string, target int, batch []record.Record) ([]record.Record, error) {
	return d.toVersionAt(ctx, topic, target, batch, -1, nil)
}

// toVersionAt is toVersion for the republisher: batch is a run of
// consecutive records of one partition, the first fetched from main-topic
// position from; unless seg is nil every output also carries
// HeaderSourceFrom (from for the first, the position after the previous
// source record for the others) and HeaderSegment = seg.
func (d *downgrader) toVersionAt(ctx context.Context, topic string, target int, batch []record.Record, from int64, seg []byte) ([]record.Record, error) {
	out := make([]record.Record, len(batch))
	versions := make([]int, len(batch))
	type group struct {
		idx  []int
		recs []record.Record
	}
	var groups map[int]*group
	var order []int
	for i := range batch {
		r := &batch[i]
		v, err := recordVersion(r, d.baseline)
		if err != nil {
			return nil, err
		}
		versions[i] = v
		compatible, err := d.meta.Compatible(topic, v, target)
		if err != nil {
			return nil, fmt.Errorf("record %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		if compatible || v < target {
			out[i] = *r // headers rebuilt below
			continue
		}
		if groups == nil {
			groups = map[int]*group{}
		}
		g := groups[v]
		if g == nil {
			g = &group{}
			groups[v] = g
			order = append(order, v)
		}
		g.idx = append(g.idx, i)
	}
	if len(order) > 0 {
		// The plugins get copies whose header slices are their own (a
		// plugin may set headers in place), carved from one slab.
		nh := 0
		for _, v := range order {
			for _, i := range groups[v].idx {
				nh += len(batch[i].Headers)
			}
		}
		slab := make([]record.Header, 0, nh)
		for _, v := range order {
			g := groups[v]
			g.recs = make([]record.Record, len(g.idx))
			for j, i := range g.idx {
				g.recs[j] = batch[i]
				if hs := batch[i].Headers; hs != nil {
					k := len(slab)
					slab = append(slab, hs...)
					g.recs[j].Headers = slab[k:len(slab):len(slab)]
				}
			}
		}
	}
	tv, err := d.meta.Topic(topic, target)
	if err != nil {
		return nil, err
	}
	for _, v := range order {
		g := groups[v]
		steps, err := d.meta.Chain(topic, v, target)
		if err != nil {
			return nil, err
		}
		recs := g.recs
		for _, s := range steps {
			tr, err := d.step(ctx, s)
			if err != nil {
				return nil, err
			}
			res, err := tr.Transform(ctx, recs)
			if err != nil {
				return nil, fmt.Errorf("fluid: downgrade v%d->v%d of %q failed: %w", s.From, s.From-1, topic, err)
			}
			if len(res) != len(recs) {
				return nil, fmt.Errorf("fluid: downgrade v%d->v%d of %q returned %d results for %d records", s.From, s.From-1, topic, len(res), len(recs))
			}
			next := make([]record.Record, len(recs))
			for i, r := range res {
				src := &batch[g.idx[i]]
				if r.Err != nil {
					return nil, fmt.Errorf("fluid: downgrade v%d->v%d of %s/%d@%d: %w", s.From, s.From-1, src.Topic, src.Partition, src.Offset, r.Err)
				}
				if len(r.Records) != 1 {
					return nil, fmt.Errorf("fluid: downgrade v%d->v%d of %s/%d@%d made %d records, want exactly 1", s.From, s.From-1, src.Topic, src.Partition, src.Offset, len(r.Records))
				}
				next[i] = r.Records[0]
			}
			recs = next
		}
		for i, r := range recs {
			src := &batch[g.idx[i]]
			if err := tv.Validate(r.Value); err != nil {
				return nil, fmt.Errorf("fluid: %s/%d@%d downgraded from v%d is not valid v%d: %w", src.Topic, src.Partition, src.Offset, v, target, err)
			}
			// Key, timestamp and partition are the source's; headers are
			// the plugin's (rebuilt below).
			out[g.idx[i]] = record.Record{Key: src.Key, Value: r.Value, Headers: r.Headers, Timestamp: src.Timestamp}
		}
	}

	// Headers: each output's own, minus the ones the bridge sets, then
	// HeaderSchemaVersion (downgraded records) and the source headers, in
	// that order. Values are shared between records where they are equal.
	extra, obytes := 4, 20
	if seg != nil {
		extra, obytes = 6, 40
	}
	nh := 0
	for i := range out {
		nh += len(out[i].Headers) + extra
	}
	slab := make([]record.Header, 0, nh)
	offsets := make([]byte, 0, obytes*len(out))
	targetValue := []byte(strconv.Itoa(target))
	var vcache headerValues
	var pcache headerValues
	for i := range out {
		src := &batch[i]
		downgraded := groups != nil && groups[versions[i]] != nil
		k := len(slab)
		for _, h := range out[i].Headers {
			switch h.Key {
			case HeaderSourcePartition, HeaderSourceOffset, HeaderSourceVersion, HeaderSourceFrom, HeaderSegment:
				continue
			case HeaderSchemaVersion:
				if downgraded {
					continue
				}
			}
			slab = append(slab, h)
		}
		if downgraded {
			slab = append(slab, record.Header{Key: HeaderSchemaVersion, Value: targetValue})
		}
		o := len(offsets)
		offsets = strconv.AppendInt(offsets, src.Offset, 10)
		slab = append(slab,
			record.Header{Key: HeaderSourcePartition, Value: pcache.get(int64(src.Partition))},
			record.Header{Key: HeaderSourceOffset, Value: offsets[o:len(offsets):len(offsets)]},
			record.Header{Key: HeaderSourceVersion, Value: vcache.get(int64(versions[i]))},
		)
		if seg != nil {
			f := from
			if i > 0 {
				f = batch[i-1].Offset + 1
			}
			o := len(offsets)
			offsets = strconv.AppendInt(offsets, f, 10)
			slab = append(slab,
				record.Header{Key: HeaderSourceFrom, Value: offsets[o:len(offsets):len(offsets)]},
				record.Header{Key: HeaderSegment, Value: seg},
			)
		}
		out[i].Headers = slab[k:len(slab):len(slab)]
		out[i].Topic, out[i].Partition, out[i].Offset = "", src.Partition, 0
		out[i].Key = src.Key
	}
	return out, nil
}

// headerValues caches the decimal forms of the last few numbers (versions
// and partitions repeat within a batch).
type headerValues struct {
	n [4]int64
	v [4][]byte
	i int
}

func (c *headerValues) get(n int64) []byte {
	for j := range c.v {
		if c.v[j] != nil && c.n[j] == n {
			return c.v[j]
		}
	}
	j := c.i % len(c.v)
	c.i++
	c.n[j], c.v[j] = n, []byte(strconv.FormatInt(n, 10))
	return c.v[j]
}

// sourceRange reads a downgrade-topic record's source partition and offset,
// the position it covers from (HeaderSourceFrom; its source offset when the
// header is absent, which claims nothing about the records before) and its
// segment (HeaderSegment; 0 when absent).
func sourceRange(r *record.Record) (partition int32, from, offset, seg int64, err error) {
	partition, offset, err = sourcePosition(r)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	from = offset
	if h, ok := r.Header(HeaderSourceFrom); ok {
		from, err = strconv.ParseInt(string(h), 10, 64)
		if err != nil || from < 0 || from > offset {
			return 0, 0, 0, 0, fmt.Errorf("record %s/%d@%d: bad %s %q", r.Topic, r.Partition, r.Offset, HeaderSourceFrom, h)
		}
	}
	if h, ok := r.Header(HeaderSegment); ok {
		seg, err = strconv.ParseInt(string(h), 10, 64)
		if err != nil || seg < 0 {
			return 0, 0, 0, 0, fmt.Errorf("record %s/%d@%d: bad %s %q", r.Topic, r.Partition, r.Offset, HeaderSegment, h)
		}
	}
	return partition, from, offset, seg, nil
}

// sourcePosition reads the HeaderSource* headers of a downgrade-topic record.
func sourcePosition(r *record.Record) (partition int32, offset int64, err error) {
	hp, ok1 := r.Header(HeaderSourcePartition)
	ho, ok2 := r.Header(HeaderSourceOffset)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("record %s/%d@%d has no %s/%s headers", r.Topic, r.Partition, r.Offset, HeaderSourcePartition, HeaderSourceOffset)
	}
	p, err := strconv.ParseInt(string(hp), 10, 32)
	if err != nil || p < 0 {
		return 0, 0, fmt.Errorf("record %s/%d@%d: bad %s %q", r.Topic, r.Partition, r.Offset, HeaderSourcePartition, hp)
	}
	o, err := strconv.ParseInt(string(ho), 10, 64)
	if err != nil || o < 0 {
		return 0, 0, fmt.Errorf("record %s/%d@%d: bad %s %q", r.Topic, r.Partition, r.Offset, HeaderSourceOffset, ho)
	}
	return int32(p), o, nil
}
