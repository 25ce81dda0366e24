package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero/api"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/runtime/internal/redpanda"
)

// The schema registry imports of a Redpanda data transform
// (redpanda_schema_registry, version 0) are served by the stage's schema
// registry (plugins.SchemaRegistry). Each lookup is a len call, which
// asks the registry and says how long the answer is, then a get call that
// copies it into the guest's buffer. A schema's definition by id never
// changes, nor does a subject's numbered version, so the module keeps
// those (srCache); a subject's latest version is asked each time (the
// SDKs' clients keep their own cache).
//
// A registry that cannot be reached, or answers 5xx, stops the guest and
// fails the batch as transient, to be retried: that is no fault of the
// records. Any other refusal (an unknown id, subject or version; an
// invalid or incompatible schema) is the guest's to handle: the import
// returns rpErrSR, and if the guest then fails on that record, its error
// says what the registry answered.

// srCache holds a module's schema definitions by id and subject versions.
type srCache struct {
	mu        sync.Mutex
	byID      map[int][]byte
	byVersion map[srKey][]byte
}

type srKey struct {
	subject string
	version int
}

// maxSRCached bounds each of an srCache's maps; past it the map starts over.
const maxSRCached = 10000

func newSRCache() *srCache {
	return &srCache{byID: map[int][]byte{}, byVersion: map[srKey][]byte{}}
}

// rpMemo is a guest's last subject lookup: its get call copies the answer
// its len call measured, even if the latest version changed in between.
type rpMemo struct {
	key srKey
	val []byte
}

// registryCtx is the context of a registry request: the batch's (or
// start's), bounded by its deadline.
func (g *rpGuest) registryCtx() (context.Context, context.CancelFunc) {
	ctx := g.ctx
	if g.cur != nil {
		ctx = g.cur.ctx
	}
	if until := g.inst.until; !until.IsZero() {
		return context.WithDeadline(ctx, until)
	}
	return context.WithCancel(ctx)
}

// registryErr handles a registry error: a transient one stops the guest;
// another is remembered for the batch's error and returned as rpErrSR.
func (g *rpGuest) registryErr(what string, err error) int32 {
	if plugins.IsTransient(err) || g.inst.timedOut.Load() {
		g.fail(plugins.Transient(fmt.Errorf("schema registry: %s: %w", what, err)))
	}
	err = fmt.Errorf("%s: %w", what, err)
	g.srErr = err
	g.inst.m.logger.Warn("schema registry refused the transform's request", "err", err)
	return rpErrSR
}

func schemaFormat(t string) int {
	switch strings.ToUpper(t) {
	case "PROTOBUF":
		return redpanda.FormatProtobuf
	case "JSON":
		return redpanda.FormatJSON
	}
	return redpanda.FormatAvro
}

func encodeSchema(s plugins.RegistrySchema) redpanda.Schema {
	out := redpanda.Schema{Format: schemaFormat(s.Type), Text: s.Schema}
	for _, r := range s.References {
		out.References = append(out.References, redpanda.Reference{Name: r.Name, Subject: r.Subject, Version: r.Version})
	}
	return out
}

// schemaByID returns the encoded definition of schema id, or an error
// status.
func (g *rpGuest) schemaByID(id int) ([]byte, int32) {
	f := g.inst.m.foreign
	f.sr.mu.Lock()
	def, ok := f.sr.byID[id]
	f.sr.mu.Unlock()
	if ok {
		return def, 0
	}
	ctx, cancel := g.registryCtx()
	defer cancel()
	s, err := f.registry.SchemaByID(ctx, id)
	g.inst.stopIfOver()
	if err != nil {
		return nil, g.registryErr(fmt.Sprintf("schema id %d", id), err)
	}
	rs := encodeSchema(s)
	def = redpanda.AppendSchema(nil, &rs)
	f.sr.mu.Lock()
	if len(f.sr.byID) >= maxSRCached {
		clear(f.sr.byID)
	}
	f.sr.byID[id] = def
	f.sr.mu.Unlock()
	return def, 0
}

// subjectSchema returns the encoded schema of a subject's version (-1:
// the latest), or an error status.
func (g *rpGuest) subjectSchema(subject string, version int, fresh bool) ([]byte, int32) {
	f := g.inst.m.foreign
	key := srKey{subject, version}
	if !fresh && g.memo.val != nil && g.memo.key == key {
		return g.memo.val, 0
	}
	if version > 0 {
		f.sr.mu.Lock()
		val, ok := f.sr.byVersion[key]
		f.sr.mu.Unlock()
		if ok {
			g.memo = rpMemo{key, val}
			return val, 0
		}
	}
	ctx, cancel := g.registryCtx()
	defer cancel()
	s, err := f.registry.SchemaByVersion(ctx, subject, version)
	g.inst.stopIfOver()
	if err != nil {
		return nil, g.registryErr(fmt.Sprintf("subject %q version %d", subject, version), err)
	}
	rs := encodeSchema(s)
	val := redpanda.AppendSubjectSchema(nil, s.ID, s.Version, &rs)
	if version > 0 {
		f.sr.mu.Lock()
		if len(f.sr.byVersion) >= maxSRCached {
			clear(f.sr.byVersion)
		}
		f.sr.byVersion[key] = val
		f.sr.mu.Unlock()
	}
	g.memo = rpMemo{key, val}
	return val, 0
}

