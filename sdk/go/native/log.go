package native

import (
	"log/slog"
	"os"
)

// Logger returns a logger that writes JSON lines to stderr in the form
// streamd reads from a plugin ({"@level":"info","@message":"...",...}): each
// line lands in streamd's log at its level, tagged with the plugin's name.
func Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				a.Key = "@timestamp"
			case slog.LevelKey:
				a.Key = "@level"
				if l, ok := a.Value.Any().(slog.Level); ok {
					a.Value = slog.StringValue(levelName(l))
				}
			case slog.MessageKey:
				a.Key = "@message"
			}
			return a
		},
	}))
}

func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	default:
		return "error"
	}
}
