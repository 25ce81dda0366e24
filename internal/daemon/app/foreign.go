package app

import (
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/schema"
)

// foreignOpts tells a Wasm transform stage's module what a module of
// another host's ABI asks of its stage (plugins.WasmOptions; a streamd
// plugin reads none of it): the topic it reads (a Redpanda transform's
// REDPANDA_INPUT_TOPIC: the kafka source's first topic), the outputs it
// may write to by name (REDPANDA_OUTPUT_TOPIC_N: today the pipeline's one
// sink, named by its topic, or by its type for a sink that is not kafka),
// and the schema registry its schema registry imports use (the stage's
// registry, or [schema_registry]), when one is configured.
func (a *App) foreignOpts(o *plugins.Options, pc *config.Pipeline, s *config.Stage) error {
	switch src := &pc.Source; {
	case src.Type == "kafka" && len(src.Topics) > 0:
		o.Wasm.Input = src.Topics[0]
	case src.Type == "kafka" && src.TopicsRegex != "":
		o.Wasm.Input = src.TopicsRegex
	default:
		o.Wasm.Input = src.Type
	}
	if pc.Sink.Type == "kafka" {
		o.Wasm.Outputs = []string{pc.Sink.Topic}
	} else {
		o.Wasm.Outputs = []string{pc.Sink.Type}
	}
	if s.Type == "native" || a.cfg.Registry(s.Registry) == nil {
		return nil
	}
	cl, err := a.registryClient(s.Registry)
	if err != nil {
		return err
	}
	o.Wasm.SchemaRegistry = schema.GuestRegistry(cl)
	return nil
}
