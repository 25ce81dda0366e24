package kafka_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/internal/x/tlsconf"
	"github.com/streamd/streamd/pipeline/kafka"
)

// secured is a kfake cluster with TLS, SASL and ACLs: superuser admin,
// user alice who may read topic "in" (and use group "g") but only
// describe topic "out".
type secured struct {
	addr  string
	certs *testenv.Certs
}

// newSecured starts a secured broker; cert "expired" gives it an expired
// certificate, "" a valid one.
func newSecured(t *testing.T, cert string) *secured {
	t.Helper()
	certs := testenv.NewCerts(t)
	var serverCert, serverKey string
	if cert == "expired" {
		serverCert, serverKey = certs.ExpiredCert, certs.ExpiredKey
	} else {
		serverCert, serverKey = certs.ServerCert, certs.ServerKey
	}
	tc, err := tlsconf.Server(tlsconf.Files{CertFile: serverCert, KeyFile: serverKey})
	if err != nil {
		t.Fatal(err)
	}
	allow := func(res kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: res, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(tc), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin-secret"),
		kfake.User("SCRAM-SHA-256", "alice", "alice-secret",
			allow(kmsg.ACLResourceTypeTopic, "in", kmsg.ACLOperationRead),
			allow(kmsg.ACLResourceTypeTopic, "out", kmsg.ACLOperationDescribe),
			allow(kmsg.ACLResourceTypeGroup, "g", kmsg.ACLOperationRead)),
		kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &secured{addr: c.ListenAddrs()[0], certs: certs}
}

func (s *secured) tls(t *testing.T, f tlsconf.Files) *tls.Config {
	t.Helper()
	if f.CAFile == "" {
		f.CAFile = s.certs.CA
	}
	tc, err := tlsconf.Client(f)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func scram256(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
}

// TestClusterErrors: each way a secured cluster refuses a client gives
// one line that names the cluster, the broker's address and what was
// refused, with what to check, from the Ready check of a
// source or a sink; and the client with the right settings is ready.
func TestClusterErrors(t *testing.T) {
	s := newSecured(t, "")
	exp := newSecured(t, "expired")
	plainBroker := testenv.Kafka(t)
	good := func() *kafka.Cluster {
		return &kafka.Cluster{Name: "secure", Seeds: []string{s.addr}, TLS: s.tls(t, tlsconf.Files{}), SASL: scram256("alice", "alice-secret"), SASLUser: "alice"}
	}
	tests := []struct {
		name    string
		cluster func() *kafka.Cluster
		sink    bool // Ready of a sink of "out", else of a source of "in" in group "g"
		want    []string
	}{
		{"right settings, source", good, false, nil},
		{"wrong password", func() *kafka.Cluster { c := good(); c.SASL = scram256("alice", "wrong"); return c }, false,
			// kfake hangs up on a wrong password; Kafka answers
			// SASL_AUTHENTICATION_FAILED (internal/tests/secured tests that).
			[]string{`kafka cluster "secure" (broker ` + s.addr + `): connect: `, `refused user "alice" (SCRAM-SHA-256)`, "wrong password"}},
		{"unknown mechanism", func() *kafka.Cluster {
			c := good()
			c.SASL = oauth.Auth{Token: "x"}.AsMechanism()
			return c
		}, false, []string{`kafka cluster "secure"`, "does not offer SASL mechanism OAUTHBEARER on this listener (it offers PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"}},
		{"unknown CA", func() *kafka.Cluster { c := good(); c.TLS = s.tls(t, tlsconf.Files{CAFile: s.certs.OtherCA}); return c }, false,
			[]string{`kafka cluster "secure" (broker ` + s.addr + `)`, "TLS handshake failed: the broker's certificate is signed by an authority that is not trusted", "tls.ca_file"}},
		{"hostname mismatch", func() *kafka.Cluster {
			c := good()
			c.TLS = s.tls(t, tlsconf.Files{ServerName: "kafka.example.com"})
			return c
		}, false, []string{`kafka cluster "secure"`, `TLS handshake failed: the broker's certificate is not valid for "kafka.example.com" (it is for localhost, 127.0.0.1`}},
		{"expired certificate", func() *kafka.Cluster {
			c := good()
			c.Seeds = []string{exp.addr}
			c.TLS = exp.tls(t, tlsconf.Files{})
			return c
		}, false, []string{`kafka cluster "secure" (broker ` + exp.addr + `)`, "TLS handshake failed: the broker's certificate has expired"}},
		// kfake's plaintext listener waits for the rest of the "request"
		// a TLS ClientHello seems to start; Ready reports the last
		// connection error after pingTimeout (Kafka hangs up at once:
		// internal/tests/secured).
		{"TLS to a plaintext listener", func() *kafka.Cluster {
			c := good()
			c.Seeds, c.SASL = plainBroker.Seeds, nil
			return c
		}, false, []string{`kafka cluster "secure" (broker ` + plainBroker.Seeds[0] + `): connect: `}},
		{"plaintext to a TLS listener", func() *kafka.Cluster { c := good(); c.TLS = nil; return c }, false,
			[]string{`kafka cluster "secure"`, "the broker closed the connection"}},
		{"no SASL on a SASL listener", func() *kafka.Cluster { c := good(); c.SASL = nil; return c }, false,
			[]string{`kafka cluster "secure"`}},
		{"ACL: no WRITE on the sink topic", good, true,
			[]string{`kafka cluster "secure" (broker ` + s.addr + `): write topic "out": not authorized: the user's ACLs do not allow WRITE on topic "out" (it may DESCRIBE)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ready(t, tc.cluster(), tc.sink, "g")
			checkErr(t, err, tc.want)
		})
	}
	t.Run("ACL: no READ on the group", func(t *testing.T) {
		checkErr(t, ready(t, good(), false, "other-group"), []string{`kafka cluster "secure"`, `read group "other-group": not authorized: the user's ACLs do not allow READ on the consumer group`})
	})
	t.Run("PLAIN on the same listener", func(t *testing.T) {
		c := good()
		c.SASL = plain.Auth{User: "nobody", Pass: "x"}.AsMechanism()
		checkErr(t, ready(t, c, false, "g"), []string{`refused user`})
	})
}

// ready runs the Ready check of a source (topic "in", group) or a sink
// (topic "out") on c.
func ready(t *testing.T, c *kafka.Cluster, sink bool, group string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.Opts = append(c.Opts, kgo.RetryTimeout(5*time.Second), kgo.RequestRetries(2))
	if sink {
		k, err := kafka.NewSink(kafka.SinkConfig{Cluster: c, Topic: "out", Partitions: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer testenv.Close(t, context.Background(), k)
		return k.Ready(ctx)
	}
	src, err := kafka.NewSource(kafka.SourceConfig{Cluster: c, Topics: []string{"in"}, Group: group, Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, context.Background(), src)
	return src.Ready(ctx)
}

func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("not ready: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("ready; want an error with %q", want)
	}
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error:\n  %s\nwant it to contain:\n  %s", msg, w)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line:\n%s", msg)
	}
	var ce *kafka.Error
	if !errors.As(err, &ce) {
		t.Errorf("error is not a *kafka.Error: %T", err)
	}
	for _, secret := range []string{"alice-secret", "admin-secret"} {
		if strings.Contains(msg, secret) {
			t.Errorf("error has a password: %s", msg)
		}
	}
	t.Log(msg)
}
