package schema

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/plugins"
)

// Registry is what the stage asks of a Confluent-compatible Schema
// Registry; *sr.Client (franz-go's pkg/sr) is one.
type Registry interface {
	// SchemaByID returns the schema with a global id.
	SchemaByID(ctx context.Context, id int) (sr.Schema, error)
	// SchemaByVersion returns a subject's version (-1: the latest).
	SchemaByVersion(ctx context.Context, subject string, version int) (sr.SubjectSchema, error)
	// RegisterSchema registers s under subject (id, version -1) and
	// returns its id.
	RegisterSchema(ctx context.Context, subject string, s sr.Schema, id, version int) (int, error)
	// LookupSchema finds s among subject's versions.
	LookupSchema(ctx context.Context, subject string, s sr.Schema) (sr.SubjectSchema, error)
	// SchemaVersionsByID lists the subject versions that use an id.
	SchemaVersionsByID(ctx context.Context, id int) ([]sr.SubjectVersion, error)
}

// verdictError is a registry answer about the data, not the registry's
// health: an unknown id, a schema the subject does not have, a schema that
// breaks the subject's compatibility, a schema the registry finds invalid.
// Records that need it fail (to the error policy); everything else the
// registry answers is transient.
type verdictError struct{ err error }

func (e *verdictError) Error() string { return e.err.Error() }
func (e *verdictError) Unwrap() error { return e.err }

// classify wraps a registry error: a verdict for 404 (not found), 409
// (incompatible) and 422 (invalid schema); plugins.Transient for everything
// else (a connection refused, a timeout, 5xx, 401/403, 429: none is the
// records' fault, and each may be fixed without touching them).
func classify(err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity:
			return &verdictError{fmt.Errorf("%s (HTTP %d%s)", strings.TrimSpace(re.Error()), re.StatusCode, codeSuffix(re.ErrorCode))}
		}
		return plugins.Transient(fmt.Errorf("schema registry answered HTTP %d: %s", re.StatusCode, trim(re.Error(), 200)))
	}
	return plugins.Transient(fmt.Errorf("schema registry: %w", err))
}

func codeSuffix(code int) string {
	if code == 0 {
		return ""
	}
	return fmt.Sprintf(", error code %d", code)
}

