package secured_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// mechanism is one way to connect to the secured broker: the [kafka]
// table streamd gets, and the kcat properties of the independent client
// that writes the input and reads the output.
type mechanism struct {
	name      string
	principal string
	kafka     func(b *testenv.SecureBroker, dir string) string
	kcat      func(t *testing.T, b *testenv.SecureBroker) (props, brokers string)
	records   int
	python    bool   // Confluent's Python client reads the output too, with SCRAM-SHA-512
	protocol  string // the group protocol, "" for the default
}

func plainKcat(t *testing.T, b *testenv.SecureBroker) (string, string) {
	return kcatConfig(t, map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": b.User,
		"sasl.password": b.Password(t, b.PasswordFile), "ssl.ca.location": b.CAFile}), b.SASLSSL
}

func sslKcat(t *testing.T, b *testenv.SecureBroker) (string, string) {
	return kcatConfig(t, map[string]string{"security.protocol": "SSL", "ssl.ca.location": b.CAFile,
		"ssl.certificate.location": b.ClientCertFile, "ssl.key.location": b.ClientKeyFile}), b.SSL
}

func oauthKcat(t *testing.T, b *testenv.SecureBroker) (string, string) {
	return kcatConfig(t, map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
		"enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": "principal=" + b.User}), b.SASLPlaintext
}

func saslKafka(mech string) func(b *testenv.SecureBroker, dir string) string {
	return func(b *testenv.SecureBroker, dir string) string {
		return fmt.Sprintf(`[kafka]
brokers = [%q]
[kafka.tls]
ca_file = %q
[kafka.sasl]
mechanism = %q
username = %q
password = "${file:%s}"
`, b.SASLSSL, b.CAFile, mech, b.User, b.PasswordFile)
	}
}

func mechanisms() []mechanism {
	return []mechanism{
		{name: "SSL-mTLS", principal: "client", records: 10000, kcat: sslKcat, kafka: func(b *testenv.SecureBroker, dir string) string {
			return fmt.Sprintf("[kafka]\nbrokers = [%q]\n[kafka.tls]\nca_file = %q\ncert_file = %q\nkey_file = %q\n", b.SSL, b.CAFile, b.ClientCertFile, b.ClientKeyFile)
		}},
		{name: "SASL_SSL-SCRAM-SHA-512", records: 10000, kcat: plainKcat, kafka: saslKafka("SCRAM-SHA-512"), python: true},
		{name: "SASL_SSL-PLAIN", records: 10000, kcat: plainKcat, kafka: saslKafka("PLAIN")},
		{name: "SASL_PLAINTEXT-OAUTHBEARER-token-file", records: 10000, kcat: oauthKcat, kafka: func(b *testenv.SecureBroker, dir string) string {
			tok := filepath.Join(dir, "token")
			if err := os.WriteFile(tok, []byte(unsignedJWT(b.User, time.Hour)), 0o600); err != nil {
				panic(err) // no t here; a panic fails the test as well
			}
			return fmt.Sprintf("[kafka]\nbrokers = [%q]\n[kafka.sasl]\nmechanism = \"OAUTHBEARER\"\ntoken_file = %q\n", b.SASLPlaintext, tok)
		}},
		{name: "SASL_SSL-SCRAM-SHA-256", records: 1000, kcat: plainKcat, kafka: saslKafka("SCRAM-SHA-256"), protocol: "consumer"},
	}
}

// allowTestUsers lets the suite's users use the topics and groups whose
// names start with "secured-".
func allowTestUsers(t *testing.T, b *testenv.SecureBroker) {
	t.Helper()
	for _, p := range []string{"User:" + b.User, b.ClientPrincipal} {
		b.AllowAll(t, p, "secured-", "secured-")
	}
}

func createTopics(t *testing.T, b *testenv.SecureBroker, partitions int32, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(b.Admin(t)).CreateTopics(ctx, partitions, 1, nil, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("create %v: %v", topics, err)
	}
}

