package faults

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// outage is a case where a fault comes and goes while records flow: one
// daemon ("ride") rides it out, a second ("sigterm") gets SIGTERM during
// it and is started again once it is over. Both run one pipeline per
// policy from the same input topic.
type outage struct {
	need  need
	fault string // what the table says
	// dur is how long the fault lasts from begin's return to end's call;
	// 0: the input itself is the fault (old records) and there is no
	// window.
	dur time.Duration
	// stalls: no pipeline can make progress during the fault, so /readyz
	// must say 503, with a reason, within stall_timeout (+ stallSlack) and
	// keep saying it until the end.
	stalls bool
	// minDur: the fault, as measured, must last this long, or the case
	// shows nothing (a broker that came back too soon).
	minDur time.Duration

	inputConfigs []string
	ts           func(seq int) time.Time
	backlog      int           // records written before the daemons start
	backlogAge   time.Duration // how old the backlog is when they start
	rate         int           // records/s while the case runs

	// sigtermAt is when, from the fault's start, the second daemon gets
	// SIGTERM; 0: no second daemon.
	sigtermAt time.Duration
	daemon    daemonOpts
	noOutputs bool
	// quiesce: before the fault, stop the input and wait until every
	// pipeline delivered it; those records are then out of the account
	// (the fault takes them: a deleted topic).
	quiesce bool

	begin, end func(r *run)
	// check adds checks per pipeline.
	check func(t *testing.T, r *run, in *input, p *pipe, a account, res *result)
}

// after how much input after the fault's end the input stops: records
// produced after a fault must pass too; 3 s is several commit intervals
// (1 s) and batches.
const afterFault = 3 * time.Second

// deliverWithin bounds the wait for every record after a fault: a stall
// shows as records still missing when it runs out. It covers a group
// rebalance (the 45 s session timeout, when a member died with the
// fault) with room to spare.
const deliverWithin = 90 * time.Second

