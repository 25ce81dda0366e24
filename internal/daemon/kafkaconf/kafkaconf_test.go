package kafkaconf

import (
	"context"
	b64enc "encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/streamd/streamd/internal/daemon/config"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// first returns the first SASL message of m.
func first(t *testing.T, m sasl.Mechanism, host string) (string, error) {
	t.Helper()
	_, msg, err := m.Authenticate(context.Background(), host)
	return string(msg), err
}

// TestPasswordFileReadAtEachAuthentication: a password from
// ${file:...} is read again at each authentication, so rewriting the
// file is enough to rotate it and recover from a wrong password.
func TestPasswordFileReadAtEachAuthentication(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	write(t, pw, "old-password\n")
	m, err := Mechanism(&config.KafkaSASL{Mechanism: "PLAIN", Username: "alice", Password: config.SecretFile(pw)})
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := first(t, m, "b:1"); err != nil || msg != "\x00alice\x00old-password" {
		t.Fatalf("%q %v", msg, err)
	}
	write(t, pw, "new-password")
	if msg, _ := first(t, m, "b:1"); msg != "\x00alice\x00new-password" {
		t.Fatalf("after the rewrite: %q", msg)
	}
	if err := os.Remove(pw); err != nil {
		t.Fatal(err)
	}
	if _, err := first(t, m, "b:1"); err == nil || !strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), "password\x00") {
		t.Fatalf("a removed file: %v", err)
	}
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		write(t, pw, "x")
		m, err := Mechanism(&config.KafkaSASL{Mechanism: mech, Username: "alice", Password: config.SecretFile(pw)})
		if err != nil || m.Name() != mech {
			t.Fatalf("%s: %v %v", mech, m, err)
		}
		if msg, err := first(t, m, "b:1"); err != nil || !strings.Contains(msg, "n=alice") {
			t.Fatalf("%s: %q %v", mech, msg, err)
		}
	}
}

// jwt is an unsigned token with sub.
func jwt(sub string) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(base64Std(b)), "=")
	}
	now := time.Now().Unix()
	return enc(map[string]string{"alg": "none"}) + "." + enc(map[string]any{"sub": sub, "iat": now, "exp": now + 3600}) + "."
}

func TestOAuthTokenFileReadWhenItChanges(t *testing.T) {
	f := filepath.Join(t.TempDir(), "token")
	write(t, f, jwt("a")+"\n")
	m, err := Mechanism(&config.KafkaSASL{Mechanism: "OAUTHBEARER", TokenFile: f, Extensions: map[string]string{"logicalCluster": "lkc-1"}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := first(t, m, "b:1")
	if err != nil || !strings.Contains(msg, "auth=Bearer "+jwt("a")[:20]) || !strings.Contains(msg, "logicalCluster=lkc-1") {
		t.Fatalf("%q %v", msg, err)
	}
	time.Sleep(10 * time.Millisecond)
	write(t, f, jwt("bb"))
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(f, later, later); err != nil {
		t.Fatal(err)
	}
	if msg, _ := first(t, m, "b:1"); !strings.Contains(msg, jwt("bb")) {
		t.Fatalf("after the rewrite: %q", msg)
	}
}

// TestOAuthClientCredentials: the token endpoint is asked once while its
// token is valid; the client secret (from a file) goes in the basic auth
// header, never in a log or error; the endpoint's refusal is an error
// with its code and description.
func TestOAuthClientCredentials(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		id, secret, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil {
			t.Errorf("token request: %v", err)
		}
		if !ok || id != "streamd" || secret != "client-S3cret" || r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("scope") != "kafka" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			fmt.Fprintf(w, `{"error":"invalid_client","error_description":"bad client credentials","echo":%q}`, secret)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"bearer","expires_in":3600}`, jwt("streamd"))
	}))
	defer srv.Close()
	sf := filepath.Join(t.TempDir(), "secret")
	write(t, sf, "client-S3cret\n")
	s := &config.KafkaSASL{Mechanism: "OAUTHBEARER", TokenURL: srv.URL, ClientID: "streamd", ClientSecret: config.SecretFile(sf), Scopes: []string{"kafka"}}
	m, err := Mechanism(s)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if msg, err := first(t, m, "b:1"); err != nil || !strings.Contains(msg, jwt("streamd")[:30]) {
			t.Fatalf("%q %v", msg, err)
		}
	}
	if calls.Load() != 1 {
		t.Errorf("token endpoint asked %d times for 3 authentications, want 1 (cached)", calls.Load())
	}
	write(t, sf, "wrong-S3cret")
	m, _ = Mechanism(s)
	_, err = first(t, m, "b:1")
	if err == nil || !strings.Contains(err.Error(), "invalid_client: bad client credentials") || strings.Contains(err.Error(), "S3cret") {
		t.Fatalf("refused: %v", err)
	}
}

// TestAWSMSKIAM: AWS_MSK_IAM signs with the credentials of the AWS SDK's
// default chain (here the environment) for the broker's region.
func TestAWSMSKIAM(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDSTREAMDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-S3cret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	m, err := Mechanism(&config.KafkaSASL{Mechanism: "AWS_MSK_IAM"})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := first(t, m, "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com:9098")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	if err := json.Unmarshal([]byte(msg), &body); err != nil {
		t.Fatalf("%q: %v", msg, err)
	}
	if body["action"] != "kafka-cluster:Connect" || !strings.HasPrefix(body["x-amz-credential"], "AKIDSTREAMDTEST/") ||
		!strings.Contains(body["x-amz-credential"], "/eu-west-1/kafka-cluster/aws4_request") || body["x-amz-signature"] == "" {
		t.Fatalf("challenge %v", body)
	}
	if strings.Contains(msg, "aws-S3cret") {
		t.Fatal("the secret key is in the message")
	}
	// A profile from the shared credentials file.
	write(t, filepath.Join(dir, "credentials"), "[msk]\naws_access_key_id = AKIDFROMFILE\naws_secret_access_key = file-S3cret\n")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	m, _ = Mechanism(&config.KafkaSASL{Mechanism: "AWS_MSK_IAM", AWSProfile: "msk"})
	msg, err = first(t, m, "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com:9098")
	if err != nil || !strings.Contains(msg, "AKIDFROMFILE/") {
		t.Fatalf("profile: %q %v", msg, err)
	}
}

func base64Std(b []byte) string { return b64.EncodeToString(b) }

var b64 = b64enc.StdEncoding
