package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// daemon is one `streamd run` process (and, once restarted, the next).
type daemon struct {
	t       *testing.T
	name    string
	cfgPath string
	// shutdown is the pipelines' shutdown_timeout.
	shutdown time.Duration

	mu      sync.Mutex
	cmd     *exec.Cmd
	log     *lockedBuffer
	done    chan struct{}
	waitErr error
	runs    int
	saved   int // the run whose log was saved
	admin   string
	samples []sample
	monStop chan struct{}
	monDone chan struct{}
}

// sample is what the admin API said at one moment.
type sample struct {
	at   time.Time
	code int // /readyz status; 0: no answer
	body string
	// pipelines is /pipelines by name.
	pipelines map[string]pipelineStatus
}

type pipelineStatus struct {
	Name    string           `json:"name"`
	State   string           `json:"state"`
	Ready   bool             `json:"ready"`
	Error   string           `json:"error"`
	Lag     map[string]int64 `json:"lag"`
	In      int64            `json:"records_in"`
	Out     int64            `json:"records_out"`
	Errors  int64            `json:"errors"`
	DLQ     int64            `json:"dlq"`
	Dropped int64            `json:"dropped"`
}

// startDaemon starts `streamd run -c cfgPath` and waits until its admin
// server listens.
func startDaemon(t *testing.T, name, cfgPath string, shutdown time.Duration) (*daemon, error) {
	d := &daemon{t: t, name: name, cfgPath: cfgPath, shutdown: shutdown}
	if err := d.begin(); err != nil {
		d.saveLog()
		return nil, err
	}
	t.Cleanup(func() {
		d.stopMonitor()
		d.mu.Lock()
		cmd, done := d.cmd, d.done
		d.mu.Unlock()
		select {
		case <-done:
		default:
			_ = cmd.Process.Signal(syscall.SIGCONT) // cleanup: it may be stopped, or gone
			_ = cmd.Process.Kill()
			<-done
		}
		d.saveLog()
	})
	return d, nil
}

var adminRe = regexp.MustCompile(`msg="admin server listening" addr=(\S+)`)

func (d *daemon) start() {
	d.t.Helper()
	if err := d.begin(); err != nil {
		d.t.Fatal(err)
	}
}

// begin starts the process and waits for its admin server; an error if it
// exits first or does not listen within a minute.
func (d *daemon) begin() error {
	d.mu.Lock()
	d.runs++
	log := &lockedBuffer{}
	cmd := exec.Command(streamdBin, "run", "-c", d.cfgPath)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		d.mu.Unlock()
		return err
	}
	done := make(chan struct{})
	d.cmd, d.log, d.done, d.admin = cmd, log, done, ""
	d.mu.Unlock()
	go func() {
		err := cmd.Wait()
		d.mu.Lock()
		d.waitErr = err
		d.mu.Unlock()
		close(done)
	}()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := adminRe.FindStringSubmatch(log.String()); m != nil {
			d.mu.Lock()
			d.admin = m[1]
			d.mu.Unlock()
			break
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited at start: %v\n%s", d.name, d.waitErr, tail(log.String(), 3000))
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill() // the error returned says what went wrong
			<-done
			return fmt.Errorf("%s: no admin server after 60s:\n%s", d.name, tail(log.String(), 3000))
		}
	}
	d.startMonitor()
	return nil
}

