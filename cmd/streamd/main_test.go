package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestCommandTable: every command of the table is in the usage text and
// runs (version prints the version; an unknown command exits 2).
func TestCommandTable(t *testing.T) {
	var u bytes.Buffer
	usage(&u)
	for name := range commands() {
		if !strings.Contains(u.String(), "\n  "+name+" ") {
			t.Errorf("command %q is not in the usage text", name)
		}
	}
	var out, errw bytes.Buffer
	if code := realMain([]string{"version"}, &out, &errw); code != 0 || !strings.HasPrefix(out.String(), "streamd "+version+" (commit "+commit+", ") {
		t.Errorf("version: exit %d, %q", code, out.String())
	}
	if code := realMain([]string{"no-such-command"}, &out, &errw); code != 2 || !strings.Contains(errw.String(), `unknown command "no-such-command"`) {
		t.Errorf("unknown command: exit %d, %q", code, errw.String())
	}
}
