package fluid

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMain doubles as a bridge process for the SIGKILL test: with
// FLUID_TEST_BRIDGE set it runs a bridge (configured from the environment)
// until killed, instead of running tests.
func TestMain(m *testing.M) {
	if os.Getenv("FLUID_TEST_BRIDGE") == "1" {
		os.Exit(runTestBridge())
	}
	if os.Getenv("FLUID_TEST_CONSUMER") == "1" {
		os.Exit(runTestConsumer())
	}
	os.Exit(m.Run())
}

func runTestBridge() int {
	env := func(k string) string { return os.Getenv("FLUID_TEST_" + k) }
	meta, err := LoadMetadata(env("METADATA"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if t := env("TOPIC"); t != "orders" {
		meta = meta.renameTopic("orders", t)
	}
	delay, _ := time.ParseDuration(env("DELAY"))
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	b, err := NewBridge(context.Background(), WithMetadata(meta), WithLoader(goLoader(delay)),
		WithBrokers(strings.Split(env("BROKERS"), ",")...), WithStateTopic(env("STATE")), WithLeaderGroup(env("LEADER")),
		WithInstanceID("sigkill-test"), WithLogger(log),
		WithKafkaOptions(kgo.FetchMaxPartitionBytes(4096), kgo.FetchMaxBytes(4096)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.WriteFile(env("ADDR_FILE")+".tmp", []byte(ln.Addr().String()), 0o644); err != nil {
		return 1
	}
	if err := os.Rename(env("ADDR_FILE")+".tmp", env("ADDR_FILE")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = http.Serve(ln, b.Handler())
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// runTestConsumer is a fluid consumer process for TestConsumerSIGKILL: it
// prints "R <id>" for every record it receives and "C" after every
// successful commit; it commits after every poll until it has
// FLUID_TEST_COMMIT_UPTO records, then only receives (and prints) until it
// is killed.
func runTestConsumer() int {
	env := func(k string) string { return os.Getenv("FLUID_TEST_" + k) }
	upto, _ := strconv.Atoi(env("COMMIT_UPTO"))
	session, _ := time.ParseDuration(env("SESSION"))
	kopts := []kgo.Opt{kgo.SeedBrokers(strings.Split(env("BROKERS"), ",")...), kgo.SessionTimeout(session)}
	if id := env("INSTANCE"); id != "" {
		kopts = append(kopts, kgo.InstanceID(id))
	}
	ctx := context.Background()
	c, err := NewConsumer(ctx, ConsumerConfig{BridgeURL: env("BRIDGE_URL"), Topic: env("TOPIC"), Group: env("GROUP"),
		CompatibleVersion: 1, MaxPollRecords: 10, KafkaOptions: kopts, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n := 0
	for {
		rs, err := c.Poll(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, r := range rs {
			var m struct{ ID int }
			if err := json.Unmarshal(r.Value, &m); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Printf("R %d\n", m.ID)
			n++
		}
		c.Ack(rs)
		if n <= upto && len(rs) > 0 {
			if err := c.Commit(ctx); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Println("C")
		}
	}
}
