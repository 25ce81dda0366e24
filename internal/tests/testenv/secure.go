package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SecureBroker is the secured Apache Kafka of scripts/kafka-secure
// (scripts/kafka's secured mode), read from the env file in the directory
// STREAMD_TEST_KAFKA_SECURE names.
type SecureBroker struct {
	Dir string
	// Listeners: PLAINTEXT (principal ANONYMOUS, the super user: for
	// setting up ACLs), SSL (mutual TLS), SASL_SSL (SCRAM-SHA-256,
	// SCRAM-SHA-512, PLAIN), SASL_PLAINTEXT (OAUTHBEARER, unsecured JWS).
	Plaintext, SSL, SASLSSL, SASLPlaintext string
	// CAFile signed the broker's and the client's certificates (CAKeyFile
	// is its key, to sign more); ClientCertFile/ClientKeyFile are a client
	// certificate whose principal is ClientPrincipal.
	CAFile, CAKeyFile, ClientCertFile, ClientKeyFile, ClientPrincipal string
	// User and User2 are SCRAM and PLAIN users; their passwords are in the
	// files.
	User, PasswordFile, User2, Password2File string
}

// SecureKafka returns the secured broker, or calls Missing. Its secrets
// are registered with Secret's registry.
func SecureKafka(tb testing.TB) *SecureBroker {
	tb.Helper()
	dir := os.Getenv("STREAMD_TEST_KAFKA_SECURE")
	if dir == "" {
		Missing(tb, "the secured Kafka (scripts/kafka-secure start; STREAMD_TEST_KAFKA_SECURE)")
	}
	f, err := os.Open(filepath.Join(dir, "env"))
	if err != nil {
		tb.Fatalf("secured Kafka: %v", err)
	}
	defer func() { _ = f.Close() }()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	b := &SecureBroker{Dir: dir, Plaintext: env["PLAINTEXT"], SSL: env["SSL"], SASLSSL: env["SASL_SSL"], SASLPlaintext: env["SASL_PLAINTEXT"],
		CAFile: env["CA_FILE"], CAKeyFile: env["CA_KEY_FILE"], ClientCertFile: env["CLIENT_CERT_FILE"], ClientKeyFile: env["CLIENT_KEY_FILE"],
		ClientPrincipal: env["CLIENT_PRINCIPAL"], User: env["USER"], PasswordFile: env["PASSWORD_FILE"], User2: env["USER2"], Password2File: env["PASSWORD2_FILE"]}
	if b.Plaintext == "" || b.SASLSSL == "" || b.PasswordFile == "" {
		tb.Fatalf("secured Kafka: %s/env lacks addresses or files: %v", dir, env)
	}
	for _, p := range []string{b.PasswordFile, b.Password2File, filepath.Join(dir, "keystore.password"), filepath.Join(dir, "truststore.password")} {
		if v, err := os.ReadFile(p); err == nil {
			registerSecret(tb, strings.TrimSpace(string(v)))
		}
	}
	return b
}

// Password returns the password in file.
func (b *SecureBroker) Password(tb testing.TB, file string) string {
	tb.Helper()
	v, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(string(v))
}

// Admin returns a client on the PLAINTEXT listener (the super user).
func (b *SecureBroker) Admin(tb testing.TB) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Plaintext))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// ACL is one ACL to create: principal (e.g. "User:alice") may do op on a
// resource (topic, group, cluster) whose name starts with prefix (or is
// literally Name when Literal).
type ACL struct {
	Principal string
	Resource  kmsg.ACLResourceType
	Name      string
	Literal   bool
	Op        kmsg.ACLOperation
}

// Allow creates the ACLs (idempotently) and waits until the broker has
// them.
func (b *SecureBroker) Allow(tb testing.TB, acls ...ACL) {
	tb.Helper()
	b.changeACLs(tb, true, acls)
}

// Revoke deletes the ACLs.
func (b *SecureBroker) Revoke(tb testing.TB, acls ...ACL) {
	tb.Helper()
	b.changeACLs(tb, false, acls)
}

