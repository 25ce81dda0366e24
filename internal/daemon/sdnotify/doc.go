// Package sdnotify tells systemd how a streamd daemon is doing, by the
// sd_notify protocol of a Type=notify service (through
// github.com/coreos/go-systemd/v22/daemon): READY=1 once every pipeline is
// ready, RELOADING=1 (with MONOTONIC_USEC) and READY=1 around a config
// reload, STOPPING=1 when the shutdown starts, STATUS= a one-line summary,
// and WATCHDOG=1 every half WatchdogSec while no pipeline is wedged, so
// that systemd restarts a daemon whose engine is stuck.
//
// Without NOTIFY_SOCKET in the environment (not run by systemd) a Notifier
// does nothing.
package sdnotify
