package opscli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/cli/opscli"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

// TestDLQCommandsSecured: `streamd dlq ls` and `replay --to source` reach
// a dead-letter topic on the secured broker (SASL_SSL, SCRAM-SHA-256, CA
// from the config) through [kafka]'s TLS and SASL, with ACLs for the
// user only.
func TestDLQCommandsSecured(t *testing.T) {
	b := testenv.SecureKafka(t)
	prefix := testenv.Topic(t, "sec")
	src, dlqTopic := prefix+"-src", prefix+"-dlq"
	b.AllowAll(t, "User:"+b.User, prefix, prefix)
	var krs []*kgo.Record
	for i := range 5 {
		in := record.Record{Topic: src, Partition: 0, Offset: int64(i), Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("v%d", i))}
		d := pipeline.DeadLetter(in, "s", "", errors.New("secured reject"))
		kr := &kgo.Record{Topic: dlqTopic, Key: d.Key, Value: d.Value}
		for _, h := range d.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		krs = append(krs, kr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Plaintext), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, append(krs, &kgo.Record{Topic: src, Value: []byte("first")})...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "streamd.toml")
	body := fmt.Sprintf(`[kafka]
brokers = [%q]
[kafka.tls]
ca_file = %q
[kafka.sasl]
mechanism = "SCRAM-SHA-256"
username = %q
password = "${file:%s}"
[[pipeline]]
name = "p"
[pipeline.source]
type = "kafka"
topics = [%q]
group = %q
[pipeline.sink]
type = "drop"
[pipeline.errors]
policy = "dlq"
dlq_topic = %q
`, b.SASLSSL, b.CAFile, b.User, b.PasswordFile, src, prefix+"-g", dlqTopic)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := opscli.DLQ(ctx, []string{"ls", "-c", cfg, "p"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "5 dead letters in "+dlqTopic) {
		t.Fatalf("ls: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := opscli.DLQ(ctx, []string{"replay", "-c", cfg, "p"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "5 replayed to their source topics") {
		t.Fatalf("replay: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if strings.Contains(out.String()+errb.String(), b.Password(t, b.PasswordFile)) {
		t.Fatal("the password is in the output")
	}
}