// saveLog appends the current process's log to bin/faults-logs, once.
func (d *daemon) saveLog() {
	d.mu.Lock()
	log, runs := d.log, d.runs
	saved := d.saved == runs
	d.saved = runs
	d.mu.Unlock()
	if saved {
		return
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(d.t.Name()) + "-" + d.name + ".log"
	f, err := os.OpenFile(filepath.Join(logDir(), name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer testenv.Ignore(f.Close) // a diagnostic log for the report
	if runs == 1 {
		_ = f.Truncate(0)
	}
	fmt.Fprintf(f, "==== run %d\n%s", runs, log.String())
}

// Log returns the current process's output.
func (d *daemon) Log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// exited reports whether the current process has exited.
func (d *daemon) exited() bool {
	d.mu.Lock()
	done := d.done
	d.mu.Unlock()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// exitCode is the process's exit code (-1 killed by a signal).
func (d *daemon) exitCode() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ee *exec.ExitError
	if errors.As(d.waitErr, &ee) {
		return ee.ExitCode()
	}
	if d.waitErr != nil {
		return -2
	}
	return 0
}

// sigterm sends SIGTERM and waits for the exit, at most shutdown plus
// 40 s (the worst case with the broker down is shutdown_timeout + ~20 s,
// so that the figure is measured, not cut); it returns how long the exit took and the exit code, or ok
// false if the process did not exit (it is then killed).
func (d *daemon) sigterm() (took time.Duration, code int, ok bool) {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.mu.Unlock()
	t0 := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM) // one already gone shows as its exit below
	select {
	case <-done:
		took = time.Since(t0)
	case <-time.After(d.shutdown + 40*time.Second):
		_ = cmd.Process.Kill()
		<-done
		d.stopMonitor()
		d.saveLog()
		return time.Since(t0), -1, false
	}
	d.stopMonitor()
	d.saveLog()
	return took, d.exitCode(), true
}

// kill SIGKILLs the process and waits for it.
func (d *daemon) kill() {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.mu.Unlock()
	_ = cmd.Process.Kill() // one already gone is what kill wants
	<-done
	d.stopMonitor()
	d.saveLog()
}

// restart starts the process again with the same config.
func (d *daemon) restart() { d.start() }

// The monitor polls /readyz and /pipelines every 250ms.
func (d *daemon) startMonitor() {
	d.mu.Lock()
	addr := d.admin
	d.monStop, d.monDone = make(chan struct{}), make(chan struct{})
	stop, done := d.monStop, d.monDone
	d.mu.Unlock()
	cl := &http.Client{Timeout: 2 * time.Second}
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			s := sample{at: time.Now()}
			if resp, err := cl.Get("http://" + addr + "/readyz"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				s.code, s.body = resp.StatusCode, string(b)
			}
			if resp, err := cl.Get("http://" + addr + "/pipelines"); err == nil {
				var ps []pipelineStatus
				if json.NewDecoder(resp.Body).Decode(&ps) == nil {
					s.pipelines = map[string]pipelineStatus{}
					for _, p := range ps {
						s.pipelines[p.Name] = p
					}
				}
				_ = resp.Body.Close()
			}
			d.mu.Lock()
			d.samples = append(d.samples, s)
			d.mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
}

func (d *daemon) stopMonitor() {
	d.mu.Lock()
	stop, done := d.monStop, d.monDone
	d.monStop = nil
	d.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// samplesIn returns the samples taken in [from, to].
func (d *daemon) samplesIn(from, to time.Time) []sample {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []sample
	for _, s := range d.samples {
		if !s.at.Before(from) && !s.at.After(to) {
			out = append(out, s)
		}
	}
	return out
}

// status returns the pipeline's latest /pipelines status.
func (d *daemon) status(pipeline string) (pipelineStatus, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := len(d.samples) - 1; i >= 0; i-- {
		if p, ok := d.samples[i].pipelines[pipeline]; ok {
			return p, true
		}
	}
	return pipelineStatus{}, false
}

// readyNow asks /readyz once.
func (d *daemon) readyNow() (int, string) {
	d.mu.Lock()
	addr := d.admin
	d.mu.Unlock()
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer testenv.Ignore(resp.Body.Close)
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReady waits until /readyz answers 200.
func (d *daemon) waitReady(ctx context.Context) error {
	for {
		code, body := d.readyNow()
		if code == 200 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s /readyz: %d %s", d.name, code, clip(body, 200))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// notReadyReason returns whether a /readyz answer names pipeline as not
// ready, and the reason it gives. It reads the body as JSON and looks for
// the name as a string value (a list of names), as an object's "name" or
// "pipeline" (a list of objects; the reason is its "reason", "error" or
// "why"), or as a key (an object of reasons).
func notReadyReason(body, pipeline string) (named bool, reason string) {
	var v any
	if json.Unmarshal([]byte(body), &v) != nil {
		return strings.Contains(body, pipeline), ""
	}
	why := func(m map[string]any) string {
		for _, k := range []string{"reason", "error", "why", "message"} {
			if s, ok := m[k].(string); ok && s != "" {
				return s
			}
		}
		return ""
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				if s, ok := e.(string); ok && s == pipeline {
					named = true
				} else {
					walk(e)
				}
			}
		case map[string]any:
			if x["name"] == pipeline || x["pipeline"] == pipeline {
				named, reason = true, why(x)
				return
			}
			for k, e := range x {
				if k != pipeline {
					walk(e)
					continue
				}
				named = true
				switch r := e.(type) {
				case string:
					reason = r
				case map[string]any:
					reason = why(r)
				}
			}
		}
	}
	walk(v)
	return named, reason
}

// readyzDuring summarises what /readyz said of pipeline in [from, to], and
// returns the first 503 naming it (zero if none) and whether a 200
// followed that 503 before to.
func readyzDuring(ss []sample, pipeline string, from time.Time) (summary string, first503 time.Time, reason string, flapped bool) {
	var down, noAnswer int
	for _, s := range ss {
		if s.code == 0 {
			noAnswer++
			continue
		}
		named, why := false, ""
		if s.code == 503 {
			named, why = notReadyReason(s.body, pipeline)
		}
		switch {
		case named && first503.IsZero():
			first503, reason = s.at, why
			down++
		case named:
			down++
			if reason == "" {
				reason = why
			}
		case s.code == 200 && !first503.IsZero():
			flapped = true
		}
	}
	answered := len(ss) - noAnswer
	switch {
	case len(ss) == 0:
		summary = "not sampled"
	case answered == 0:
		summary = "no answer (process down)"
	case first503.IsZero():
		summary = fmt.Sprintf("200 throughout (%d samples)", answered)
	default:
		summary = fmt.Sprintf("503 from +%.1fs", first503.Sub(from).Seconds())
		if reason != "" {
			summary += fmt.Sprintf(" (%q)", clip(reason, 120))
		} else {
			summary += " (no reason given)"
		}
		if flapped {
			summary += ", 200 in between"
		}
	}
	if noAnswer > 0 && answered > 0 {
		summary += fmt.Sprintf("; no answer %d of %d samples", noAnswer, len(ss))
	}
	return summary, first503, reason, flapped
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
