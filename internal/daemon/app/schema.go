package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/x/tlsconf"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins/schema"
)

// registryClient returns the pkg/sr client of a [schema_registry] (name ""
// is the default one), made once per registry and shared by its stages.
func (a *App) registryClient(name string) (*sr.Client, error) {
	a.cl.mu.Lock()
	defer a.cl.mu.Unlock()
	if cl := a.cl.registries[name]; cl != nil {
		return cl, nil
	}
	rc := a.cfg.Registry(name)
	if rc == nil {
		return nil, fmt.Errorf("no schema registry %q is configured", name)
	}
	cl, err := NewRegistryClient(rc)
	if err != nil {
		label := "[schema_registry]"
		if name != "" {
			label = "[schema_registry." + name + "]"
		}
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	a.cl.registries[name] = cl
	a.log.Info("schema registry", "name", name, "registry", *rc)
	if rc.TLS != nil && rc.TLS.InsecureSkipVerify {
		a.log.Warn("TLS certificate verification is OFF for this schema registry (tls.insecure_skip_verify): anyone on the path can impersonate it", "name", name, "url", rc.URL)
	}
	return cl, nil
}

// NewRegistryClient returns a franz-go pkg/sr client for rc.
func NewRegistryClient(rc *config.SchemaRegistry) (*sr.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if t := rc.TLS; t != nil {
		// The CA bundle and the client certificate are read again when
		// their files change: a rotation needs no restart.
		d, err := tlsconf.NewDialer(tlsconf.Files{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile,
			ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify})
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		tr.TLSClientConfig, tr.DialTLSContext = d.Config(), d.DialContext
	}
	opts := []sr.ClientOpt{
		sr.URLs(rc.URL),
		sr.HTTPClient(&http.Client{Transport: tr, Timeout: rc.Timeout.Duration}),
		sr.UserAgent("streamd"),
	}
	switch {
	case rc.BearerToken != "":
		opts = append(opts, sr.BearerToken(rc.BearerToken))
	case rc.Username != "":
		opts = append(opts, sr.BasicAuth(rc.Username, rc.Password))
	}
	return sr.NewClient(opts...)
}

// schemaStage builds a type = "schema" stage.
func (a *App) schemaStage(pc *config.Pipeline, s *config.Stage) (pipeline.Stage, error) {
	cl, err := a.registryClient(s.Registry)
	if err != nil {
		return pipeline.Stage{}, err
	}
	cfg := schema.Config{Key: s.Part == "key", Subject: s.Subject, Topic: s.Topic, Version: s.Version,
		Message: s.Message, AutoRegister: s.AutoRegister}
	if s.Mode == "encode" {
		cfg.Mode = schema.Encode
		// The topic-name strategies name the topic written to: the kafka
		// sink's, unless the stage says otherwise.
		if cfg.Topic == "" && pc.Sink.Type == "kafka" {
			cfg.Topic = pc.Sink.Topic
		}
	}
	switch s.SubjectStrategy {
	case "record-name":
		cfg.Strategy = schema.RecordName
	case "topic-record-name":
		cfg.Strategy = schema.TopicRecordName
	}
	if s.SchemaFile != "" {
		sch, err := schema.ReadSchemaFile(a.cfg.Resolve(s.SchemaFile), s.Format)
		if err != nil {
			return pipeline.Stage{}, fmt.Errorf("schema_file: %w", err)
		}
		cfg.Schema = sch
	}
	st, err := schema.New(cl, cfg)
	if err != nil {
		return pipeline.Stage{}, err
	}
	return pipeline.Stage{Name: s.Name, Transformer: st}, nil
}

// SchemaCheck is what CheckSchemas found for one schema stage and topic.
type SchemaCheck struct {
	Pipeline, Stage, Mode, Topic string
	schema.CheckResult
	// Err is why the subject does not resolve (nil: it does).
	Err error
}

// CheckSchemas resolves every subject the config's schema stages name, as
// their first record would, registering nothing (`streamd schema check`):
// encode stages against their topic (the stage's, else the kafka sink's),
// decode stages against each source topic's topic-name subject. It loads
// no plugin.
func CheckSchemas(ctx context.Context, cfg *config.Config, log *slog.Logger) []SchemaCheck {
	a := &App{cfg: cfg, log: log, cl: newClientCache()}
	var out []SchemaCheck
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		for j := range pc.Transforms {
			s := &pc.Transforms[j]
			if s.Type != "schema" {
				continue
			}
			base := SchemaCheck{Pipeline: pc.Name, Stage: s.Name, Mode: s.Mode}
			ps, err := a.schemaStage(pc, s)
			if err != nil {
				base.Err = err
				out = append(out, base)
				continue
			}
			st := ps.Transformer.(*schema.Stage)
			topics := []string{""}
			if s.Mode == "decode" && pc.Source.Type == "kafka" {
				topics = pc.Source.Topics
			}
			for _, topic := range topics {
				c := base
				c.Topic = topic
				c.CheckResult, c.Err = st.Check(ctx, topic)
				out = append(out, c)
			}
		}
	}
	if cfg.Fluid != nil {
		out = append(out, a.checkFluidSubjects(ctx, cfg.Fluid)...)
	}
	return out
}

// checkFluidSubjects resolves the subjects the [fluid] metadata's manifests
// name, every version folder's version of its subject (Mode "fluid", Stage
// the metadata directory): one check per topic and subject, or one failed
// check for metadata that does not load.
func (a *App) checkFluidSubjects(ctx context.Context, fc *config.Fluid) []SchemaCheck {
	base := SchemaCheck{Stage: fc.Metadata, Mode: "fluid"}
	m, _, err := a.fluidMetadata(ctx, fc)
	if err != nil {
		base.Err = err
		return []SchemaCheck{base}
	}
	var out []SchemaCheck
	for _, topic := range m.Topics() {
		var c *SchemaCheck
		first := 0
		for v := m.First(); v <= m.Last(); v++ {
			tv, err := m.Topic(topic, v)
			if err != nil || tv.Subject == "" {
				c = nil
				continue
			}
			if c == nil || c.Subject != tv.Subject {
				out = append(out, base)
				c, first = &out[len(out)-1], v
				c.Topic, c.Subject = topic, tv.Subject
			}
			c.Version = v
			c.Note = fmt.Sprintf("fluid versions %d..%d are its versions %d..%d (JSON Schema)", first, v, first, v)
		}
	}
	return out
}
