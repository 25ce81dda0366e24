package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

func (c *Config) setDefaults() {
	if c.DataDir == "" {
		c.DataDir = "data"
	}
	c.DataDir = c.Resolve(c.DataDir)
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Kafka.Partitions == 0 {
		c.Kafka.Partitions = 4
	}
	if c.Kafka.ClientID == "" {
		c.Kafka.ClientID = "streamd"
	}
	if e := c.Kafka.Embedded; e != nil {
		if e.Listen == "" {
			e.Listen = "127.0.0.1:9092"
		}
		if e.DataDir == "" {
			e.DataDir = filepath.Join(c.DataDir, "broker")
		} else {
			e.DataDir = c.Resolve(e.DataDir)
		}
		if len(c.Kafka.Brokers) == 0 {
			c.Kafka.Brokers = []string{e.Listen}
		}
	}
	if c.Plugins.CacheDir == "" {
		c.Plugins.CacheDir = filepath.Join(c.DataDir, "wasm-cache")
	} else {
		c.Plugins.CacheDir = c.Resolve(c.Plugins.CacheDir)
	}
	if c.Plugins.MaxMemoryPages == 0 {
		c.Plugins.MaxMemoryPages = 256 // 16 MiB
	}
	if c.Plugins.Watch == nil {
		c.Plugins.Watch = &Duration{time.Second}
	}
	if c.Plugins.Timeout.Duration == 0 {
		c.Plugins.Timeout.Duration = 5 * time.Second
	}
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		if p.MaxInFlight == 0 {
			p.MaxInFlight = 50000
		}
		if p.ShutdownTimeout.Duration == 0 {
			p.ShutdownTimeout.Duration = 30 * time.Second
		}
		if p.CommitInterval == nil {
			p.CommitInterval = &Duration{time.Second}
		}
		if p.Workers == 0 {
			p.Workers = 2
		}
		if p.Batch.MaxRecords == 0 {
			p.Batch.MaxRecords = 1024
		}
		if p.Batch.MaxBytes == 0 {
			p.Batch.MaxBytes = 1 << 20
		}
		if p.Batch.Linger.Duration == 0 {
			p.Batch.Linger.Duration = 5 * time.Millisecond
		}
		if p.Errors.Policy == "" {
			p.Errors.Policy = "stop"
		}
		if p.Errors.RetryInitial.Duration == 0 {
			p.Errors.RetryInitial.Duration = 100 * time.Millisecond
		}
		if p.Errors.RetryMax.Duration == 0 {
			p.Errors.RetryMax.Duration = 10 * time.Second
		}
		if p.Source.Type == "kafka" && p.Source.Start == "" {
			p.Source.Start = "earliest"
		}
		if p.Source.Type == "generate" && p.Source.Keys == 0 {
			p.Source.Keys = 1000
		}
		if p.Sink.Compression == "" {
			p.Sink.Compression = "none"
		}
		for j := range p.Transforms {
			s := &p.Transforms[j]
			if s.Name == "" {
				s.Name = fmt.Sprintf("%s-%d", s.Type, j)
			}
		}
	}
	c.schemaRegistryDefaults()
	if c.Journal != nil && c.Journal.ExpiryInterval.Duration == 0 {
		c.Journal.ExpiryInterval.Duration = time.Minute
	}
	if f := c.Fluid; f != nil {
		if f.Metadata == "" {
			f.Metadata = ".fluid"
		}
		f.Metadata = c.Resolve(f.Metadata)
		if f.StateTopic == "" {
			f.StateTopic = "_streamd_fluid_state"
		}
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

func oneOf(v string, allowed ...string) bool { return slices.Contains(allowed, v) }

func (c *Config) validate() error {
	var errs []error
	bad := func(path, format string, args ...any) { errs = append(errs, c.errorf(path, format, args...)) }
	if !oneOf(c.Log.Level, "debug", "info", "warn", "error") {
		bad("log.level", "must be debug, info, warn or error, not %q", c.Log.Level)
	}
	if !oneOf(c.Log.Format, "text", "json") {
		bad("log.format", "must be text or json, not %q", c.Log.Format)
	}
	if len(c.Kafka.Brokers) == 0 {
		bad("kafka", "set kafka.brokers or [kafka.embedded]")
	}
	if len(c.Pipelines) == 0 && c.Journal == nil && c.Fluid == nil {
		bad("pipeline", "no [[pipeline]] defined")
	}
	seen := map[string]bool{}
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		at := fmt.Sprintf("pipeline[%d]", i)
		switch {
		case p.Name == "":
			bad(at+".name", "required key is missing")
		case !nameRE.MatchString(p.Name):
			bad(at+".name", "%q: use letters, digits, '.', '_' and '-'", p.Name)
		case seen[p.Name]:
			bad(at+".name", "pipeline %q is defined twice", p.Name)
		}
		seen[p.Name] = true
		s := &p.Source
		switch s.Type {
		case "":
			bad(at+".source.type", "required key is missing (kafka, generate or file)")
		case "kafka":
			if len(s.Topics) == 0 {
				bad(at+".source.topics", "required for a kafka source")
			}
			if s.Group == "" {
				bad(at+".source.group", "required for a kafka source")
			}
			if !oneOf(s.Start, "earliest", "latest") {
				bad(at+".source.start", "must be earliest or latest, not %q", s.Start)
			}
		case "generate":
			if s.Rate < 0 || s.Count < 0 || s.Keys < 0 {
				bad(at+".source", "rate, count and keys must not be negative")
			}
		case "file":
			if s.Path == "" {
				bad(at+".source.path", "required for a file source")
			}
		default:
			bad(at+".source.type", "unknown source type %q (want kafka, generate or file)", s.Type)
		}
		if s.Fluid != nil && s.Type != "kafka" {
			bad(at+".source.fluid", "only a kafka source can be a fluid consumer")
		}
		for j := range p.Transforms {
			t := &p.Transforms[j]
			tat := fmt.Sprintf("%s.transform[%d]", at, j)
			switch t.Type {
			case "wasm", "native":
				if (t.Path == "") == (t.Plugin == "") {
					bad(tat, "set exactly one of path or plugin")
				}
			case "codec":
				if (t.Codec == "") == (t.Plugin == "" && t.Path == "") {
					bad(tat, "set exactly one of codec (built in) or plugin")
				}
				if !oneOf(t.Mode, "encode", "decode") {
					bad(tat+".mode", "must be encode or decode, not %q", t.Mode)
				}
			case "schema":
				c.validateSchemaStage(t, tat, bad)
			case "":
				bad(tat+".type", "required key is missing (wasm, native, codec or schema)")
			default:
				bad(tat+".type", "unknown stage type %q (want wasm, native, codec or schema)", t.Type)
			}
		}
		k := &p.Sink
		switch k.Type {
		case "":
			bad(at+".sink.type", "required key is missing")
		case "kafka":
			if k.Topic == "" {
				bad(at+".sink.topic", "required for a kafka sink")
			}
			if !oneOf(k.Compression, "none", "gzip", "snappy", "lz4", "zstd") {
				bad(at+".sink.compression", "must be none, gzip, snappy, lz4 or zstd, not %q", k.Compression)
			}
			if !oneOf(k.Partition, "", "same", "hash") {
				bad(at+".sink.partition", "must be \"same\" or \"hash\" (the default), not %q", k.Partition)
			}
		case "file":
			if k.Path == "" {
				bad(at+".sink.path", "required for a file sink")
			}
		case "stdout", "drop":
		case "wasm", "native":
			if k.Plugin == "" {
				bad(at+".sink.plugin", "required for a %s sink", k.Type)
			}
		case "journal":
			if c.Journal == nil || c.Journal.Store == "" {
				bad(at+".sink.type", "a journal sink needs [journal] store = ...")
			}
		default:
			bad(at+".sink.type", "unknown sink type %q (want kafka, file, stdout, drop, wasm, native or journal)", k.Type)
		}
		switch p.Errors.Policy {
		case "dlq":
			if p.Errors.DLQTopic == "" {
				bad(at+".errors.dlq_topic", "required with policy = \"dlq\"")
			}
		case "stop", "drop":
		default:
			bad(at+".errors.policy", "must be dlq, stop or drop, not %q", p.Errors.Policy)
		}
		if p.Batch.MaxRecords < 1 || p.Batch.MaxBytes < 1 {
			bad(at+".batch", "max_records and max_bytes must be positive")
		}
		if p.Workers < 1 || p.MaxInFlight < p.Batch.MaxRecords {
			bad(at, "workers must be >= 1 and max_in_flight >= batch.max_records")
		}
	}
	c.validateSchemaRegistry(bad)
	if j := c.Journal; j != nil && j.Store != "" {
		if !strings.HasPrefix(j.Store, "sqlite:") && !strings.HasPrefix(j.Store, "postgres://") &&
			!strings.HasPrefix(j.Store, "postgresql://") && !strings.HasPrefix(j.Store, "wasm:") && !strings.HasPrefix(j.Store, "native:") {
			bad("journal.store", "want sqlite:PATH, postgres://..., wasm:PATH or native:PATH, not %q", j.Store)
		}
	}
	return errors.Join(errs...)
}
