package fluid

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// Registry is the part of a Schema Registry client (franz-go's *sr.Client)
// the bridge uses: a subject's versions for metadata whose manifests name
// subjects, and the registry's compatibility check for /fluid/compatible.
type Registry interface {
	SchemaByVersion(ctx context.Context, subject string, version int) (sr.SubjectSchema, error)
	Compatibility(ctx context.Context, subjects ...string) []sr.CompatibilityResult
	CheckCompatibility(ctx context.Context, subject string, version int, s sr.Schema) (sr.CheckCompatibilityResult, error)
}

// WithRegistry gives the bridge a Schema Registry. Metadata loaded from a
// directory (WithMetadataDir) then takes the schemas of manifest topics
// that name a "subject" from it, and /fluid/compatible for such a topic is
// answered by the registry's compatibility check (RegistryCompatible)
// instead of by comparing the schemas.
func WithRegistry(r Registry) Option { return func(c *config) { c.registry = r } }

// RegistrySource returns the SchemaSource of LoadMetadataFrom that reads
// subject versions from r (JSON Schemas only; each call bounded by a
// minute).
func RegistrySource(ctx context.Context, r Registry) SchemaSource {
	return func(subject string, version int) (string, error) {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		ss, err := r.SchemaByVersion(rctx, subject, version)
		if err != nil {
			return "", err
		}
		if ss.Type != sr.TypeJSON {
			return "", fmt.Errorf("subject %s version %d is a %s schema; Fluid metadata needs JSON Schema", subject, version, ss.Type)
		}
		return ss.Schema.Schema, nil
	}
}

// ErrNoRegistryRule is RegistryCompatible's answer for a subject whose
// compatibility level (its own, else the registry's global one) is NONE:
// the registry has no rule to judge by.
var ErrNoRegistryRule = errors.New("compatibility level NONE")

// RegistryCompatible asks r whether records of topic written against
// version observed can be read by a consumer built against version
// compatible, for a topic whose versions come from a registry subject:
// under a BACKWARD level the registry checks that compatible's schema reads
// data of the subject's version observed; under FORWARD, that data of
// observed's schema is read by version compatible; under FULL, both (the
// TRANSITIVE variants the same, against that one version). A subject at
// level NONE gives ErrNoRegistryRule; a registry that cannot answer, its
// error.
func (m *Metadata) RegistryCompatible(ctx context.Context, r Registry, topic string, observed, compatible int) (bool, error) {
	o, c, err := m.topicVersions(topic, observed, compatible)
	if err != nil {
		return false, err
	}
	if o.Subject == "" || c.Subject != o.Subject {
		return false, fmt.Errorf("topic %q: versions %d and %d are not versions of one registry subject", topic, observed, compatible)
	}
	if observed == compatible {
		return true, nil
	}
	level, err := subjectLevel(ctx, r, o.Subject)
	if err != nil {
		return false, err
	}
	// The schema checked is the "new" one, the version the "existing" one.
	var schema *TopicVersion
	var from, against int
	switch level {
	case sr.CompatBackward, sr.CompatBackwardTransitive, sr.CompatFull, sr.CompatFullTransitive:
		// Can compatible's schema read the data of version observed?
		schema, from, against = c, compatible, observed
	case sr.CompatForward, sr.CompatForwardTransitive:
		// Is the data of observed's schema read by version compatible?
		schema, from, against = o, observed, compatible
	default:
		return false, fmt.Errorf("subject %s: %w", o.Subject, ErrNoRegistryRule)
	}
	res, err := r.CheckCompatibility(ctx, o.Subject, against, sr.Schema{Schema: schema.text, Type: sr.TypeJSON})
	if err != nil {
		return false, fmt.Errorf("subject %s: compatibility of version %d's schema with version %d: %w", o.Subject, from, against, err)
	}
	return res.Is, nil
}

// subjectLevel is subject's compatibility level, or the global one when
// the subject has none of its own (Confluent answers the global level with
// defaultToGlobal; Apicurio answers NONE for a subject without its own
// rule while enforcing the global one, so NONE asks the global level too).
func subjectLevel(ctx context.Context, r Registry, subject string) (sr.CompatibilityLevel, error) {
	res := r.Compatibility(sr.WithParams(ctx, sr.DefaultToGlobal), subject)
	if len(res) == 1 && res[0].Err == nil && res[0].Level != sr.CompatNone {
		return res[0].Level, nil
	}
	var serr *sr.ResponseError
	if len(res) != 1 || (res[0].Err != nil && !(errors.As(res[0].Err, &serr) && serr.StatusCode == 404)) {
		if len(res) == 1 {
			return 0, fmt.Errorf("subject %s: compatibility level: %w", subject, res[0].Err)
		}
		return 0, fmt.Errorf("subject %s: compatibility level: no answer", subject)
	}
	g := r.Compatibility(ctx)
	if len(g) != 1 || g[0].Err != nil {
		if len(g) == 1 {
			return 0, fmt.Errorf("global compatibility level: %w", g[0].Err)
		}
		return 0, errors.New("global compatibility level: no answer")
	}
	return g[0].Level, nil
}
