package brokercli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/streamd/streamd/internal/daemon/embedded"
)

// Main is `streamd broker`: the embedded broker alone, until ctx is done.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("streamd broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9092", "address to listen on")
	dir := fs.String("data-dir", "data/broker", "where partitions, offsets and producer ids persist")
	partitions := fs.Int("partitions", 4, "partitions of auto-created topics")
	syncWrites := fs.Bool("sync-writes", false, "fsync every write")
	retention := fs.Duration("retention", embedded.DefaultRetention, "how long records are kept, from their timestamps, on topics that set no retention.ms (negative: forever)")
	retentionBytes := fs.Int64("retention-bytes", embedded.DefaultRetentionBytes, "bound of each partition of topics that set no retention.bytes (negative: none)")
	segmentBytes := fs.Int64("segment-bytes", embedded.DefaultSegmentBytes, "size of a partition's segment files")
	budget := fs.Int64("disk-budget-bytes", embedded.DefaultDiskBudget, "bound of the data directory: a warning at 80%, past it the largest partitions lose their oldest records (negative: none)")
	check := fs.Duration("retention-check-interval", embedded.DefaultRetentionCheck, "how often retention and the disk budget are applied")
	metrics := fs.String("metrics", "", "serve the broker's Prometheus metrics at http://ADDR/metrics (loopback unless you mean it; default off)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch {
	case *retention == 0:
		fmt.Fprintln(stderr, "streamd broker: --retention 0 would delete every record at once (negative keeps them forever)")
		return 2
	case *retentionBytes == 0, *budget == 0, *segmentBytes <= 0, *check <= 0:
		fmt.Fprintln(stderr, "streamd broker: --retention-bytes and --disk-budget-bytes must not be 0 (negative: no bound); --segment-bytes and --retention-check-interval must be above 0")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("broker", "embedded")
	b, err := embedded.Start(embedded.Config{Listen: *listen, DataDir: *dir, SyncWrites: *syncWrites, Partitions: int32(*partitions),
		Logger: log, Retention: *retention, RetentionBytes: *retentionBytes, SegmentBytes: *segmentBytes, DiskBudget: *budget,
		RetentionCheck: *check})
	if err != nil {
		fmt.Fprintf(stderr, "streamd broker: %v\n", err)
		return 1
	}
	defer b.Close()
	if *metrics != "" {
		ln, err := net.Listen("tcp", *metrics)
		if err != nil {
			fmt.Fprintf(stderr, "streamd broker: --metrics: %v\n", err)
			return 1
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(b.Collector())
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server", "err", err)
			}
		}()
		defer func() { _ = srv.Close() }() // at exit: nothing to do with its error
		fmt.Fprintf(stdout, "streamd broker metrics at http://%s/metrics\n", ln.Addr())
	}
	fmt.Fprintf(stdout, "streamd broker listening on %v, data in %s\n", b.ListenAddrs(), *dir)
	<-ctx.Done()
	return 0
}
