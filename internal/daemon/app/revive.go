package app

import (
	"context"
	"time"

	"github.com/streamd/streamd/plugins"
)

// Reviving a pipeline by a hot reload: a pipeline that failed while the
// daemon runs on (its error policy stopped at a record, a plugin that hangs
// on every record, a stage that broke) is started again by itself when one
// of its plugins is hot reloaded, a new version of its file swapped in
// (plugins.Reloader's Reloads grows): the fix of the plugin that failed it
// is the usual reason, and the restart reads from the last committed
// offsets. It counts as an automatic restart, and like every restart it is
// an operation in line (lifecycle.go). A refused reload (a file that does
// not load) does not restart it: it shows in Status (ReloadRefused). A
// pipeline whose plugins do not reload (plugins.watch = "0s", native
// plugins) waits for `streamd ctl restart`, as before.

// reviveEvery is how often a failed pipeline's plugins are checked for a
// new version (their files are polled at plugins.watch; this only reads
// counters).
const reviveEvery = 100 * time.Millisecond

// reloadWatch is a plugin of a failed pipeline that can be hot reloaded,
// and its reload count when the pipeline failed.
type reloadWatch struct {
	r    plugins.Reloader
	name string
	base int64
}

// reloadWatches returns the plugins of loaded that can be hot reloaded.
// Called by the goroutine that ran the pipeline, before it says it ended:
// u.loaded is released only after that.
func reloadWatches(loaded []plugins.Plugin) []reloadWatch {
	var ws []reloadWatch
	for _, p := range loaded {
		if r, ok := p.(plugins.Reloader); ok {
			ws = append(ws, reloadWatch{r, p.Manifest().Name, r.Reloads()})
		}
	}
	return ws
}

// reviveOnReload waits, after u's pipeline failed with err, for one of ws
// to be reloaded, then puts the restart of u in line and waits for it; it
// ends when u was replaced (a restart by hand, a config reload) or the
// daemon stops.
func (a *App) reviveOnReload(ctx context.Context, u *unit, err error, ws []reloadWatch) {
	if len(ws) == 0 {
		return
	}
	a.log.Warn("pipeline failed; it starts again by itself when one of its plugins is hot reloaded (or: streamd ctl restart)",
		"pipeline", u.name, "err", err)
	t := time.NewTicker(reviveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		still := a.unitByName(u.name) == u && u.state == unitEnded
		a.mu.Unlock()
		if !still {
			return // replaced meanwhile
		}
		for _, w := range ws {
			if w.r.Reloads() == w.base {
				continue
			}
			a.mu.Lock()
			u.restartCause = "plugin " + w.name + " reloaded after: " + err.Error()
			a.mu.Unlock()
			a.log.Warn("plugin reloaded in a failed pipeline; starting it again", "pipeline", u.name, "plugin", w.name)
			o, serr := a.submitRevive(u)
			if serr != nil {
				return // shutting down
			}
			<-o.done
			if o.err == nil {
				return // restarted, or replaced meanwhile
			}
			// Not built (the new version of another plugin does not
			// load, say): still failed, waiting for the next reload.
			a.log.Error("restart after a plugin reload failed; waiting for the next reload", "pipeline", u.name, "err", o.err)
			for i := range ws {
				ws[i].base = ws[i].r.Reloads()
			}
			break
		}
	}
}
