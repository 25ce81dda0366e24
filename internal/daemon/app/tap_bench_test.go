package app

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/console"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/file"
	"github.com/streamd/streamd/pipeline/generate"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/plugins/wasm"
)

// BenchmarkTap: the same pipeline
// (generated orders -> the identity Wasm plugin of examples/wasm/wat ->
// a sink that drops them) with its stage not observed ("none", the
// pipeline as it is without a console), observed by the console with no
// tap open ("observed": what every pipeline of a daemon with the console
// pays), and with a tap open on the stage sampling 10 records/s ("tap").
// The identity plugin does almost nothing per record, so the observer's
// share is as large as it can be. Run it interleaved, e.g.
//
//	go test -run '^$' -bench BenchmarkTap -count 6 -benchtime 200000x ./internal/daemon/app | tee bin/tap.txt
//	benchstat -col /observer bin/tap.txt
func BenchmarkTap(b *testing.B) {
	dir := b.TempDir()
	mod := testenv.ExampleWat(b, "identity")
	ctx := context.Background()
	p, err := wasm.Open(ctx, mod, plugins.Options{Kind: plugins.KindTransform, Pool: 2, Wasm: plugins.WasmOptions{CacheDir: filepath.Join(dir, "cache")}})
	if err != nil {
		b.Fatal(err)
	}
	testenv.CloseAtEnd(b, p)
	stage := pipeline.Stage{Name: "identity", Transformer: p.(plugins.Transformer), Plugin: "identity"}

	for _, mode := range []string{"none", "observed", "tap"} {
		b.Run("observer="+mode, func(b *testing.B) {
			a := &App{}
			stages := []pipeline.Stage{stage}
			opts := []pipeline.Option{pipeline.WithStages(stages...)}
			if mode != "none" {
				a.console = console.New(console.WithPipelines(func() []console.Pipeline {
					return []console.Pipeline{{Name: "bench", Stages: []console.Stage{{Name: "identity", Type: "wasm"}}}}
				}))
				defer testenv.Close(b, context.Background(), a.console)
				opts = append(opts, pipeline.WithObserver(a.consoleObserver("bench", stages)))
			}
			if mode == "tap" {
				srv := httptest.NewServer(a.console)
				defer srv.Close()
				res, err := http.Get(srv.URL + "/ui/api/tap/bench/identity?rate=10")
				if err != nil || res.StatusCode != 200 {
					b.Fatalf("tap: %v %v", err, res)
				}
				defer testenv.Ignore(res.Body.Close)
				go func() { // read the tap as a client would
					sc := bufio.NewScanner(res.Body)
					for sc.Scan() {
					}
				}()
			}
			pl := pipeline.New("bench", generate.NewSource(0, int64(b.N), 100), file.DropSink{}, opts...)
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			if err := pl.Run(ctx); err != nil {
				b.Fatal(err)
			}
			took, cpu := time.Since(start), cpuTime()-cpu0
			b.StopTimer()
			if st := pl.Status(); st.Out != int64(b.N) {
				b.Fatalf("%d of %d records written", st.Out, b.N)
			}
			b.ReportMetric(float64(b.N)/took.Seconds(), "records/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/record")
		})
	}
	_ = os.Remove(mod)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