func (o outage) run(t *testing.T) {
	e := newEnv(t, o.need)
	r := newRun(t, e, o.inputConfigs...)
	r.noOutputs = o.noOutputs
	p := r.producer(o.ts, nil)
	if o.backlog > 0 {
		p.backlog(o.backlog)
	}
	if o.backlogAge > 0 {
		time.Sleep(o.backlogAge) // the fault: the backlog ages
	}
	ride := r.daemon("ride", o.daemon)
	var term *daemon
	if o.sigtermAt > 0 {
		term = r.daemon("sigterm", o.daemon)
	}
	if o.rate > 0 {
		p.start(o.rate)
	}
	var gone map[int]bool
	if o.dur > 0 {
		r.waitFlowing(60*time.Second, r.pipes...)
	}
	if o.quiesce {
		p.halt()
		if short := r.waitDelivered(time.Now().Add(60*time.Second), nil, r.pipes...); len(short) > 0 {
			fatalf(t, "before the fault, not delivered: %v", short)
		}
		gone = map[int]bool{}
		for _, seq := range r.col.inputBefore(time.Now()) {
			gone[seq] = true
		}
	}
	start := time.Now()
	if o.begin != nil {
		o.begin(r)
	}
	if o.quiesce && o.rate > 0 {
		p.start(o.rate)
	}
	begun := time.Now()
	// The second daemon's SIGTERM runs beside the fault's clock: a daemon
	// that does not exit must not stretch the fault.
	var termTook time.Duration
	termCode, termOK := 0, true
	termDone := make(chan struct{})
	go func() {
		defer close(termDone)
		if term != nil {
			time.Sleep(time.Until(start.Add(o.sigtermAt)))
			termTook, termCode, termOK = term.sigterm()
		}
	}()
	time.Sleep(time.Until(begun.Add(o.dur))) // the fault
	// healing: the fault starts to end. /readyz is held to a 503 until
	// then; a broker that takes a while to start may answer, and the
	// pipelines recover, before end.
	healing := time.Now()
	if o.end != nil {
		o.end(r)
	}
	end := time.Now()
	if o.dur == 0 {
		end = start
	}
	time.Sleep(afterFault)
	p.halt()
	<-termDone
	var restarted time.Time
	if term != nil {
		restarted = time.Now()
		term.restart()
	}
	short := r.waitDelivered(time.Now().Add(deliverWithin), gone, r.pipes...)
	if len(short) > 0 {
		errorf(t, "not delivered %v after the fault: %v", deliverWithin, short)
	}
	readyAfter := map[*daemon]string{}
	for _, d := range []*daemon{ride, term} {
		if d == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := d.waitReady(ctx); err != nil {
			readyAfter[d] = err.Error()
		}
		cancel()
	}
	// SIGTERM once delivered: a clean exit within shutdown_timeout.
	stopped := map[*daemon][3]any{}
	for _, d := range []*daemon{ride, term} {
		if d != nil {
			took, code, ok := d.sigterm()
			stopped[d] = [3]any{took, code, ok}
		}
	}
	if took := end.Sub(start); took < o.minDur {
		errorf(t, "the fault lasted %v, less than %v: the case shows nothing", took, o.minDur)
	}
	in := r.readInput()
	fault := o.fault
	if o.dur > 0 {
		fault += fmt.Sprintf(" (%.0f s)", end.Sub(start).Seconds())
	}
	for _, pp := range r.pipes {
		res := &result{Backend: e.backend, Case: r.name, Fault: fault, Policy: pp.policy, Role: pp.role}
		a := r.account(in, pp, nil, gone)
		events := 1
		if pp.d == term {
			events = 2 // the fault, and a shutdown that abandoned its in-flight records
		}
		res.fill(t, a, events)
		if pp.d == ride {
			res.RecoverSeconds = r.recovery(pp, end, gone)
			if res.RecoverSeconds < 0 {
				res.fail(t, "did not recover within %v without a restart", deliverWithin)
			}
			win := ride.samplesIn(start, healing)
			if o.dur == 0 {
				win = ride.samplesIn(start, start.Add(max(time.Duration(res.RecoverSeconds*float64(time.Second)), time.Second)))
			}
			summary, first503, reason, flapped := readyzDuring(win, pp.name, start)
			res.Readyz = summary
			if o.stalls {
				switch {
				case first503.IsZero():
					res.fail(t, "/readyz said 200 throughout the fault (%d samples) while the pipeline was stalled", len(win))
				case first503.After(start.Add(stallBy)):
					res.fail(t, "/readyz said 503 only %.1fs into the fault (stall_timeout %v)", first503.Sub(start).Seconds(), stallTimeout)
				}
				if !first503.IsZero() && reason == "" {
					res.fail(t, "/readyz said 503 without a reason for the pipeline")
				}
				if flapped {
					res.fail(t, "/readyz said 200 again during the fault")
				}
			}
		} else {
			res.RecoverSeconds = r.recovery(pp, restarted, gone)
			if restarted.Before(start) {
				res.RecoverSeconds = -1
			}
			c := termCode
			res.ExitCode = &c
			res.SigtermSeconds = termTook.Seconds()
			res.Readyz = "SIGTERM at +" + o.sigtermAt.String() + "; " + readyzSummary(term, pp.name, start, start.Add(o.sigtermAt))
			if !termOK {
				res.fail(t, "SIGTERM during the fault: no exit within shutdown_timeout (%v) + 40s; killed", shutdownTimeout)
			} else if termTook > shutdownTimeout+exitSlack {
				res.fail(t, "SIGTERM during the fault: exit took %.1fs, shutdown_timeout is %v", termTook.Seconds(), shutdownTimeout)
			}
		}
		if msg, bad := readyAfter[pp.d]; bad {
			res.fail(t, "after recovery: %s", msg)
		}
		if s := stopped[pp.d]; !s[2].(bool) || s[1].(int) != 0 || s[0].(time.Duration) > shutdownTimeout+exitSlack {
			res.fail(t, "SIGTERM after recovery: exit %v after %v (want 0 within %v)", s[1], s[0], shutdownTimeout+exitSlack)
		}
		if o.check != nil {
			o.check(t, r, in, pp, a, res)
		}
		record(res)
	}
	if t.Failed() {
		for _, d := range []*daemon{ride, term} {
			if d != nil {
				t.Logf("%s log tail:\n%s", d.name, tail(d.Log(), 3000))
			}
		}
	}
}

func readyzSummary(d *daemon, pipeline string, from, to time.Time) string {
	s, _, _, _ := readyzDuring(d.samplesIn(from, to), pipeline, from)
	return s
}
