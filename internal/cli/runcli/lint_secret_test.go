package runcli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLintShowsNoSecret: streamd lint's output, good config or bad, has
// no password, token or client secret, whether written in the file, in
// the environment or in a ${file:}.
func TestLintShowsNoSecret(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("file-Secret-0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STREAMD_TEST_LINT_SECRET", "env-Secret-0002")
	base := `[kafka]
brokers = ["127.0.0.1:1"]
[kafka.tls]
ca_file = "CA"
[kafka.sasl]
mechanism = "MECH"
username = "alice"
password = "PASSWORD"
[kafka.clusters.other]
brokers = ["127.0.0.1:2"]
[kafka.clusters.other.sasl]
mechanism = "OAUTHBEARER"
token_url = "https://idp.example/token"
client_id = "c"
client_secret = "literal-Secret-0003"
[[pipeline]]
name = "orders"
[pipeline.source]
type = "kafka"
topics = ["orders"]
group = "g"
[pipeline.sink]
type = "kafka"
cluster = "other"
topic = "orders"
`
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, ca, mech, password string }{
		{"good", "", "SCRAM-SHA-512", "literal-Secret-0004"},
		{"env, bad mechanism", "", "SCRAM-SHA-1", "${STREAMD_TEST_LINT_SECRET}"},
		{"file, bad CA file", filepath.Join(dir, "ca.pem"), "PLAIN", "${file:" + pwFile + "}"},
		{"literal, missing CA file", filepath.Join(dir, "missing.pem"), "PLAIN", "literal-Secret-0004"},
		{"a password where a mechanism goes", "", "literal-Secret-0004", "x"},
		// A ${file:} or ${ENV} under a key that is not a secret field:
		// its value is not quoted either.
		{"a file where a mechanism goes", "", "${file:" + pwFile + "}", "x"},
		{"an env variable where a mechanism goes", "", "${STREAMD_TEST_LINT_SECRET}", "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.NewReplacer("CA", tc.ca, "MECH", tc.mech, "PASSWORD", tc.password).Replace(base)
			if tc.ca == "" {
				src = strings.Replace(src, "ca_file = \"\"\n", "", 1)
			}
			file := filepath.Join(t.TempDir(), "streamd.toml")
			if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := Lint(context.Background(), []string{"-c", file}, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			t.Logf("exit %d: %s", code, out)
			if tc.name == "good" && code != 0 || tc.name != "good" && code != 2 {
				t.Fatalf("exit %d", code)
			}
			for _, s := range []string{"Secret-0001", "Secret-0002", "Secret-0003"} {
				if strings.Contains(out, s) {
					t.Errorf("lint shows a secret (%s):\n%s", s, out)
				}
			}
			if tc.mech != "literal-Secret-0004" && strings.Contains(out, "Secret-0004") {
				t.Errorf("lint shows the password:\n%s", out)
			}
		})
	}
}
