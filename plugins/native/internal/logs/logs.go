// Package logs routes a native plugin's output into streamd's log/slog
// logger: its stderr and stdout lines (LineWriter) and go-plugin's own
// messages (HCLog, an hclog.Logger on top of slog).
package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// LineWriter logs each line written to it as one slog record with the
// attribute stream=Stream. A line that is a JSON object with "@message" (the
// hclog JSON format the Go SDK writes) is logged at its "@level" with its
// other fields as attributes; any other line is logged at info, or at error
// from a line starting "panic: " or "fatal error: " on.
type LineWriter struct {
	mu      sync.Mutex
	logger  *slog.Logger
	stream  string
	buf     []byte
	inPanic bool
}

// maxLine caps a buffered partial line; a longer line is logged in pieces.
const maxLine = 64 << 10

// NewLineWriter returns a LineWriter that logs to logger (nil discards).
func NewLineWriter(logger *slog.Logger, stream string) *LineWriter {
	return &LineWriter{logger: logger, stream: stream}
}

// SetLogger replaces the logger, e.g. to tag lines with the plugin's name
// once its manifest is known.
func (w *LineWriter) SetLogger(l *slog.Logger) {
	w.mu.Lock()
	w.logger = l
	w.mu.Unlock()
}

// Write implements io.Writer.
func (w *LineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			if len(w.buf) >= maxLine {
				w.emit(w.buf)
				w.buf = w.buf[:0]
			}
			break
		}
		if len(w.buf) > 0 {
			w.buf = append(w.buf, p[:i]...)
			w.emit(w.buf)
			w.buf = w.buf[:0]
		} else {
			w.emit(p[:i])
		}
		p = p[i+1:]
	}
	return n, nil
}

// Flush logs a buffered partial line.
func (w *LineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = w.buf[:0]
	}
}

func (w *LineWriter) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if w.logger == nil || len(bytes.TrimSpace(line)) == 0 {
		return
	}
	ctx := context.Background()
	if line[0] == '{' {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			if msg, ok := m["@message"].(string); ok {
				lvl, _ := m["@level"].(string)
				attrs := []slog.Attr{slog.String("stream", w.stream)}
				for k, v := range m {
					if !strings.HasPrefix(k, "@") {
						attrs = append(attrs, slog.Any(k, v))
					}
				}
				w.logger.LogAttrs(ctx, parseLevel(lvl), msg, attrs...)
				return
			}
		}
	}
	s := string(line)
	if strings.HasPrefix(s, "panic: ") || strings.HasPrefix(s, "fatal error: ") {
		w.inPanic = true
	}
	lvl := slog.LevelInfo
	if w.inPanic {
		lvl = slog.LevelError
	}
	w.logger.LogAttrs(ctx, lvl, s, slog.String("stream", w.stream))
}

func parseLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "trace", "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// HCLog is an hclog.Logger that writes to a slog.Logger, so go-plugin's own
// messages land in streamd's log. Its child named Quiet logs nothing: go-plugin
// logs a plugin's stderr lines through a child named after the binary, and
// those lines already reach the log through a LineWriter.
type HCLog struct {
	logger *slog.Logger
	name   string
	quiet  string
	off    bool
	args   []any
}

// NewHCLog returns an HCLog writing to logger (nil discards); its child
// Named(quiet) is silent.
func NewHCLog(logger *slog.Logger, quiet string) *HCLog {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &HCLog{logger: logger, quiet: quiet}
}

var _ hclog.Logger = (*HCLog)(nil)

func toSlog(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// Log implements hclog.Logger.
func (h *HCLog) Log(level hclog.Level, msg string, args ...any) {
	if h.off || level == hclog.Off {
		return
	}
	all := make([]any, 0, len(h.args)+len(args)+2)
	if h.name != "" {
		all = append(all, "component", h.name)
	}
	all = append(all, h.args...)
	all = append(all, args...)
	// go-plugin names the binary "plugin"; the logger already has a
	// plugin attribute (the plugin's name), so call it "path".
	for i := 0; i+1 < len(all); i += 2 {
		if k, ok := all[i].(string); ok && k == "plugin" {
			all[i] = "path"
		}
	}
	h.logger.Log(context.Background(), toSlog(level), msg, all...)
}

// Trace implements hclog.Logger.
func (h *HCLog) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }

// Debug implements hclog.Logger.
func (h *HCLog) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }

// Info implements hclog.Logger.
func (h *HCLog) Info(msg string, args ...any) { h.Log(hclog.Info, msg, args...) }

// Warn implements hclog.Logger.
func (h *HCLog) Warn(msg string, args ...any) { h.Log(hclog.Warn, msg, args...) }

// Error implements hclog.Logger.
func (h *HCLog) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *HCLog) enabled(l hclog.Level) bool {
	return !h.off && h.logger.Enabled(context.Background(), toSlog(l))
}

// IsTrace implements hclog.Logger.
func (h *HCLog) IsTrace() bool { return h.enabled(hclog.Trace) }

// IsDebug implements hclog.Logger.
func (h *HCLog) IsDebug() bool { return h.enabled(hclog.Debug) }

// IsInfo implements hclog.Logger.
func (h *HCLog) IsInfo() bool { return h.enabled(hclog.Info) }

// IsWarn implements hclog.Logger.
func (h *HCLog) IsWarn() bool { return h.enabled(hclog.Warn) }

// IsError implements hclog.Logger.
func (h *HCLog) IsError() bool { return h.enabled(hclog.Error) }

// ImpliedArgs implements hclog.Logger.
func (h *HCLog) ImpliedArgs() []any { return h.args }

// With implements hclog.Logger.
func (h *HCLog) With(args ...any) hclog.Logger {
	c := *h
	c.args = append(append([]any(nil), h.args...), args...)
	return &c
}

// Name implements hclog.Logger.
func (h *HCLog) Name() string { return h.name }

// Named implements hclog.Logger.
func (h *HCLog) Named(name string) hclog.Logger {
	full := name
	if h.name != "" {
		full = h.name + "." + name
	}
	return h.ResetNamed(full)
}

// ResetNamed implements hclog.Logger.
func (h *HCLog) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	c.off = h.off || (h.quiet != "" && name == h.quiet)
	return &c
}

// SetLevel implements hclog.Logger; the level is the slog handler's.
func (h *HCLog) SetLevel(hclog.Level) {}

// GetLevel implements hclog.Logger.
func (h *HCLog) GetLevel() hclog.Level {
	switch {
	case h.off:
		return hclog.Off
	case h.IsDebug():
		return hclog.Debug
	case h.IsInfo():
		return hclog.Info
	case h.IsWarn():
		return hclog.Warn
	default:
		return hclog.Error
	}
}

// StandardLogger implements hclog.Logger.
func (h *HCLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

// StandardWriter implements hclog.Logger.
func (h *HCLog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	if h.off {
		return io.Discard
	}
	return NewLineWriter(h.logger, "go-plugin")
}
