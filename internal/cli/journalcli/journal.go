package journalcli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/cli/termsafe"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/internal/daemon/kafkaconf"
	"github.com/streamd/streamd/journal"
)

const journalUsage = `usage: streamd journal <command> -c config.toml --topic T --id ID [flags]

commands:
  append  --events FILE|-   append events, one JSON object a line:
                            {"seqNr":1,"payload":{...},"tags":["a"]}
                            (payloadType "text" or "binary" (base64) also accepted)
          [--expire-after DURATION]   e.g. 24h
  read    [--from N] [--raw]
                            print the journal's events as JSON lines, in seqNr order;
                            control characters in them are written as JSON escapes
                            (\u001b, \u009b: the same JSON), so that an event cannot act
                            on the terminal; --raw writes them as they are
  pointer                   print the last seqNr, or null
  delete  --to N            delete events up to N
  purge                     remove the whole journal

The brokers come from [kafka] and the store from [journal] store in the config.
Writes print where the action went: {"partition":P,"offset":O}.
`

// Main is `streamd journal COMMAND` (journalUsage).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, journalUsage)
		return 2
	}
	sub := args[0]
	fs := flag.NewFlagSet("streamd journal "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, journalUsage) }
	cfgPath := fs.String("c", "", "config file (brokers and journal store)")
	topic := fs.String("topic", "", "journal topic")
	id := fs.String("id", "", "journal id")
	events := fs.String("events", "", "append: file of JSON-lines events, or - for stdin")
	expire := fs.Duration("expire-after", 0, "append: expire the journal this long after the append")
	from := fs.Int64("from", 1, "read: first seqNr")
	to := fs.Int64("to", 0, "delete: delete events up to this seqNr")
	raw := fs.Bool("raw", false, "read: write control characters as they are")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "streamd journal %s: %s\n", sub, fmt.Sprintf(format, a...))
		return 1
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "streamd journal %s: %s\n", sub, fmt.Sprintf(format, a...))
		return 2
	}
	switch sub {
	case "append", "read", "pointer", "delete", "purge":
	default:
		return usage("unknown command %q (append, read, pointer, delete, purge)", sub)
	}
	if *cfgPath == "" {
		return usage("-c config.toml is required")
	}
	if *topic == "" || *id == "" {
		return usage("--topic and --id are required")
	}
	if fs.NArg() > 0 {
		return usage("unexpected arguments %q", fs.Args())
	}
	var evs []journal.Event
	switch sub {
	case "append":
		if *events == "" {
			return usage("--events FILE (or - for stdin) is required")
		}
		var err error
		if evs, err = readEvents(*events); err != nil {
			return fail("%v", err)
		}
	case "delete":
		if *to < 1 {
			return usage("--to N (N >= 1) is required")
		}
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return fail("%v", err)
	}
	if cfg.Journal == nil || cfg.Journal.Store == "" {
		return fail("%s: no [journal] store configured", *cfgPath)
	}
	if len(cfg.Kafka.Brokers) == 0 {
		return fail("%s: no [kafka] brokers configured", *cfgPath)
	}
	store, err := openJournalStore(ctx, cfg)
	if err != nil {
		return fail("%v", err)
	}
	// The store and the journal close after ctx is done too, in 10 s at
	// most (a plugin store closes its plugin).
	closeCtx, cancelClose := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelClose()
	defer func() {
		if err := store.Close(closeCtx); err != nil {
			fmt.Fprintf(stderr, "streamd journal %s: closing the store: %v\n", sub, err)
		}
	}()
	// The client of [kafka] as the daemon makes it (TLS, SASL, client ID):
	// internal/daemon/kafkaconf maps the config for both.
	kc, err := kafkaconf.Cluster(cfg.Cluster(config.DefaultCluster), slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return fail("%s: %v", *cfgPath, err)
	}
	cl, err := kgo.NewClient(kc.Options()...)
	if err != nil {
		return fail("kafka: %v", err)
	}
	defer cl.Close()
	// Reading starts consumers of its own: they dial as the client does.
	j := journal.New(cl, store, journal.WithoutHeadCache(), journal.WithConsumerOptions(kc.Options()...))
	defer func() {
		if err := j.Close(closeCtx); err != nil {
			fmt.Fprintf(stderr, "streamd journal %s: %v\n", sub, err)
		}
	}()
	key := journal.Key{Topic: *topic, ID: *id}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	enc := json.NewEncoder(stdout)
	switch sub {
	case "append":
		var aopts []journal.AppendOption
		if *expire > 0 {
			aopts = append(aopts, journal.ExpireAfter(*expire))
		}
		pos, err := j.Append(ctx, key, evs, aopts...)
		if err != nil {
			return fail("%v", err)
		}
		if err := enc.Encode(pos); err != nil {
			return fail("writing the result: %v", err)
		}
	case "read":
		w := bufio.NewWriter(stdout)
		var out io.Writer = w
		var ts *termsafe.Writer
		if !*raw {
			ts = termsafe.NewWriter(w)
			out = ts
		}
		wenc := json.NewEncoder(out)
		_, err := j.Read(ctx, key, *from, func(e journal.Event) error { return wenc.Encode(e) })
		if ts != nil {
			err = errors.Join(err, ts.Flush())
		}
		err = errors.Join(err, w.Flush())
		if err != nil {
			return fail("%v", err)
		}
	case "pointer":
		seqNr, _, err := j.Pointer(ctx, key)
		if err != nil {
			return fail("%v", err)
		}
		if seqNr == 0 {
			fmt.Fprintln(stdout, "null")
		} else {
			fmt.Fprintln(stdout, seqNr)
		}
	case "delete":
		pos, ok, err := j.Delete(ctx, key, *to)
		if err != nil {
			return fail("%v", err)
		}
		if !ok {
			fmt.Fprintln(stdout, "null")
		} else if err := enc.Encode(pos); err != nil {
			return fail("writing the result: %v", err)
		}
	case "purge":
		pos, err := j.Purge(ctx, key)
		if err != nil {
			return fail("%v", err)
		}
		if err := enc.Encode(pos); err != nil {
			return fail("writing the result: %v", err)
		}
	}
	return 0
}

// openJournalStore opens [journal] store for reading; a plugin store
// cannot be read, so the journal is then read from Kafka alone.
func openJournalStore(ctx context.Context, cfg *config.Config) (*journal.Store, error) {
	kind, dsn := cfg.JournalStore()
	if kind == config.StorePlugin {
		return journal.KafkaOnly(), nil
	}
	// Logs (a schema migration) go to stderr; stdout is the command's output.
	return journal.OpenStore(ctx, dsn, journal.WithStoreLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
}

func readEvents(path string) ([]journal.Event, error) {
	var r io.Reader = os.Stdin
	name := "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		r, name = f, path
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var evs []journal.Event
	for line := 1; sc.Scan(); line++ {
		b := strings.TrimSpace(sc.Text())
		if b == "" {
			continue
		}
		var e journal.Event
		if err := json.Unmarshal([]byte(b), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		evs = append(evs, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(evs) == 0 {
		return nil, errors.New(name + ": no events")
	}
	return evs, nil
}