func pipelineTOML(in, out, group, plugin, cluster string) string {
	c := ""
	if cluster != "" {
		c = fmt.Sprintf("cluster = %q\n", cluster)
	}
	return fmt.Sprintf(`[[pipeline]]
name = "downgrade"
commit_interval = "200ms"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
[[pipeline.transform]]
type = "wasm"
path = %q
[pipeline.sink]
type = "kafka"
topic = %q
%s`, in, group, plugin, out, c)
}

// TestMechanisms: a kafka -> Wasm downgrade ->
// kafka pipeline over each of SSL (mutual TLS), SASL_SSL with
// SCRAM-SHA-512, SASL_SSL with PLAIN and OAUTHBEARER (a token file) on
// the real secured broker (and SCRAM-SHA-256): kcat writes 10,000 records
// in and reads all 10,000 out, each the v1 downgrade of its input. kcat
// speaks PLAIN, mutual TLS and OAUTHBEARER; Debian's kcat fails
// SCRAM-SHA-512 against Kafka 4.1, so for SCRAM the input and output go
// through kcat over the same SASL_SSL listener with PLAIN (the same
// principal), and Confluent's Python client reads the output with
// SCRAM-SHA-512.
func TestMechanisms(t *testing.T) {
	b := testenv.SecureKafka(t)
	kcat := testenv.Tool(t, "kcat")
	plugin := downgradePlugin(t)
	allowTestUsers(t, b)
	for _, m := range mechanisms() {
		t.Run(m.name, func(t *testing.T) {
			in, out := testenv.Topic(t, "secured-in"), testenv.Topic(t, "secured-out")
			createTopics(t, b, 4, in, out)
			props, brokers := m.kcat(t, b)
			start := time.Now()
			kcatProduce(t, kcat, props, brokers, in, 0, m.records)
			group := testenv.Topic(t, "secured-g")
			p := pipelineTOML(in, out, group, plugin, "")
			want := "classic"
			if m.protocol != "" {
				p = strings.Replace(p, fmt.Sprintf("group = %q\n", group), fmt.Sprintf("group = %q\ngroup_protocol = %q\n", group, m.protocol), 1)
				want = m.protocol
			}
			d := startDaemon(t, "streamd", m.kafka(b, t.TempDir())+p)
			kcatConsume(t, kcat, props, brokers, out, 0, m.records)
			t.Logf("%s: %d records in and out in %s", m.name, m.records, time.Since(start).Round(100*time.Millisecond))
			if m.python {
				pythonSCRAM(t, b, out, m.records)
			}
			st := d.pipelines(t)
			src, _ := st[0]["source"].(map[string]any)
			if src["cluster"] != "default" || src["group_protocol"] != want {
				t.Errorf("/pipelines source: %v", st[0]["source"])
			}
			t.Logf("/pipelines source: %v", src)
		})
	}
}

// pythonSCRAM reads topic with Confluent's Python client (its own
// librdkafka) over SASL_SSL with SCRAM-SHA-512 and checks the count.
func pythonSCRAM(t *testing.T, b *testenv.SecureBroker, topic string, n int) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		testenv.Missing(t, "python3")
	}
	if out, err := exec.Command(py, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		testenv.Missing(t, "Python confluent-kafka (scripts/install-tools schema-registry): "+strings.TrimSpace(string(out)))
	}
	conf := filepath.Join(t.TempDir(), "conf.json")
	js, _ := json.Marshal(map[string]string{"bootstrap.servers": b.SASLSSL, "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
		"sasl.username": b.User, "sasl.password": b.Password(t, b.PasswordFile), "ssl.ca.location": b.CAFile,
		"group.id": testenv.Topic(t, "secured-py"), "auto.offset.reset": "earliest", "enable.auto.commit": "false"})
	writeFile(t, conf, string(js))
	script := `
import json, sys, time
from confluent_kafka import Consumer
conf = json.load(open(sys.argv[1]))
c = Consumer(conf)
c.subscribe([sys.argv[2]])
want, seen, deadline = int(sys.argv[3]), set(), time.time() + 120
while len(seen) < want and time.time() < deadline:
    m = c.poll(1.0)
    if m is None:
        continue
    if m.error():
        print("error:", m.error(), file=sys.stderr)
        continue
    seen.add(m.key())
c.close()
print(len(seen))
`
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", script, conf, topic, fmt.Sprint(n)).Output()
	if err != nil {
		t.Fatalf("python SCRAM-SHA-512 consumer: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != fmt.Sprint(n) {
		t.Fatalf("python SCRAM-SHA-512 consumer read %s distinct records of %s, want %d", got, topic, n)
	}
}

