package schema

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/streamd/streamd/internal/x/jsonscan"
)

// jsonSchema is a compiled JSON Schema. Its references are added to the
// compiler as resources under their reference names (the $ref values in
// the schema), both as written and resolved against the schema's own base
// URL; nothing is fetched.
type jsonSchema struct {
	sch   *jsonschema.Schema
	title string
}

// jsonBase is the base URL of a schema without $id, so that a relative
// $ref such as "address.json" resolves to a reference added under that name.
const jsonBase = "mem://streamd/schemas/"

func compileJSONSchema(text string, refs map[string]string) (*jsonSchema, error) {
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	for name, t := range refs {
		rd, err := jsonschema.UnmarshalJSON(strings.NewReader(t))
		if err != nil {
			return nil, fmt.Errorf("reference %q is not JSON: %w", name, err)
		}
		if u, err := url.Parse(name); err == nil && u.IsAbs() {
			if err := c.AddResource(name, rd); err != nil {
				return nil, fmt.Errorf("reference %q: %w", name, err)
			}
			continue
		}
		if err := c.AddResource(jsonBase+name, rd); err != nil {
			return nil, fmt.Errorf("reference %q: %w", name, err)
		}
	}
	main := jsonBase + "streamd-main.json"
	if err := c.AddResource(main, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(main)
	if err != nil {
		return nil, err
	}
	out := &jsonSchema{sch: sch}
	if m, ok := doc.(map[string]any); ok {
		out.title, _ = m["title"].(string)
	}
	return out, nil
}

// validate checks that js is one JSON document that the schema accepts.
func (s *jsonSchema) validate(js []byte) error {
	if !jsonscan.Valid(js) {
		return errors.New("value is not valid JSON")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return fmt.Errorf("value is not valid JSON: %w", err)
	}
	if err := s.sch.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("does not match the schema: %s", oneLine(ve))
		}
		return err
	}
	return nil
}

var printer = message.NewPrinter(language.English)

// oneLine flattens a validation error's tree into one line naming each
// failing place.
func oneLine(ve *jsonschema.ValidationError) string {
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			parts = append(parts, fmt.Sprintf("at %s: %s", loc, strings.TrimSpace(e.ErrorKind.LocalizedString(printer))))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(parts) > 5 {
		parts = append(parts[:5], fmt.Sprintf("and %d more", len(parts)-5))
	}
	return strings.Join(parts, "; ")
}
