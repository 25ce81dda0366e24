// Package faults holds streamd's fault suite: the faults a
// production week brings, each applied to the real `streamd run` binary as
// an operator runs it, with three pipelines per daemon, one per error
// policy (stop, drop, dlq), going through the same fault.
//
// The faults: the broker stopped and restarted on its data, the broker
// frozen (SIGSTOP), the network to the broker cut (connections refused and
// reset, or silently swallowed) and slowed, by a TCP proxy
// (internal/tests/testenv/faultproxy) that the broker advertises; backlogs with
// old CreateTime and LogAppendTime timestamps; SIGKILL restarts of streamd
// with and without instance_id; the sink topic deleted; records over the
// producer's size limit; a full disk under data_dir.
//
// Every case checks, per pipeline: no record missing (by key and the
// sequence number in the value), duplicates within the documented bound,
// recovery without a restart, /readyz truthful during the fault (503 with
// a reason while the pipeline is stalled), and SIGTERM honoured during the
// fault (a second daemon is stopped mid-fault, must exit within its
// shutdown_timeout, and loses nothing when started again).
//
// The suite runs in one of two modes:
//
//   - kfake (default): each case gets its own broker, an in-process kfake
//     cluster or a `streamd broker` process (for the faults that stop or
//     freeze the broker process), so all cases run at once.
//   - Apache Kafka, when STREAMD_FAULT_KAFKA_PORT is set: the suite starts
//     its own broker with scripts/kafka on that port (controller on +1,
//     proxy listeners on +2..+5, advertised at the proxies' ports +6..+9),
//     since it stops and freezes it; cases that stop or freeze the broker
//     run alone, the others at once.
//
// scripts/test runs the first in its kfake pass and the second in a pass
// of its own ("faults"). Each run writes its results to
// bin/faults-<backend>.json (or STREAMD_FAULT_REPORT); scripts/faultreport
// renders them as the table in docs/reliability.md.
package faults
