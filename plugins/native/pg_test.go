package native

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/streamd/streamd/examples/wasm/go/orders-downgrade/downgrade"
	"github.com/streamd/streamd/internal/tests/testenv"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

func postgresDSN(t *testing.T) string {
	dsn := os.Getenv("STREAMD_TEST_POSTGRES_DSN")
	if dsn == "" {
		testenv.Missing(t, "PostgreSQL (set STREAMD_TEST_POSTGRES_DSN; scripts/postgres starts one)")
	}
	return dsn
}

func pgConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	testenv.CloseAtEnd(t, c)
	return c
}

func uniqueTable(t *testing.T, c *pgx.Conn) string {
	name := fmt.Sprintf("native_test_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if _, err := c.Exec(context.Background(), "DROP TABLE IF EXISTS "+name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return name
}

type pgRow struct {
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   string
	TS        *time.Time
}

func readTable(t *testing.T, c *pgx.Conn, table string) map[[2]int64]pgRow {
	t.Helper()
	rows, err := c.Query(context.Background(), `SELECT partition, "offset", key, value, headers::text, ts FROM `+table)
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]int64]pgRow{}
	for rows.Next() {
		var r pgRow
		if err := rows.Scan(&r.Partition, &r.Offset, &r.Key, &r.Value, &r.Headers, &r.TS); err != nil {
			t.Fatal(err)
		}
		out[[2]int64{int64(r.Partition), r.Offset}] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// headersOf decodes the sink's headers column back into record headers.
func headersOf(t *testing.T, s string) []record.Header {
	t.Helper()
	var hs []struct {
		Name     string  `json:"name"`
		Value    *string `json:"value"`
		ValueB64 *string `json:"value_b64"`
	}
	if err := json.Unmarshal([]byte(s), &hs); err != nil {
		t.Fatalf("headers %s: %v", s, err)
	}
	var out []record.Header
	for _, h := range hs {
		var v []byte
		if h.Value != nil {
			v = []byte(*h.Value)
		}
		out = append(out, record.Header{Key: h.Name, Value: v})
	}
	return out
}

// The crash test, plugin side: a Go native transform (orders-downgrade) feeding
// the native PostgreSQL sink, both processes killed with SIGKILL again and
// again mid-stream. Every batch is acknowledged once, and the table holds
// exactly the transformed source records: none missing, none doubled.
func TestPostgresSinkKill9(t *testing.T) {
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
		Kind:   plugins.KindSink,
		Config: map[string]any{"dsn": dsn, "table": table},
	}, fastSup)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, ctx, sp)
	tsup, ssup := tp.(interface{ sup() *supervisor }).sup(), sp.(interface{ sup() *supervisor }).sup()
	tsup.sup.maxCrashes, ssup.sup.maxCrashes = 1000, 1000

	const n, batchSize = 3000, 50
	src := make([]record.Record, n)
	for i := range src {
		src[i] = record.Record{
			Key:       []byte(fmt.Sprintf("o-%d", i)),
			Value:     []byte(fmt.Sprintf(`{"order_id":"o-%d","customer":{"id":"c-%d","tier":"gold"},"amount_cents":%d,"currency":"EUR","v":2}`, i, i%17, i*3-500)),
			Headers:   []record.Header{{Key: "fluid-schema-version", Value: []byte("2")}, {Key: "trace", Value: []byte(fmt.Sprint(i))}, {Key: "nil", Value: nil}},
			Timestamp: time.UnixMilli(1767225600000 + int64(i)).UTC(),
			Topic:     "orders-v2",
			Partition: int32(i % 3),
			Offset:    int64(i / 3),
		}
	}

	var inWrite atomic.Bool
	var kills, killsInWrite atomic.Int64
	stop := make(chan struct{})
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(30+i%4*10) * time.Millisecond):
			}
			s := ssup
			if i%3 == 2 {
				s = tsup
			}
			during := s == ssup && inWrite.Load()
			if pid := s.pidUnlocked(); pid != 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
				kills.Add(1)
				if during {
					killsInWrite.Add(1)
				}
			}
		}
	}()

	acked := 0
	for start := 0; start < n; start += batchSize {
		batch := src[start:min(start+batchSize, n)]
		res, err := tp.(plugins.Transformer).Transform(ctx, batch)
		if err != nil {
			t.Fatalf("transform batch at %d: %v", start, err)
		}
		var out []record.Record
		for i, r := range res {
			if r.Err != nil || len(r.Records) != 1 {
				t.Fatalf("record %d: %d records, err %v", start+i, len(r.Records), r.Err)
			}
			out = append(out, r.Records...)
		}
		inWrite.Store(true)
		errs, err := sp.(plugins.Sink).Write(ctx, out)
		inWrite.Store(false)
		if err != nil {
			t.Fatalf("write batch at %d: %v", start, err)
		}
		for i, e := range errs {
			if e != nil {
				t.Fatalf("record %d not written: %v", start+i, e)
			}
			acked++
		}
	}
	close(stop)
	<-killerDone
	if acked != n {
		t.Fatalf("acknowledged %d records, want %d", acked, n)
	}
	if killsInWrite.Load() == 0 {
		t.Fatalf("%d kills, none while a write was in flight: the test proved nothing", kills.Load())
	}

	rows := readTable(t, conn, table)
	if len(rows) != n {
		t.Fatalf("table has %d rows, want %d", len(rows), n)
	}
	for i, in := range src {
		row, ok := rows[[2]int64{int64(in.Partition), in.Offset}]
		if !ok {
			t.Fatalf("record %d (partition %d offset %d) missing", i, in.Partition, in.Offset)
		}
		wantValue, err := downgrade.Value(nil, in.Value)
		if err != nil {
			t.Fatal(err)
		}
		want := in.Clone()
		want.Value = wantValue
		want.SetHeader("fluid-schema-version", []byte("1"))
		got := record.Record{Key: row.Key, Value: row.Value, Headers: headersOf(t, row.Headers), Topic: want.Topic, Partition: row.Partition, Offset: row.Offset}
		if row.TS != nil {
			got.Timestamp = row.TS.UTC()
		}
		if !recordsEqual([]record.Record{got}, []record.Record{want}) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
	t.Logf("%d records, %d kill -9s (%d during a sink write), restarts: transform %d, sink %d; table exact",
		n, kills.Load(), killsInWrite.Load(), tsup.restarts, ssup.restarts)
}

