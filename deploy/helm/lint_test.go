package helm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// streamdBin is $STREAMD_BIN (scripts/test sets it), else streamd built
// from this checkout.
func streamdBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("STREAMD_BIN"); b != "" {
		return b
	}
	out := filepath.Join(t.TempDir(), "streamd")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/streamd")
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build streamd: %v\n%s", err, b)
	}
	return out
}

// TestRenderedConfigLints: the streamd.toml the chart writes is one streamd
// accepts: `streamd lint` of it, for the defaults and the secured values,
// with the pod's files (the tokens file of the rendered Secret, the
// mounted Secrets, the plugins, the admin certificate) made under a folder
// that stands for the pod's root, and the pod's environment.
func TestRenderedConfigLints(t *testing.T) {
	bin := streamdBin(t)
	secured, err := os.ReadFile(filepath.Join("examples", "secured.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join("..", "..", "internal", "cli", "initcli", "starter", "plugins", "upper.wasm")
	wasm, err := os.ReadFile(plugin)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := selfSigned(t)
	for _, tc := range []struct {
		name, values string
		ok           bool
	}{
		{"defaults", "", true},
		{"secured", string(secured), true},
		// The check can fail: a key streamd does not know.
		{"a misspelt key", "config: |\n  [kafka]\n  broker = [\"k:9092\"]\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := render(t, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := r.config(t)
			root := t.TempDir()
			// The pod's absolute paths, under root.
			body = regexp.MustCompile(`"(/(etc|opt|var)/[^"]*)"`).ReplaceAllString(body, `"`+root+`$1"`)
			body = strings.ReplaceAll(body, "${file:/", "${file:"+root+"/")
			write := func(p string, b []byte) {
				t.Helper()
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var tokens []byte
			for _, s := range r.secrets {
				tokens = s.Data["tokens"]
			}
			if tokens == nil { // an existing Secret's: what the docs ask for
				tokens = []byte("read prometheus 0123456789abcdef0123\nwrite admin 0123456789abcdef4567\n")
			}
			write("etc/streamd/admin/tokens", tokens)
			write("etc/streamd/plugins/upper.wasm", wasm)
			write("opt/streamd/plugins/orders-downgrade.wasm", wasm) // a stand-in for the secured example's plugin
			write("etc/streamd/secrets/kafka/ca.crt", certPEM)
			write("etc/streamd/secrets/kafka/username", []byte("streamd"))
			write("etc/streamd/secrets/kafka/password", []byte("a-kafka-password"))
			write("etc/streamd/admin-tls/tls.crt", certPEM)
			write("etc/streamd/admin-tls/tls.key", keyPEM)
			write("var/lib/streamd/.keep", nil)
			cfg := filepath.Join(root, "etc/streamd/config/streamd.toml")
			write("etc/streamd/config/streamd.toml", []byte(body))
			cmd := exec.Command(bin, "lint", "-c", cfg)
			cmd.Env = append(os.Environ(), "POD_NAME=streamd-0", "POD_NAMESPACE=streaming", "POD_IP=10.0.0.7")
			out, err := cmd.CombinedOutput()
			if !tc.ok {
				if err == nil || !strings.Contains(string(out), "kafka.broker") {
					t.Fatalf("streamd lint passed a config with a misspelt key: %v\n%s", err, out)
				}
				return
			}
			if err != nil || !strings.Contains(string(out), ": ok (") {
				t.Fatalf("streamd lint of the rendered config: %v\n%s\n---\n%s", err, out, body)
			}
			t.Logf("%s", strings.TrimSpace(string(out)))
		})
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "streamd.streaming.svc"},
		DNSNames: []string{"streamd.streaming.svc"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}
