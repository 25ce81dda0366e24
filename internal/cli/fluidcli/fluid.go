package fluidcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"time"

	"github.com/streamd/streamd/fluid"
	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/load"
)

func fluidUsage(w io.Writer) {
	fmt.Fprint(w, `usage: streamd fluid <command>

commands:
  check [--no-plugins] [--registry URL | -c FILE] [DIR]
                               validate a Fluid metadata directory (default .fluid):
                               version folders, manifests, schemas, a downgrade for
                               every changed topic, and every downgrade plugin loads.
                               Exit 0 when valid, 1 when not, 2 on usage errors.
  bridge --brokers B [--listen A] [--metadata DIR] [--state-topic T] [--instance-id ID]
         [--baseline-version N] [--registry URL | -c FILE]
                               run the Fluid bridge alone, serving /fluid/ on --listen
                               (streamd run serves it on the admin address with [fluid])

A manifest topic that names a registry "subject" takes its schema versions from
a Schema Registry: --registry URL (no auth), or -c FILE for the registry of that
streamd config ([fluid] registry, else [schema_registry]; its auth and TLS). The
bridge then answers /fluid/compatible for such topics by the registry's
compatibility check.
`)
}

// Main is `streamd fluid check|bridge`.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fluidUsage(stderr)
		return 2
	}
	switch args[0] {
	case "check":
		return fluidCheck(ctx, args[1:], stdout, stderr)
	case "bridge":
		return fluidBridge(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "streamd fluid: unknown command %q\n", args[0])
		fluidUsage(stderr)
		return 2
	}
}

func fluidCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("streamd fluid check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	noPlugins := fs.Bool("no-plugins", false, "do not load the downgrade plugins")
	regURL, regConfig := registryFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "streamd fluid check: at most one DIR")
		return 2
	}
	dir := ".fluid"
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	reg, code := fluidRegistry("streamd fluid check", *regURL, *regConfig, stderr)
	if code != 0 {
		return code
	}
	var src fluid.SchemaSource
	if reg != nil {
		src = fluid.RegistrySource(ctx, reg)
	}
	m, err := fluid.LoadMetadataFrom(dir, src)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var load plugins.OpenFunc
	if !*noPlugins {
		load = fluidLoader
	}
	bad := 0
	for _, p := range m.Check(ctx, load) {
		fmt.Fprintln(stderr, p)
		if !p.Warning {
			bad++
		}
	}
	if bad > 0 {
		fmt.Fprintf(stderr, "%s: %d error(s)\n", m.Dir(), bad)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (versions %d..%d, topics %v)\n", m.Dir(), m.First(), m.Last(), m.Topics())
	return 0
}

func fluidBridge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("streamd fluid bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "", "Kafka bootstrap brokers, comma-separated (required)")
	listen := fs.String("listen", "127.0.0.1:9644", "HTTP address to serve /fluid/ on")
	meta := fs.String("metadata", ".fluid", "fluid metadata directory")
	state := fs.String("state-topic", fluid.DefaultStateTopic, "compacted state topic")
	instance := fs.String("instance-id", "", "static leader-group member id (fast takeover after a restart)")
	baseline := fs.Int("baseline-version", 0, "version of records without the header (0: the first)")
	regURL, regConfig := registryFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *brokers == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "streamd fluid bridge: --brokers is required and no arguments are taken")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts := []fluid.Option{fluid.WithMetadataDir(*meta), fluid.WithBrokers(strings.Split(*brokers, ",")...),
		fluid.WithStateTopic(*state), fluid.WithLoader(fluidLoader), fluid.WithLogger(log)}
	if *instance != "" {
		opts = append(opts, fluid.WithInstanceID(*instance))
	}
	if *baseline > 0 {
		opts = append(opts, fluid.WithBaselineVersion(*baseline))
	}
	reg, code := fluidRegistry("streamd fluid bridge", *regURL, *regConfig, stderr)
	if code != 0 {
		return code
	}
	if reg != nil {
		opts = append(opts, fluid.WithRegistry(reg))
	}
	b, err := fluid.NewBridge(ctx, opts...)
	if err != nil {
		fmt.Fprintln(stderr, "streamd fluid bridge:", err)
		return 1
	}
	defer func() { _ = b.Close(context.Background()) }()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "streamd fluid bridge:", err)
		return 1
	}
	srv := &http.Server{Handler: b.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(stdout, "fluid bridge on http://%s (metadata %s)\n", ln.Addr(), *meta)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "streamd fluid bridge:", err)
		return 1
	}
	return 0
}

// fluidLoader loads downgrade plugins: "wasm:PATH" or "*.wasm" in the Wasm
// runtime, "native:PATH" as a native plugin process.
func fluidLoader(ctx context.Context, ref string, opts plugins.Options) (plugins.Plugin, error) {
	return load.Open(ctx, ref, opts)
}

// registryFlags adds --registry and -c to fs.
func registryFlags(fs *flag.FlagSet) (url, file *string) {
	url = fs.String("registry", "", "Schema Registry URL for manifests that name a subject")
	file = fs.String("c", "", "streamd config whose [fluid] registry (else [schema_registry]) to use")
	return url, file
}

// fluidRegistry is the registry of --registry URL or of config file's
// [fluid] registry (else [schema_registry]); nil with neither. code is the
// exit code on an error (2: usage, 1: the config or the client).
func fluidRegistry(name, url, file string, stderr io.Writer) (reg fluid.Registry, code int) {
	switch {
	case url != "" && file != "":
		fmt.Fprintf(stderr, "%s: give --registry or -c, not both\n", name)
		return nil, 2
	case url != "":
		if _, err := neturl.Parse(url); err != nil || !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
			fmt.Fprintf(stderr, "%s: --registry %q: want an http:// or https:// URL\n", name, url)
			return nil, 2
		}
		cl, err := app.NewRegistryClient(&config.SchemaRegistry{URL: url, Timeout: config.Duration{Duration: 10 * time.Second}})
		if err != nil {
			fmt.Fprintf(stderr, "%s: --registry: %v\n", name, err)
			return nil, 1
		}
		return cl, 0
	case file != "":
		cfg, err := config.Load(file)
		if err != nil {
			fmt.Fprintf(stderr, "%s: invalid config:\n%v\n", name, err)
			return nil, 1
		}
		regName := ""
		if cfg.Fluid != nil {
			regName = cfg.Fluid.Registry
		}
		rc := cfg.Registry(regName)
		if rc == nil {
			fmt.Fprintf(stderr, "%s: %s has no [schema_registry]\n", name, cfg.File)
			return nil, 1
		}
		cl, err := app.NewRegistryClient(rc)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s: [schema_registry]: %v\n", name, cfg.File, err)
			return nil, 1
		}
		return cl, 0
	}
	return nil, 0
}
