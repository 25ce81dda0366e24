package app

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/daemon/dlq"
	"github.com/streamd/streamd/internal/daemon/kafkaconf"
)

// KafkaOpts are the franz-go options of a client of cfg's Kafka cluster
// name ("" = [kafka]): brokers, client id, TLS, SASL. For the tools that
// read and write topics themselves (streamd dlq).
func KafkaOpts(cfg *config.Config, name string) ([]kgo.Opt, error) {
	cc := cfg.Cluster(name)
	if cc == nil {
		return nil, fmt.Errorf("%s: no [kafka.clusters.%s] is configured", cfg.File, name)
	}
	c, err := kafkaconf.Cluster(cc, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: kafka cluster %q: %w", cfg.File, cc.Name, err)
	}
	return c.Options(), nil
}

// DLQReader returns a reader of the dead-letter topic of the pipeline
// named name in cfg (on its errors.dlq_cluster), or an error naming the
// pipelines that have one.
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
		ko, err := KafkaOpts(cfg, pc.Errors.DLQCluster)
		if err != nil {
			return nil, err
		}
		return dlq.NewReader(pc.Errors.DLQTopic, append([]dlq.ReaderOption{dlq.WithClientOpts(ko...)}, opts...)...), nil
	}
	slices.Sort(with)
	return nil, fmt.Errorf("%s: no pipeline %q (pipelines with a dead-letter topic: %v)", cfg.File, name, with)
}

// SourceOpts are the franz-go options of a client of the pipeline's
// source cluster, where `streamd dlq replay --to source` writes.
func SourceOpts(cfg *config.Config, name string) ([]kgo.Opt, error) {
	for i := range cfg.Pipelines {
		if pc := &cfg.Pipelines[i]; pc.Name == name {
			return KafkaOpts(cfg, pc.Source.Cluster)
		}
	}
	return nil, fmt.Errorf("%s: no pipeline %q", cfg.File, name)
}

// clusterOpts are the options of the app's clients of cluster name.
func (a *App) clusterOpts(name string) ([]kgo.Opt, error) {
	c, err := a.kafkaCluster(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.cfg.File, err)
	}
	return c.Options(), nil
}
