package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/record"
)

// CompatibilityChecker is the registry call Check uses to ask whether a
// schema would be accepted under a subject without registering it;
// *sr.Client has it.
type CompatibilityChecker interface {
	CheckCompatibility(ctx context.Context, subject string, version int, s sr.Schema) (sr.CheckCompatibilityResult, error)
}

// CheckResult is what Check found for one subject.
type CheckResult struct {
	// Subject is the subject resolved ("" for a decode stage without one).
	Subject string
	// ID and Version are the schema the stage would encode with (0 if it
	// would register a new one).
	ID, Version int
	// Note says what was found, in a line.
	Note string
}

// Check resolves the subject the stage would use for records of topic, as
// the first such record would, without registering anything: for encode,
// that the subject and schema exist (or, with auto-register, that the
// registry would accept the schema: a new subject, or compatible with its
// latest version) and that the schema compiles; for decode, the
// topic-name subject's latest version if there is one (decode needs only
// the ids in records, so a missing subject is not an error). A registry
// that cannot be reached is an error too.
func (st *Stage) Check(ctx context.Context, topic string) (CheckResult, error) {
	r := &record.Record{Topic: topic}
	if st.cfg.Mode == Decode {
		if topic == "" {
			return CheckResult{Note: "decode: schemas come by the id in each record"}, nil
		}
		subject := st.topicSubject(r)
		ss, err := st.cache.reg.SchemaByVersion(ctx, subject, -1)
		if err != nil {
			if v := (*verdictError)(nil); errors.As(classify(err), &v) {
				return CheckResult{Subject: subject, Note: "no such subject (fine for decode: records carry their schema ids)"}, nil
			}
			return CheckResult{Subject: subject}, classify(err)
		}
		if _, err := st.cache.get(ctx, ss.ID); err != nil {
			return CheckResult{Subject: subject, ID: ss.ID, Version: ss.Version}, err
		}
		return CheckResult{Subject: subject, ID: ss.ID, Version: ss.Version, Note: fmt.Sprintf("latest version %d is schema id %d (%s), compiles", ss.Version, ss.ID, ss.Type)}, nil
	}
	subject, err := st.subject(r)
	if err != nil {
		return CheckResult{}, err
	}
	res := CheckResult{Subject: subject}
	if st.cfg.Schema != nil && st.cfg.AutoRegister {
		if id, err := st.cache.reg.LookupSchema(ctx, subject, *st.cfg.Schema); err == nil {
			res.ID, res.Version = id.ID, id.Version
			res.Note = fmt.Sprintf("schema_file is registered: version %d, schema id %d", id.Version, id.ID)
			return res, nil
		}
		// Whether the subject exists, asked first: Apicurio calls any schema
		// compatible with a subject it does not have.
		if _, err := st.cache.reg.SchemaByVersion(ctx, subject, -1); err != nil {
			var re *sr.ResponseError
			if errors.As(err, &re) && re.StatusCode == 404 {
				res.Note = "new subject: schema_file will be registered as its version 1"
				return res, nil
			}
			return res, fmt.Errorf("subject %s: %w", subject, classify(err))
		}
		cc, ok := st.cache.reg.(CompatibilityChecker)
		if !ok {
			return res, errors.New("the registry client cannot check compatibility")
		}
		is, err := cc.CheckCompatibility(ctx, subject, -1, *st.cfg.Schema)
		if err != nil {
			var re *sr.ResponseError
			if errors.As(err, &re) && re.StatusCode == 404 {
				res.Note = "new subject: schema_file will be registered as its version 1"
				return res, nil
			}
			return res, fmt.Errorf("subject %s: %w", subject, classify(err))
		}
		if !is.Is {
			why := strings.Join(is.Messages, "; ")
			if why == "" {
				why = "the registry gave no reasons"
			}
			return res, fmt.Errorf("subject %s: schema_file is incompatible with the latest version (%s)", subject, why)
		}
		res.Note = "schema_file is compatible with the latest version: it will be registered"
		return res, nil
	}
	t, err := st.fetchTarget(ctx, subject)
	if err != nil {
		return res, err
	}
	res.ID = t.s.id
	res.Note = fmt.Sprintf("encodes with schema id %d (%s)", t.s.id, t.s.format())
	return res, nil
}
