package app

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/config"
	"github.com/streamd/streamd/internal/dlq"
)

// KafkaOpts are the franz-go options of a client of cfg's [kafka]
// brokers, for the tools that read and write topics themselves (streamd
// dlq).
func KafkaOpts(cfg *config.Config) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(cfg.Kafka.Brokers...), kgo.ClientID(cfg.Kafka.ClientID)}
}

// DLQReader returns a reader of the dead-letter topic of the pipeline
// named name in cfg, or an error naming the pipelines that have one.
func DLQReader(cfg *config.Config, name string, opts ...dlq.ReaderOption) (*dlq.Reader, error) {
	var with []string
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		if pc.Errors.Policy == "dlq" {
			with = append(with, pc.Name)
		}
		if pc.Name != name {
			continue
		}
		if pc.Errors.Policy != "dlq" {
			return nil, fmt.Errorf("%s: pipeline %q has errors.policy = %q, no dead-letter topic", cfg.File, name, pc.Errors.Policy)
		}
		return dlq.NewReader(pc.Errors.DLQTopic, append([]dlq.ReaderOption{dlq.WithClientOpts(KafkaOpts(cfg)...)}, opts...)...), nil
	}
	slices.Sort(with)
	return nil, fmt.Errorf("%s: no pipeline %q (pipelines with a dead-letter topic: %v)", cfg.File, name, with)
}
