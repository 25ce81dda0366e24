package native

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the plugin in its own process group (so a terminal's
// Ctrl-C reaches streamd only, which then stops its plugins in order, and so
// a kill reaches the plugin's own children too) and has the kernel kill it if
// streamd dies without stopping it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killTree kills the plugin process and its process group.
func killTree(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
}
