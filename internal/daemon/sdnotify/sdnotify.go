package sdnotify

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/streamd/streamd/pipeline"
)

// Notifier sends a daemon's state to the service manager.
type Notifier struct {
	statuses func() []pipeline.Status
	log      *slog.Logger
	send     func(state string) error
	watchdog time.Duration // WatchdogSec; 0 off
	tick     time.Duration

	mu        sync.Mutex
	ready     bool // READY=1 was sent
	reloading bool
	note      string // the last refused reload, for STATUS
	status    string // last STATUS sent
	wedged    string // pipeline the watchdog waits for, "" none
	lastPing  time.Time
}

// New returns a Notifier for the pipelines statuses returns, or nil when
// the process was not started by a service manager (NOTIFY_SOCKET unset).
// The watchdog interval is WATCHDOG_USEC, when systemd set it for this
// process.
func New(statuses func() []pipeline.Status, log *slog.Logger) *Notifier {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &Notifier{statuses: statuses, log: log, tick: 250 * time.Millisecond, send: func(state string) error {
		_, err := daemon.SdNotify(false, state)
		return err
	}}
	wd, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("systemd watchdog settings not understood; no watchdog pings", "err", err)
	}
	n.watchdog = wd
	n.tick = min(n.tick, max(wd/4, 10*time.Millisecond))
	return n
}

func (n *Notifier) notify(state string) {
	if err := n.send(state); err != nil {
		n.log.Warn("sd_notify failed", "state", strings.ReplaceAll(state, "\n", " "), "err", err)
	}
}

// Run watches the pipelines until ctx is done: READY=1 once every pipeline
// is ready (what /readyz says) or has failed, STATUS= when the summary changes, and the
// watchdog pings. A nil Notifier returns at once.
func (n *Notifier) Run(ctx context.Context) {
	if n == nil {
		return
	}
	if n.watchdog > 0 {
		n.log.Info("systemd watchdog on", "interval", n.watchdog, "ping_every", n.watchdog/2)
	}
	t := time.NewTicker(n.tick)
	defer t.Stop()
	for {
		n.check(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check does one round of Run.
func (n *Notifier) check(now time.Time) {
	sts := n.statuses()
	ready, summary := summarize(sts)
	wedged := ""
	for _, s := range sts {
		if s.Wedged {
			wedged = s.Name + ": " + s.Reason
			break
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.note != "" {
		summary += "; " + n.note
	}
	var msg []string
	if ready && !n.ready && !n.reloading {
		n.ready = true
		msg = append(msg, daemon.SdNotifyReady)
		n.log.Info("systemd notified: ready")
	}
	if summary != n.status {
		n.status = summary
		msg = append(msg, "STATUS="+summary)
	}
	if n.watchdog > 0 {
		switch {
		case wedged != "":
			if n.wedged == "" {
				n.log.Error("systemd watchdog: not pinging while a pipeline is wedged (systemd restarts the daemon after WatchdogSec)", "pipeline", wedged)
			}
		case now.Sub(n.lastPing) >= n.watchdog/2:
			n.lastPing = now
			msg = append(msg, daemon.SdNotifyWatchdog)
			if n.wedged != "" {
				n.log.Info("systemd watchdog: pinging again, no pipeline is wedged")
			}
		}
		n.wedged = wedged
	}
	if len(msg) > 0 {
		n.notify(strings.Join(msg, "\n"))
	}
}

// summarize says whether every pipeline that has not ended or failed is
// ready, in a line for STATUS=.
func summarize(sts []pipeline.Status) (ready bool, line string) {
	ready = true
	var running, paused, ended int
	var out int64
	var trouble []string
	for _, s := range sts {
		out += s.Out
		switch {
		case s.State == pipeline.StateDone || s.State == pipeline.StateStopped:
			ended++
			continue
		case s.State == pipeline.StateFailed:
			// Its start is over, if badly: a pipeline that failed (a
			// plugin that did not load, a refused config, an error it
			// does not retry) does not hold READY=1 back. Otherwise
			// systemd would restart the whole daemon after
			// TimeoutStartSec, and every healthy pipeline with it,
			// over something a restart does not mend; STATUS= says so.
			trouble = append(trouble, s.Name+" failed")
			continue
		case s.Wedged:
			trouble = append(trouble, s.Name+" wedged")
		case s.Stalled:
			trouble = append(trouble, s.Name+" stalled")
		case !s.Ready:
			trouble = append(trouble, s.Name+" "+string(s.State))
		case s.Paused:
			paused++
		default:
			running++
		}
		if !s.Ready {
			ready = false
		}
	}
	line = fmt.Sprintf("%d pipelines: %d running, %d paused", len(sts), running, paused)
	if ended > 0 {
		line += fmt.Sprintf(", %d ended", ended)
	}
	line += fmt.Sprintf("; %d records out", out)
	if len(trouble) > 0 {
		line = strings.Join(trouble, ", ") + "; " + line
	}
	return ready, line
}

// Reloading says a config reload started: RELOADING=1 with the monotonic
// time, as systemd wants it.
func (n *Notifier) Reloading() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reloading = true
	n.notify(daemon.SdNotifyReloading + "\n" + strings.TrimSuffix(daemon.SdNotifyMonotonicUsec(), "\n") + "\nSTATUS=reloading the config")
}

// Reloaded says the reload ended: READY=1 (if the daemon was ready
// before), and in STATUS= the refusal of a new config that was refused
// (err non-nil), until a reload succeeds.
func (n *Notifier) Reloaded(err error) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reloading = false
	n.note = ""
	if err != nil {
		n.note = "last reload refused: " + firstLine(err.Error())
	}
	n.status = "" // sent again at the next check
	if n.ready {
		n.notify(daemon.SdNotifyReady)
	}
}

// Stopping says the shutdown started: STOPPING=1.
func (n *Notifier) Stopping() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notify(daemon.SdNotifyStopping + "\nSTATUS=stopping: draining the pipelines")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