func trim(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// compiled is one schema ready to use.
type compiled struct {
	id    int
	typ   sr.SchemaType
	avro  *avroSchema
	proto *protoSchema
	json  *jsonSchema
	// subjects use it, for error messages (nil: not asked yet).
	subjects []string
}

func (c *compiled) format() string {
	switch c.typ {
	case sr.TypeProtobuf:
		return "protobuf"
	case sr.TypeJSON:
		return "json"
	}
	return "avro"
}

// fullName is the schema's record name for the record-name strategies.
func (c *compiled) fullName(message string) (string, error) {
	switch {
	case c.avro != nil:
		if c.avro.fullName == "" {
			return "", errors.New("the Avro schema is not a named type")
		}
		return c.avro.fullName, nil
	case c.proto != nil:
		md, _, err := c.proto.byName(message)
		if err != nil {
			return "", err
		}
		return string(md.FullName()), nil
	case c.json != nil:
		if c.json.title == "" {
			return "", errors.New("the JSON Schema has no title to name its records by")
		}
		return c.json.title, nil
	}
	return "", errors.New("no schema")
}

// cache holds compiled schemas by id (an id's schema never changes), and
// remembers verdicts (an unknown id) for negTTL so that a flood of records
// with one bad id asks the registry once per negTTL, not once per record.
type cache struct {
	reg    Registry
	negTTL time.Duration

	mu    sync.Mutex
	byID  map[int]*compiled
	negID map[int]negative
	// refs caches referenced schemas by subject and version.
	refs map[string]sr.SubjectSchema
}

type negative struct {
	err error
	at  time.Time
}

func newCache(reg Registry, negTTL time.Duration) *cache {
	return &cache{reg: reg, negTTL: negTTL, byID: map[int]*compiled{}, negID: map[int]negative{}, refs: map[string]sr.SubjectSchema{}}
}

// maxCached bounds the schemas kept by id; past it the cache starts over
// (a registry with that many schemas in use at once is unusual).
const maxCached = 10000

// get returns the compiled schema for id; a *verdictError if the registry
// does not know it or it does not compile; a plugins.Transient error if the
// registry cannot be asked.
func (c *cache) get(ctx context.Context, id int) (*compiled, error) {
	c.mu.Lock()
	if s := c.byID[id]; s != nil {
		c.mu.Unlock()
		return s, nil
	}
	if n, ok := c.negID[id]; ok && time.Since(n.at) < c.negTTL {
		c.mu.Unlock()
		return nil, n.err
	}
	c.mu.Unlock()
	s, err := c.reg.SchemaByID(ctx, id)
	if err != nil {
		err = classify(err)
		var v *verdictError
		if errors.As(err, &v) {
			err = &verdictError{fmt.Errorf("schema id %d: %w", id, v.err)}
			c.mu.Lock()
			c.negID[id] = negative{err, time.Now()}
			c.mu.Unlock()
		}
		return nil, err
	}
	cs, err := c.compile(ctx, s)
	if err != nil {
		var v *verdictError
		if errors.As(err, &v) || !plugins.IsTransient(err) {
			err = &verdictError{fmt.Errorf("schema id %d: %w", id, err)}
			c.mu.Lock()
			c.negID[id] = negative{err, time.Now()}
			c.mu.Unlock()
		}
		return nil, err
	}
	cs.id = id
	c.mu.Lock()
	if len(c.byID) >= maxCached {
		c.byID = map[int]*compiled{}
	}
	c.byID[id] = cs
	c.mu.Unlock()
	return cs, nil
}

// subjectOf names a subject that uses id, for error messages: want if it
// is one of them (the record's topic-name subject), else the first the
// registry lists; "" if the registry does not say. One id may serve many
// subjects: registries give the same schema text the same id.
func (c *cache) subjectOf(ctx context.Context, id int, want string) string {
	c.mu.Lock()
	s := c.byID[id]
	var subjects []string
	if s != nil {
		subjects = s.subjects
	}
	c.mu.Unlock()
	if subjects == nil {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		vs, err := c.reg.SchemaVersionsByID(ctx, id)
		if err != nil {
			return ""
		}
		subjects = []string{}
		for _, v := range vs {
			subjects = append(subjects, v.Subject)
		}
		c.mu.Lock()
		if s != nil {
			s.subjects = subjects
		}
		c.mu.Unlock()
	}
	for _, sub := range subjects {
		if sub == want {
			return sub
		}
	}
	if len(subjects) > 0 {
		return subjects[0]
	}
	return ""
}

// compile compiles a schema and the schemas it references.
func (c *cache) compile(ctx context.Context, s sr.Schema) (*compiled, error) {
	if s.Type != sr.TypeAvro && s.Type != sr.TypeProtobuf && s.Type != sr.TypeJSON {
		return nil, &verdictError{fmt.Errorf("schema type %q is not supported", s.Type)}
	}
	var texts []string           // depth first, for Avro
	files := map[string]string{} // by reference name, for Protobuf and JSON Schema
	if err := c.collect(ctx, s.References, map[string]bool{}, func(name string, ss sr.SubjectSchema) {
		texts = append(texts, ss.Schema.Schema)
		files[name] = ss.Schema.Schema
	}); err != nil {
		return nil, err
	}
	out := &compiled{typ: s.Type}
	var what string
	var err error
	switch s.Type {
	case sr.TypeAvro:
		what = "avro schema"
		out.avro, err = compileAvro(s.Schema, texts)
	case sr.TypeProtobuf:
		what = "protobuf schema"
		out.proto, err = compileProto(ctx, s.Schema, files)
	case sr.TypeJSON:
		what = "JSON Schema"
		out.json, err = compileJSONSchema(s.Schema, files)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// maxRefs bounds the references followed for one schema.
const maxRefs = 1000

// collect fetches references depth first (a reference's own references
// before it) and calls add for each, once per subject and version.
func (c *cache) collect(ctx context.Context, refs []sr.SchemaReference, seen map[string]bool, add func(name string, ss sr.SubjectSchema)) error {
	for _, r := range refs {
		key := fmt.Sprintf("%s@%d", r.Subject, r.Version)
		if seen[key] {
			continue
		}
		seen[key] = true
		if len(seen) > maxRefs {
			return &verdictError{fmt.Errorf("more than %d schema references", maxRefs)}
		}
		c.mu.Lock()
		ss, ok := c.refs[key]
		c.mu.Unlock()
		if !ok {
			var err error
			ss, err = c.reg.SchemaByVersion(ctx, r.Subject, r.Version)
			if err != nil {
				err = classify(err)
				var v *verdictError
				if errors.As(err, &v) {
					return &verdictError{fmt.Errorf("reference %q (subject %s version %d): %w", r.Name, r.Subject, r.Version, v.err)}
				}
				return err
			}
			c.mu.Lock()
			c.refs[key] = ss
			c.mu.Unlock()
		}
		if err := c.collect(ctx, ss.References, seen, add); err != nil {
			return err
		}
		add(r.Name, ss)
	}
	return nil
}