// TestOAuthClientCredentials: OAUTHBEARER with the client-credentials
// flow: streamd asks a token endpoint (here a test one issuing unsigned
// JWTs the broker's unsecured validator accepts) for its token, once
// while it is valid.
func TestOAuthClientCredentials(t *testing.T) {
	b := testenv.SecureKafka(t)
	kcat := testenv.Tool(t, "kcat")
	plugin := downgradePlugin(t)
	allowTestUsers(t, b)
	secret := testenv.Secret(t, "oauth client secret")
	var calls atomic.Int64
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, sec, _ := r.BasicAuth()
		if id != "streamd" || sec != secret {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"bearer","expires_in":3600}`, unsignedJWT(b.User, time.Hour))
	}))
	defer idp.Close()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "client-secret"), secret+"\n")
	in, out := testenv.Topic(t, "secured-in"), testenv.Topic(t, "secured-out")
	createTopics(t, b, 2, in, out)
	props, brokers := oauthKcat(t, b)
	kcatProduce(t, kcat, props, brokers, in, 0, 1000)
	startDaemon(t, "streamd", fmt.Sprintf(`[kafka]
brokers = [%q]
[kafka.sasl]
mechanism = "OAUTHBEARER"
token_url = %q
client_id = "streamd"
client_secret = "${file:%s}"
scopes = ["kafka"]
`, b.SASLPlaintext, idp.URL, filepath.Join(dir, "client-secret"))+pipelineTOML(in, out, testenv.Topic(t, "secured-g"), plugin, ""))
	kcatConsume(t, kcat, props, brokers, out, 0, 1000)
	if n := calls.Load(); n < 1 || n > 3 {
		t.Errorf("the token endpoint issued %d tokens for one daemon, want 1 (cached; a few if clients raced)", n)
	}
}

// TestTwoClusters: one pipeline reads the plain
// broker and writes the secured one (SCRAM-SHA-512): kcat writes the
// input on the plain broker and reads the output on the secured one.
func TestTwoClusters(t *testing.T) {
	b := testenv.SecureKafka(t)
	plain := testenv.Kafka(t)
	kcat := testenv.Tool(t, "kcat")
	plugin := downgradePlugin(t)
	allowTestUsers(t, b)
	in, out := testenv.Topic(t, "secured-in"), testenv.Topic(t, "secured-out")
	plain.CreateTopic(t, in, 4)
	createTopics(t, b, 4, out)
	plainProps := kcatConfig(t, map[string]string{"security.protocol": "plaintext"})
	const n = 10000
	kcatProduce(t, kcat, plainProps, strings.Join(plain.Seeds, ","), in, 0, n)
	body := fmt.Sprintf(`[kafka]
brokers = [%q]
[kafka.clusters.secure]
brokers = [%q]
[kafka.clusters.secure.tls]
ca_file = %q
[kafka.clusters.secure.sasl]
mechanism = "SCRAM-SHA-512"
username = %q
password = "${file:%s}"
`, plain.Seeds[0], b.SASLSSL, b.CAFile, b.User, b.PasswordFile) + pipelineTOML(in, out, testenv.Topic(t, "secured-g"), plugin, "secure")
	d := startDaemon(t, "streamd", body)
	props, brokers := plainKcat(t, b)
	kcatConsume(t, kcat, props, brokers, out, 0, n)
	st := d.pipelines(t)
	src, _ := st[0]["source"].(map[string]any)
	sink, _ := st[0]["sink"].(map[string]any)
	if src["cluster"] != "default" || sink["cluster"] != "secure" {
		t.Errorf("/pipelines: source %v, sink %v", src, sink)
	}
}

// faultCase is one way the secured broker refuses streamd.
type faultCase struct {
	name  string
	kafka func(t *testing.T, b *testenv.SecureBroker, dir string) string
	// want are the parts of the one line the log and /readyz give.
	want []string
	// fix fixes the cause, nil when only a restart with a corrected
	// config fixes it.
	fix func(t *testing.T, b *testenv.SecureBroker, dir, out string)
	// setup runs before streamd starts (ACLs of the case's user).
	setup func(t *testing.T, b *testenv.SecureBroker, in, out, group string)
}

// TestActionableErrors: a wrong password, an
// unknown CA, a host name the broker's certificate does not have, and a
// user whose ACLs allow the source topic but not the sink topic each give
// one clear line naming the cluster, the broker's address and what was
// refused, in the log and in /readyz (503); nothing is committed and
// nothing written while it lasts; after the fix (the password file
// rewritten, the ACL granted) the pipeline goes on by itself and every
// record comes out, once.
func TestActionableErrors(t *testing.T) {
	b := testenv.SecureKafka(t)
	kcat := testenv.Tool(t, "kcat")
	plugin := downgradePlugin(t)
	allowTestUsers(t, b)
	other := testenv.NewCerts(t) // a CA that did not sign the broker's certificate
	scram := func(user, pwFile, extraTLS string) string {
		return fmt.Sprintf("[kafka]\nbrokers = [%q]\n[kafka.tls]\nca_file = %q\n%s[kafka.sasl]\nmechanism = \"SCRAM-SHA-512\"\nusername = %q\npassword = \"${file:%s}\"\n",
			b.SASLSSL, b.CAFile, extraTLS, user, pwFile)
	}
	cases := []faultCase{
		{
			name: "wrong password",
			kafka: func(t *testing.T, b *testenv.SecureBroker, dir string) string {
				writeFile(t, filepath.Join(dir, "password"), testenv.Secret(t, "wrong password")+"\n")
				return scram(b.User, filepath.Join(dir, "password"), "")
			},
			want: []string{`kafka cluster "default" (broker ` + b.SASLSSL + `): connect: authentication failed: the broker refused user "alice" (SCRAM-SHA-512)`},
			fix: func(t *testing.T, b *testenv.SecureBroker, dir, _ string) {
				writeFile(t, filepath.Join(dir, "password"), b.Password(t, b.PasswordFile)+"\n")
			},
		},
		{
			name: "unknown CA",
			kafka: func(t *testing.T, b *testenv.SecureBroker, dir string) string {
				return strings.Replace(scram(b.User, b.PasswordFile, ""), b.CAFile, other.CA, 1)
			},
			want: []string{`kafka cluster "default" (broker ` + b.SASLSSL + `): connect: TLS handshake failed: the broker's certificate is signed by an authority that is not trusted`},
		},
		{
			name: "hostname mismatch",
			kafka: func(t *testing.T, b *testenv.SecureBroker, dir string) string {
				return scram(b.User, b.PasswordFile, "server_name = \"kafka.example.com\"\n")
			},
			want: []string{`kafka cluster "default" (broker ` + b.SASLSSL + `): connect: TLS handshake failed: the broker's certificate is not valid for "kafka.example.com" (it is for localhost, 127.0.0.1`},
		},
		{
			name: "unknown mechanism",
			kafka: func(t *testing.T, b *testenv.SecureBroker, dir string) string {
				return fmt.Sprintf("[kafka]\nbrokers = [%q]\n[kafka.tls]\nca_file = %q\n[kafka.sasl]\nmechanism = \"OAUTHBEARER\"\ntoken = %q\n",
					b.SASLSSL, b.CAFile, unsignedJWT(b.User, time.Hour))
			},
			want: []string{`kafka cluster "default" (broker ` + b.SASLSSL + `): connect: the broker does not offer SASL mechanism OAUTHBEARER on this listener (it offers PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)`},
		},
		{
			name: "ACL allows the source topic but not the sink topic",
			setup: func(t *testing.T, b *testenv.SecureBroker, in, out, group string) {
				bob := "User:" + b.User2
				b.Allow(t,
					testenv.ACL{Principal: bob, Resource: kmsgTopic, Name: in, Literal: true, Op: kmsgRead},
					testenv.ACL{Principal: bob, Resource: kmsgTopic, Name: in, Literal: true, Op: kmsgDescribe},
					testenv.ACL{Principal: bob, Resource: kmsgGroup, Name: group, Literal: true, Op: kmsgRead},
					testenv.ACL{Principal: bob, Resource: kmsgTopic, Name: out, Literal: true, Op: kmsgDescribe})
			},
			kafka: func(t *testing.T, b *testenv.SecureBroker, dir string) string {
				return scram(b.User2, b.Password2File, "")
			},
			fix: func(t *testing.T, b *testenv.SecureBroker, _, out string) {
				b.Allow(t, testenv.ACL{Principal: "User:" + b.User2, Resource: kmsgTopic, Name: out, Literal: true, Op: kmsgWrite})
			},
			want: []string{`kafka cluster "default" (broker `, `): write topic "`, `": not authorized: the user's ACLs do not allow WRITE on topic "secured-out-`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, out, group := testenv.Topic(t, "secured-in"), testenv.Topic(t, "secured-out"), testenv.Topic(t, "secured-g")
			createTopics(t, b, 2, in, out)
			props, brokers := plainKcat(t, b)
			const n = 2000
			kcatProduce(t, kcat, props, brokers, in, 0, n)
			if tc.setup != nil {
				tc.setup(t, b, in, out, group)
			}
			dir := t.TempDir()
			body := tc.kafka(t, b, dir) + pipelineTOML(in, out, group, plugin, "") + "[pipeline.errors]\nretry_max = \"2s\"\n"
			d := startDaemon(t, "streamd", body)
			// /readyz: 503 with the line.
			var code int
			var ready string
			deadline := time.Now().Add(60 * time.Second)
			for {
				code, ready = d.readyz(t)
				if code == 503 && strings.Contains(ready, "kafka cluster") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("/readyz: %d %s; want 503 with the reason", code, ready)
				}
				time.Sleep(200 * time.Millisecond)
			}
			var rz struct {
				Reasons map[string]string `json:"reasons"`
			}
			if err := json.Unmarshal([]byte(ready), &rz); err != nil {
				t.Fatalf("/readyz %s: %v", ready, err)
			}
			reason := rz.Reasons["downgrade"]
			for _, w := range tc.want {
				if !strings.Contains(reason, w) {
					t.Errorf("/readyz reason:\n  %s\nwant:\n  %s", reason, w)
				}
			}
			// The log has it, on one line.
			var line string
			for _, l := range strings.Split(strings.ReplaceAll(d.log(t), `\"`, `"`), "\n") {
				if strings.Contains(l, tc.want[0]) {
					line = l
					break
				}
			}
			if line == "" {
				t.Errorf("no log line has %q", tc.want[0])
			}
			t.Logf("log: %s", line)
			t.Logf("/readyz: %d %s", code, reason)
			// Nothing committed, nothing written.
			time.Sleep(2 * time.Second)
			checkNothingYet(t, b, group, out)
			if tc.fix == nil {
				return
			}
			// Fix the cause: the pipeline goes on by itself.
			fixed := time.Now()
			tc.fix(t, b, dir, out)
			d.waitReady(t, 90*time.Second)
			kcatConsume(t, kcat, props, brokers, out, 0, n)
			t.Logf("after the fix: ready and all %d records out, once, in %s", n, time.Since(fixed).Round(100*time.Millisecond))
		})
	}
}

