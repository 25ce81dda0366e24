package native

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/streamd/streamd/examples/wasm/go/orders-downgrade/downgrade"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// sliceSource is a finite pipeline.Source over records that counts the acks
// of each one.
type sliceSource struct {
	mu    sync.Mutex
	recs  []record.Record
	next  int
	acks  []int
	batch int
}

func (s *sliceSource) Fetch(ctx context.Context) ([]pipeline.Msg, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= len(s.recs) {
		return nil, io.EOF
	}
	end := min(s.next+s.batch, len(s.recs))
	out := make([]pipeline.Msg, 0, end-s.next)
	for i := s.next; i < end; i++ {
		out = append(out, pipeline.Msg{Record: s.recs[i], Token: uint64(i)})
	}
	s.next = end
	return out, ctx.Err()
}

func (s *sliceSource) Ack(msgs []pipeline.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.acks[m.Token]++
	}
}

func (s *sliceSource) Commit(context.Context) error { return nil }
func (s *sliceSource) Close(context.Context) error  { return nil }

// The crash test with the pipeline engine: source -> Go native transform
// (orders-downgrade) -> native PostgreSQL sink, with both plugin processes
// killed by SIGKILL again and again while the pipeline runs. Every source
// record is acknowledged exactly once and the table holds exactly the
// transformed source records.
func TestPipelineNativeToPostgresKill9(t *testing.T) {
	dsn := postgresDSN(t)
	conn := pgConn(t, dsn)
	table := uniqueTable(t, conn)
	ctx := context.Background()

	tp, err := open(ctx, buildPlugin(t, "examples/native/go/orders-downgrade"), plugins.Options{Kind: plugins.KindTransform}, fastSup)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, ctx, tp)
	sp, err := open(ctx, buildPlugin(t, "examples/native/go/pg-sink"), plugins.Options{
		Kind: plugins.KindSink, Config: map[string]any{"dsn": dsn, "table": table},
	}, fastSup)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, ctx, sp)
	tsup, ssup := tp.(*transformPlugin).sup(), sp.(*sinkPlugin).sup()
	tsup.sup.maxCrashes, ssup.sup.maxCrashes = 1000, 1000

	const n = 5000
	src := &sliceSource{batch: 100, acks: make([]int, n)}
	for i := range n {
		src.recs = append(src.recs, record.Record{
			Key:       []byte(fmt.Sprintf("o-%d", i)),
			Value:     []byte(fmt.Sprintf(`{"order_id":"o-%d","customer":{"id":"c-%d"},"amount_cents":%d,"currency":"EUR"}`, i, i%11, i)),
			Headers:   []record.Header{{Key: "fluid-schema-version", Value: []byte("2")}},
			Timestamp: time.UnixMilli(1767225600000 + int64(i)).UTC(),
			Topic:     "orders", Partition: int32(i % 4), Offset: int64(i / 4),
		})
	}
	p := pipeline.New("native-pg", src, sp.(plugins.Sink),
		pipeline.WithStages(pipeline.Stage{Name: "downgrade", Transformer: tp.(plugins.Transformer), Plugin: "orders-downgrade"}),
		pipeline.WithBatch(64, 1<<20, time.Millisecond),
		pipeline.WithErrorPolicy(pipeline.PolicyStop, nil))

	var kills atomic.Int64
	stop := make(chan struct{})
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(40+i%5*10) * time.Millisecond):
			}
			s := ssup
			if i%2 == 1 {
				s = tsup
			}
			if pid := s.pidUnlocked(); pid != 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
				kills.Add(1)
			}
		}
	}()
	runCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	err = p.Run(runCtx)
	close(stop)
	<-killerDone
	if err != nil {
		t.Fatalf("pipeline: %v (status %+v)", err, p.Status())
	}
	if kills.Load() < 4 {
		t.Fatalf("only %d kills landed while the pipeline ran", kills.Load())
	}
	for i, a := range src.acks {
		if a != 1 {
			t.Fatalf("source record %d acknowledged %d times", i, a)
		}
	}
	rows := readTable(t, conn, table)
	if len(rows) != n {
		t.Fatalf("table has %d rows, want %d", len(rows), n)
	}
	for i, in := range src.recs {
		row, ok := rows[[2]int64{int64(in.Partition), in.Offset}]
		if !ok {
			t.Fatalf("record %d missing from the table", i)
		}
		want, _ := downgrade.Value(nil, in.Value)
		if string(row.Value) != string(want) || string(row.Key) != string(in.Key) || row.TS == nil || !row.TS.Equal(in.Timestamp) ||
			row.Headers != `[{"name": "fluid-schema-version", "value": "1"}]` {
			t.Fatalf("record %d: row %+v", i, row)
		}
	}
	t.Logf("%d records through the pipeline, %d kill -9s, restarts: transform %d, sink %d; each acked once, table exact; status %+v",
		n, kills.Load(), tsup.restarts, ssup.restarts, p.Status().Counts)
}
