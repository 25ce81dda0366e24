// Command testplugin is a native plugin for plugins/native's tests. Its kind
// comes from env STREAMD_TESTPLUGIN_KIND (transform, codec, sink; default
// transform); STREAMD_TESTPLUGIN_PROTOCOL=2 makes it speak only a protocol v2
// that no streamd knows. Its config:
//
//	reject            string: Init refuses the config with this reason
//	stderr            string: printed to stderr at Init, also logged as JSON
//	crash_file        path: a Process call that finds this file removes it and exits 3
//	crash_always      bool: every Process call exits 3
//	hang_on_shutdown  bool: Shutdown and the process's exit hang forever
//	sleep_ms          number: every Process call sleeps this long first
//	sink_file         path: the sink appends each record's value as a line
//
// Transform: value "poison" is rejected, "drop" dropped, "keep" kept, "dup"
// doubled; any other value is upper-cased with header "seen: 1" appended.
// Codec: Encode upper-cases, Decode lower-cases, "poison" is rejected.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pluginv1 "github.com/streamd/streamd/proto/streamd/plugin/v1"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/sdk/go/native"
)

type config struct {
	Reject         string `json:"reject"`
	Stderr         string `json:"stderr"`
	CrashFile      string `json:"crash_file"`
	CrashAlways    bool   `json:"crash_always"`
	HangOnShutdown bool   `json:"hang_on_shutdown"`
	SleepMS        int    `json:"sleep_ms"`
	SinkFile       string `json:"sink_file"`
}

type state struct{ cfg config }

func (s *state) init(_ context.Context, raw json.RawMessage) error {
	if err := json.Unmarshal(raw, &s.cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if s.cfg.Reject != "" {
		return errors.New(s.cfg.Reject)
	}
	if s.cfg.Stderr != "" {
		fmt.Fprintln(os.Stderr, s.cfg.Stderr)
		native.Logger().Warn("structured "+s.cfg.Stderr, "answer", 42)
	}
	return nil
}

// before runs at the start of every Process call.
func (s *state) before() {
	if s.cfg.CrashAlways {
		os.Exit(3)
	}
	if s.cfg.CrashFile != "" {
		if err := os.Remove(s.cfg.CrashFile); err == nil {
			os.Exit(3)
		}
	}
	if s.cfg.SleepMS > 0 {
		time.Sleep(time.Duration(s.cfg.SleepMS) * time.Millisecond)
	}
}

func (s *state) transform(_ context.Context, r record.Record) native.Result {
	s.before()
	switch string(r.Value) {
	case "poison":
		return native.Result{Err: errors.New("poison record")}
	case "drop":
		return native.Result{}
	case "keep":
		return native.Result{Keep: true}
	case "dup":
		return native.Result{Records: []record.Record{r, r}}
	}
	if r.Value != nil {
		r.Value = bytes.ToUpper(r.Value)
	}
	r.Headers = append(r.Headers, record.Header{Key: "seen", Value: []byte("1")})
	return native.Result{Records: []record.Record{r}}
}

type codec struct{ s *state }

func (c codec) apply(payloads [][]byte, f func([]byte) []byte) ([]native.Payload, error) {
	c.s.before()
	out := make([]native.Payload, len(payloads))
	for i, p := range payloads {
		if string(p) == "poison" {
			out[i].Err = errors.New("poison payload")
			continue
		}
		out[i].Data = f(p)
	}
	return out, nil
}

func (c codec) Encode(_ context.Context, p [][]byte) ([]native.Payload, error) {
	return c.apply(p, bytes.ToUpper)
}

func (c codec) Decode(_ context.Context, p [][]byte) ([]native.Payload, error) {
	return c.apply(p, bytes.ToLower)
}

type sink struct{ s *state }

func (k sink) Write(_ context.Context, batch []record.Record) ([]error, error) {
	k.s.before()
	errs := make([]error, len(batch))
	f, err := os.OpenFile(k.s.cfg.SinkFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	for i, r := range batch {
		if string(r.Value) == "poison" {
			errs[i] = errors.New("poison record")
			continue
		}
		if _, err := fmt.Fprintf(f, "%s\n", r.Value); err != nil {
			return nil, err
		}
	}
	return errs, f.Sync()
}

func main() {
	if os.Getenv("STREAMD_TESTPLUGIN_PROTOCOL") == "2" {
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  pluginv1.Handshake(),
			VersionedPlugins: map[int]plugin.PluginSet{2: {pluginv1.PluginSetName: &pluginv1.GRPCPlugin{Impl: &pluginv1.UnimplementedPluginServer{}}}},
			GRPCServer:       func(o []grpc.ServerOption) *grpc.Server { return grpc.NewServer(o...) },
		})
		return
	}
	s := &state{}
	p := native.Plugin{
		Name:    "testplugin",
		Version: "0.0.1",
		Init:    s.init,
		Close: func(ctx context.Context) error {
			if s.cfg.HangOnShutdown {
				signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
				time.Sleep(time.Hour)
			}
			return nil
		},
	}
	switch os.Getenv("STREAMD_TESTPLUGIN_KIND") {
	case "codec":
		p.Codec = codec{s}
	case "sink":
		p.Sink = sink{s}
	default:
		p.Transformer = native.TransformFunc(s.transform)
	}
	native.Serve(p)
	if s.cfg.HangOnShutdown {
		// A plugin whose exit hangs (not a deadlock: the runtime would end that).
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		time.Sleep(time.Hour)
	}
}