func (b *SecureBroker) changeACLs(tb testing.TB, create bool, acls []ACL) {
	tb.Helper()
	adm := kadm.NewClient(b.Admin(tb))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, a := range acls {
		ab := kadm.NewACLs().Allow(a.Principal).AllowHosts("*").Operations(kadm.ACLOperation(a.Op))
		pattern := kadm.ACLPatternPrefixed
		if a.Literal {
			pattern = kadm.ACLPatternLiteral
		}
		switch a.Resource {
		case kmsg.ACLResourceTypeTopic:
			ab = ab.Topics(a.Name)
		case kmsg.ACLResourceTypeGroup:
			ab = ab.Groups(a.Name)
		case kmsg.ACLResourceTypeCluster:
			ab = ab.Clusters()
			pattern = kadm.ACLPatternLiteral
		}
		ab = ab.ResourcePatternType(pattern)
		verb, err := "create", error(nil)
		if create {
			res, e := adm.CreateACLs(ctx, ab)
			err = firstErr(e, res, func(r kadm.CreateACLsResult) error { return r.Err })
		} else {
			verb = "delete"
			res, e := adm.DeleteACLs(ctx, ab)
			err = firstErr(e, res, func(r kadm.DeleteACLsResult) error { return r.Err })
		}
		if err != nil {
			tb.Fatalf("%s ACL %+v: %v", verb, a, err)
		}
	}
}

// firstErr is err, or else the first error errOf finds in a request's
// per-resource results.
func firstErr[R any](err error, res []R, errOf func(R) error) error {
	if err != nil {
		return err
	}
	for _, r := range res {
		if err := errOf(r); err != nil {
			return err
		}
	}
	return nil
}

// AllowAll lets principal read, write, create and describe every topic
// whose name starts with topicPrefix and use every group whose name
// starts with groupPrefix.
func (b *SecureBroker) AllowAll(tb testing.TB, principal, topicPrefix, groupPrefix string) {
	tb.Helper()
	var acls []ACL
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe} {
		acls = append(acls, ACL{Principal: principal, Resource: kmsg.ACLResourceTypeTopic, Name: topicPrefix, Op: op})
	}
	acls = append(acls, ACL{Principal: principal, Resource: kmsg.ACLResourceTypeGroup, Name: groupPrefix, Op: kmsg.ACLOperationRead})
	b.Allow(tb, acls...)
}

// The secret registry: tests register every secret they use, so that the
// suite's logs can be searched for them afterwards (scripts/secretscan,
// run by scripts/test).
var secretsMu sync.Mutex

// Secret returns a fresh random secret for what (a password, a token),
// registered for the scan of the logs.
func Secret(tb testing.TB, what string) string {
	tb.Helper()
	b := make([]byte, 18)
	rand.Read(b)
	s := strings.ReplaceAll(what, " ", "-") + "-" + hex.EncodeToString(b)
	registerSecret(tb, s)
	return s
}

// registerSecret appends s to the file STREAMD_TEST_SECRETS names, if any.
func registerSecret(tb testing.TB, s string) {
	p := os.Getenv("STREAMD_TEST_SECRETS")
	if p == "" || s == "" {
		return
	}
	secretsMu.Lock()
	defer secretsMu.Unlock()
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		tb.Fatalf("secret registry: %v", err)
	}
	defer func() { _ = f.Close() }()
	fmt.Fprintln(f, s)
}

// LogFile returns a file for a daemon's whole log, kept after the test in
// STREAMD_TEST_LOG_DIR (scripts/test sets it to bin/logs, where the secret
// scan reads), or in the test's temporary directory.
func LogFile(tb testing.TB, name string) *os.File {
	tb.Helper()
	dir := os.Getenv("STREAMD_TEST_LOG_DIR")
	if dir == "" {
		dir = tb.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	safe := strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name() + "-" + name)
	f, err := os.Create(filepath.Join(dir, safe+".log"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return f
}

// TailOnFailure logs the last lines of r's content if the test failed.
func TailOnFailure(tb testing.TB, path string) {
	tb.Cleanup(func() {
		if !tb.Failed() {
			return
		}
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer func() { _ = f.Close() }()
		b, _ := io.ReadAll(f)
		lines := strings.Split(string(b), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		tb.Logf("last lines of %s:\n%s", path, strings.Join(lines, "\n"))
	})
}