// checkNothingYet checks that group has committed nothing and topic has
// no record.
func checkNothingYet(t *testing.T, b *testenv.SecureBroker, group, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(b.Admin(t))
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("committed offsets of %s: %v", group, err)
	}
	if n := len(offs.Sorted()); n != 0 {
		t.Errorf("group %s committed %d offsets during the fault: %v", group, n, offs.Sorted())
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("%s/%d has %d records during the fault", o.Topic, o.Partition, o.Offset)
		}
	})
}

const (
	kmsgTopic    = kmsg.ACLResourceTypeTopic
	kmsgGroup    = kmsg.ACLResourceTypeGroup
	kmsgRead     = kmsg.ACLOperationRead
	kmsgWrite    = kmsg.ACLOperationWrite
	kmsgDescribe = kmsg.ACLOperationDescribe
)

// TestACLRevokedWhileRunning: an ACL taken away from a running pipeline
// (WRITE on its sink topic) stalls it: the records are retried, not
// dead-lettered or dropped, /readyz says 503 with the refusal, and no
// offset is committed past what was written; granted again, it goes on by
// itself and every record comes out once.
func TestACLRevokedWhileRunning(t *testing.T) {
	b := testenv.SecureKafka(t)
	kcat := testenv.Tool(t, "kcat")
	plugin := downgradePlugin(t)
	allowTestUsers(t, b)
	in, out, group := testenv.Topic(t, "secured-in"), testenv.Topic(t, "secured-out"), testenv.Topic(t, "secured-g")
	createTopics(t, b, 2, in, out)
	bob := "User:" + b.User2
	write := testenv.ACL{Principal: bob, Resource: kmsgTopic, Name: out, Literal: true, Op: kmsgWrite}
	b.Allow(t,
		testenv.ACL{Principal: bob, Resource: kmsgTopic, Name: in, Literal: true, Op: kmsgRead},
		testenv.ACL{Principal: bob, Resource: kmsgTopic, Name: in, Literal: true, Op: kmsgDescribe},
		testenv.ACL{Principal: bob, Resource: kmsgGroup, Name: group, Literal: true, Op: kmsgRead},
		testenv.ACL{Principal: bob, Resource: kmsgTopic, Name: out, Literal: true, Op: kmsgDescribe},
		write)
	props, brokers := plainKcat(t, b)
	kcatProduce(t, kcat, props, brokers, in, 0, 1000)
	body := fmt.Sprintf("[kafka]\nbrokers = [%q]\n[kafka.tls]\nca_file = %q\n[kafka.sasl]\nmechanism = \"SCRAM-SHA-512\"\nusername = %q\npassword = \"${file:%s}\"\n",
		b.SASLSSL, b.CAFile, b.User2, b.Password2File) +
		strings.Replace(pipelineTOML(in, out, group, plugin, ""), "commit_interval = \"200ms\"\n", "commit_interval = \"200ms\"\nstall_timeout = \"3s\"\n", 1) +
		"[pipeline.errors]\npolicy = \"drop\"\nretry_max = \"1s\"\n"
	d := startDaemon(t, "streamd", body)
	kcatConsume(t, kcat, props, brokers, out, 0, 1000)
	d.waitReady(t, 30*time.Second)
	b.Revoke(t, write)
	kcatProduce(t, kcat, props, brokers, in, 1000, 1000)
	var reason string
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, body := d.readyz(t)
		if code == 503 && strings.Contains(body, "TOPIC_AUTHORIZATION_FAILED") {
			var rz struct {
				Reasons map[string]string `json:"reasons"`
			}
			if err := json.Unmarshal([]byte(body), &rz); err != nil {
				t.Fatalf("/readyz %s: %v", body, err)
			}
			reason = rz.Reasons["downgrade"]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the revoke: %d %s", code, body)
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("/readyz: %s", reason)
	if !strings.Contains(reason, `kafka cluster "default"`) || !strings.Contains(reason, "produce to topic "+out) || !strings.Contains(reason, "not authorized") {
		t.Errorf("reason %q: want the cluster, the topic and the refusal", reason)
	}
	// Nothing committed past what was written: at most the first 1000.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(b.Admin(t)).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed > 1000 {
		t.Errorf("%d offsets committed while writes were refused, want at most the 1000 written", committed)
	}
	b.Allow(t, write)
	fixed := time.Now()
	kcatConsume(t, kcat, props, brokers, out, 0, 2000)
	d.waitReady(t, 60*time.Second)
	t.Logf("WRITE granted again: all 2000 out, once, and ready in %s", time.Since(fixed).Round(100*time.Millisecond))
	if st := d.pipelines(t); st[0]["dropped"] != float64(0) && st[0]["dropped"] != nil {
		t.Errorf("records dropped: %v", st[0]["dropped"])
	}
}
