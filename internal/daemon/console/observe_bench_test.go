package console_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/daemon/console"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// BenchmarkStageCall is what the console's observer costs a stage call of
// 1024 records: with no tap open (what every pipeline pays) and with a
// tap open sampling 10 records/s. ns/op is per call, so per record it is
// ns/op / 1024.
func BenchmarkStageCall(b *testing.B) {
	in := make([]record.Record, 1024)
	out := make([]plugins.Result, len(in))
	for i := range in {
		in[i] = record.Record{Topic: "t", Key: []byte(fmt.Sprint(i)), Value: []byte(`{"order_id":"o-1","amount_cents":1234}`)}
		out[i] = plugins.Result{Records: in[i : i+1]}
	}
	for _, tapOpen := range []bool{false, true} {
		b.Run(fmt.Sprintf("tap=%v", tapOpen), func(b *testing.B) {
			c := console.New(console.WithPipelines(func() []console.Pipeline {
				return []console.Pipeline{{Name: "p", Stages: []console.Stage{{Name: "s"}}}}
			}))
			defer testenv.Close(b, context.Background(), c)
			obs := c.Observer("p", []string{"s"})
			if tapOpen {
				srv := httptest.NewServer(c)
				defer srv.Close()
				res, err := http.Get(srv.URL + "/ui/api/tap/p/s?rate=10")
				if err != nil || res.StatusCode != 200 {
					b.Fatalf("tap: %v %v", err, res)
				}
				defer testenv.Ignore(res.Body.Close)
				go func() {
					sc := bufio.NewScanner(res.Body)
					for sc.Scan() {
					}
				}()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				obs.StageCall("s", in, out, nil, 250*time.Microsecond)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(in)), "ns/record")
		})
	}
}
