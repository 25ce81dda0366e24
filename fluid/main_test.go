package fluid

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
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
	os.Rename(env("ADDR_FILE")+".tmp", env("ADDR_FILE"))
	err = http.Serve(ln, b.Handler())
	fmt.Fprintln(os.Stderr, err)
	return 1
}