// readString reads a guest string of n bytes at ptr.
func readString(mod api.Module, ptr, n uint32) (string, bool) {
	b, ok := mod.Memory().Read(ptr, n)
	return string(b), ok
}

// getSchemaDefinitionLen implements get_schema_definition_len(id, len_out).
func (g *rpGuest) getSchemaDefinitionLen(mod api.Module, stack []uint64) {
	def, st := g.schemaByID(int(api.DecodeI32(stack[0])))
	if st == 0 && !mod.Memory().WriteUint32Le(uint32(stack[1]), uint32(len(def))) {
		st = rpErrInval
	}
	stack[0] = api.EncodeI32(st)
}

// getSchemaDefinition implements get_schema_definition(id, buf, len).
func (g *rpGuest) getSchemaDefinition(mod api.Module, stack []uint64) {
	def, st := g.schemaByID(int(api.DecodeI32(stack[0])))
	stack[0] = api.EncodeI32(copyOut(mod, def, st, uint32(stack[1]), uint32(stack[2])))
}

// copyOut copies b into the guest's buffer and returns its length, or the
// error status.
func copyOut(mod api.Module, b []byte, st int32, ptr, n uint32) int32 {
	switch {
	case st != 0:
		return st
	case uint64(len(b)) > uint64(n):
		return rpErrNoBufs
	case !mod.Memory().Write(ptr, b):
		return rpErrInval
	}
	return int32(len(b))
}

// getSubjectSchemaLen implements get_subject_schema_len(subject,
// subject_len, version, len_out).
func (g *rpGuest) getSubjectSchemaLen(mod api.Module, stack []uint64) {
	subject, ok := readString(mod, uint32(stack[0]), uint32(stack[1]))
	if !ok {
		stack[0] = api.EncodeI32(rpErrInval)
		return
	}
	val, st := g.subjectSchema(subject, int(api.DecodeI32(stack[2])), true)
	if st == 0 && !mod.Memory().WriteUint32Le(uint32(stack[3]), uint32(len(val))) {
		st = rpErrInval
	}
	stack[0] = api.EncodeI32(st)
}

// getSubjectSchema implements get_subject_schema(subject, subject_len,
// version, buf, len).
func (g *rpGuest) getSubjectSchema(mod api.Module, stack []uint64) {
	subject, ok := readString(mod, uint32(stack[0]), uint32(stack[1]))
	if !ok {
		stack[0] = api.EncodeI32(rpErrInval)
		return
	}
	val, st := g.subjectSchema(subject, int(api.DecodeI32(stack[2])), false)
	stack[0] = api.EncodeI32(copyOut(mod, val, st, uint32(stack[3]), uint32(stack[4])))
}

// createSubjectSchema implements create_subject_schema(subject,
// subject_len, schema, schema_len, id_out).
func (g *rpGuest) createSubjectSchema(mod api.Module, stack []uint64) {
	subject, ok := readString(mod, uint32(stack[0]), uint32(stack[1]))
	def, ok2 := mod.Memory().Read(uint32(stack[2]), uint32(stack[3]))
	if !ok || !ok2 {
		stack[0] = api.EncodeI32(rpErrInval)
		return
	}
	s, err := redpanda.DecodeSchema(def)
	if err != nil {
		stack[0] = api.EncodeI32(rpErrInval)
		return
	}
	rs := plugins.RegistrySchema{Schema: s.Text, Type: [...]string{"AVRO", "PROTOBUF", "JSON"}[s.Format]}
	for _, r := range s.References {
		rs.References = append(rs.References, plugins.RegistryReference{Name: r.Name, Subject: r.Subject, Version: r.Version})
	}
	ctx, cancel := g.registryCtx()
	defer cancel()
	got, err := g.inst.m.foreign.registry.CreateSchema(ctx, subject, rs)
	g.inst.stopIfOver()
	if err != nil {
		stack[0] = api.EncodeI32(g.registryErr(fmt.Sprintf("register a schema under subject %q", subject), err))
		return
	}
	if !mod.Memory().WriteUint32Le(uint32(stack[4]), uint32(int32(got.ID))) {
		stack[0] = api.EncodeI32(rpErrInval)
		return
	}
	stack[0] = 0
}
