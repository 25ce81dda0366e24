package app

import (
	"fmt"
	"log/slog"

	"github.com/streamd/streamd/internal/daemon/admin"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/daemon/kafkaconf"
	"github.com/streamd/streamd/internal/x/tlsconf"
	"github.com/streamd/streamd/pipeline/kafka"
)

// adminOptions turns [admin] into the admin server's options, reading the
// tokens file and the TLS files (so that lint reports them).
func adminOptions(cfg *config.Config, log *slog.Logger) ([]admin.Option, error) {
	ac := &cfg.Admin
	opts := []admin.Option{
		admin.WithProbesOpen(ac.ProbesOpen),
		admin.WithAllowUnauthenticated(ac.AllowUnauthenticated),
		admin.WithTimeouts(admin.Timeouts{ReadHeader: ac.ReadHeaderTimeout.Duration, Read: ac.ReadTimeout.Duration,
			Write: ac.WriteTimeout.Duration, Idle: ac.IdleTimeout.Duration}),
		admin.WithMaxHeaderBytes(ac.MaxHeaderBytes),
		admin.WithMaxBodyBytes(ac.MaxBodyBytes),
		admin.WithHosts(ac.Hosts...),
		admin.WithStreamLimits(ac.MaxStreams, ac.MaxStreamsPerToken),
	}
	if t := ac.TLS; t != nil {
		tc, err := tlsconf.Server(tlsconf.Files{CertFile: t.CertFile, KeyFile: t.KeyFile, CAFile: t.ClientCAFile, MinVersion: t.MinVersion})
		if err != nil {
			return nil, fmt.Errorf("%s: [admin.tls]: %w", cfg.File, err)
		}
		opts = append(opts, admin.WithTLS(tc))
	}
	if au := ac.Auth; au != nil {
		toks, err := admin.LoadTokens(au.TokensFile, log.With("component", "admin"))
		if err != nil {
			return nil, fmt.Errorf("%s: [admin.auth] tokens_file: %w", cfg.File, err)
		}
		opts = append(opts, admin.WithTokens(toks))
	}
	if ac.AllowUnauthenticated && ac.Auth == nil {
		log.Warn("admin server without auth (allow_unauthenticated = true): whoever reaches it can change journals and fluid groups", "listen", ac.Listen)
	}
	return opts, nil
}

// kafkaCluster returns the Kafka cluster a pipeline names ("" = [kafka]),
// made once per cluster and shared by its clients.
func (a *App) kafkaCluster(name string) (*kafka.Cluster, error) {
	a.cl.mu.Lock()
	defer a.cl.mu.Unlock()
	if name == "" {
		name = config.DefaultCluster
	}
	if c, ok := a.cl.clusters[name]; ok {
		return c, nil
	}
	cc := a.cfg.Cluster(name)
	if cc == nil {
		return nil, fmt.Errorf("no [kafka.clusters.%s] is configured", name)
	}
	c, err := kafkaconf.Cluster(cc, a.log)
	if err != nil {
		return nil, err // the caller names the file
	}
	if name == config.DefaultCluster && a.cfg.Kafka.Embedded != nil {
		// The embedded broker runs here and knows why it cannot write
		// (its kfake answers UNKNOWN_SERVER_ERROR and nothing more).
		top := a.top()
		c.StorageErr = func() error {
			if b := top.brokerp.Load(); b != nil {
				return b.StorageError()
			}
			return nil
		}
	}
	a.cl.clusters[name] = c
	return c, nil
}

// partitions is the partition count of topics created on a cluster.
func (a *App) partitions(name string) int32 {
	if cc := a.cfg.Cluster(name); cc != nil {
		return cc.Partitions
	}
	return a.cfg.Kafka.Partitions
}
