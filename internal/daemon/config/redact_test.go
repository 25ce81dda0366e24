package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorsRedactInterpolated: a value that came from ${file:} or
// ${ENV} is never quoted by a config error, whatever key it sits under
// (a key that is not a secret, such as the SASL mechanism): the error
// says where it came from instead.
func TestErrorsRedactInterpolated(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "mech")
	if err := os.WriteFile(secretFile, []byte("hunter2-from-the-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, value, env, secret, want string
	}{
		{"file", "${file:" + secretFile + "}", "", "hunter2-from-the-file", "<from ${file:" + secretFile + "}>"},
		{"env", "${MECH}", "s3cr3t-from-the-env", "s3cr3t-from-the-env", "<from ${MECH}>"},
		{"env inside a longer value", "x-${MECH}-y", "s3cr3t-from-the-env", "s3cr3t-from-the-env", "x-<from ${MECH}>-y"},
		{"short env", "${MECH}", "ab", `"ab"`, `"<from ${MECH}>"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := pipe("", "", "", "[kafka.sasl]\nmechanism = \""+tc.value+"\"\nusername = \"u\"\npassword = \"p\"")
			_, err := Parse(filepath.Join(dir, "c.toml"), []byte(src), env(map[string]string{"MECH": tc.env}))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "unknown mechanism") || strings.Contains(err.Error(), tc.secret) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v\nwant %q instead of the value", err, tc.want)
			}
		})
	}
}
