package schema

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/plugins"
)

// GuestRegistry serves a Wasm module's schema registry imports (a Redpanda
// data transform's redpanda_schema_registry) with reg: its answers as
// plugins.RegistrySchema, and its errors sorted as the schema stages sort
// them: a refusal about what was asked (404, 409, 422) as it is, anything
// else (the registry cannot be reached, 5xx, 401/403, 429) marked
// plugins.Transient.
func GuestRegistry(reg Registry) plugins.SchemaRegistry { return guestRegistry{reg} }

type guestRegistry struct{ reg Registry }

func (g guestRegistry) SchemaByID(ctx context.Context, id int) (plugins.RegistrySchema, error) {
	s, err := g.reg.SchemaByID(ctx, id)
	if err != nil {
		return plugins.RegistrySchema{}, guestErr(err)
	}
	out := fromSR(s)
	out.ID = id
	return out, nil
}

func (g guestRegistry) SchemaByVersion(ctx context.Context, subject string, version int) (plugins.RegistrySchema, error) {
	s, err := g.reg.SchemaByVersion(ctx, subject, version)
	if err != nil {
		return plugins.RegistrySchema{}, guestErr(err)
	}
	out := fromSR(s.Schema)
	out.ID, out.Subject, out.Version = s.ID, s.Subject, s.Version
	return out, nil
}

func (g guestRegistry) CreateSchema(ctx context.Context, subject string, s plugins.RegistrySchema) (plugins.RegistrySchema, error) {
	in := sr.Schema{Schema: s.Schema}
	switch s.Type {
	case "PROTOBUF":
		in.Type = sr.TypeProtobuf
	case "JSON":
		in.Type = sr.TypeJSON
	default:
		in.Type = sr.TypeAvro
	}
	for _, r := range s.References {
		in.References = append(in.References, sr.SchemaReference{Name: r.Name, Subject: r.Subject, Version: r.Version})
	}
	id, err := g.reg.RegisterSchema(ctx, subject, in, -1, -1)
	if err != nil {
		return plugins.RegistrySchema{}, guestErr(err)
	}
	s.ID, s.Subject = id, subject
	return s, nil
}

func fromSR(s sr.Schema) plugins.RegistrySchema {
	out := plugins.RegistrySchema{Schema: s.Schema, Type: "AVRO"}
	switch s.Type {
	case sr.TypeProtobuf:
		out.Type = "PROTOBUF"
	case sr.TypeJSON:
		out.Type = "JSON"
	}
	for _, r := range s.References {
		out.References = append(out.References, plugins.RegistryReference{Name: r.Name, Subject: r.Subject, Version: r.Version})
	}
	return out
}

// guestErr sorts a registry error (classify): a verdict's own error, or
// the transient one.
func guestErr(err error) error {
	err = classify(err)
	var v *verdictError
	if errors.As(err, &v) {
		return v.err
	}
	return err
}