func TestPostgresSinkRecords(t *testing.T) {
	dsn := postgresDSN(t)
	conn := pgConn(t, dsn)
	table := uniqueTable(t, conn)
	ctx := context.Background()
	sp, err := open(ctx, buildPlugin(t, "examples/native/go/pg-sink"), plugins.Options{
		Config: map[string]any{"dsn": dsn, "table": table, "id": "key"},
	}, fastSup)
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Close(t, ctx, sp)
	in := []record.Record{
		{Key: []byte("a"), Value: []byte("1"), Partition: -1, Offset: -1, Headers: []record.Header{{Key: "bin", Value: []byte{0xff, 0}}, {Key: "empty", Value: []byte{}}}},
		{Key: nil, Value: []byte("no key")},
		{Key: []byte("b"), Value: nil},
		{Key: []byte("a"), Value: []byte("2"), Partition: -1, Offset: -1},
	}
	errs, err := sp.(plugins.Sink).Write(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "null key") || errs[2] != nil || errs[3] != nil {
		t.Fatalf("errs %v", errs)
	}
	var n int
	var v []byte
	var hs string
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT value, headers::text FROM "+table+" WHERE key = 'a'").Scan(&v, &hs); err != nil {
		t.Fatal(err)
	}
	if n != 2 || string(v) != "2" || hs != "[]" {
		t.Fatalf("rows %d, a = %q %s", n, v, hs)
	}
}

func TestPostgresSinkConfig(t *testing.T) {
	bin := buildPlugin(t, "examples/native/go/pg-sink")
	tests := []struct {
		cfg     map[string]any
		wantErr string
	}{
		{map[string]any{"table": "t"}, "config refused: config: dsn is required"},
		{map[string]any{"dsn": "postgres://x@127.0.0.1:1/x", "table": "t; DROP TABLE x"}, `table "t; DROP TABLE x" is not a plain [schema.]name`},
		{map[string]any{"dsn": "postgres://x@127.0.0.1:1/x", "table": "t", "id": "uuid"}, `id "uuid" is not "position" or "key"`},
		{map[string]any{"dsn": "postgres://x@127.0.0.1:1/x", "table": "t"}, "create table t:"},
	}
	for _, tt := range tests {
		t.Run(tt.wantErr, func(t *testing.T) {
			p, err := open(context.Background(), bin, plugins.Options{Config: tt.cfg}, fastSup)
			if err == nil {
				testenv.Close(t, context.Background(), p)
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}
