//go:build !linux

package native

import "os/exec"

func setProcAttr(*exec.Cmd) {}

// killTree kills the plugin process.
func killTree(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
