package generate

import (
	"context"
	"io"
	"strconv"
	"time"

	"github.com/streamd/streamd/internal/x/wait"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/record"
)

// Source makes synthetic v2 order records:
//
//	{"order_id":"o-1","customer":{"id":"c-1","name":"Customer 1"},"amount_cents":1234,"currency":"EUR","tags":["new"]}
//
// keyed by customer id, with header fluid-schema-version: 2.
type Source struct {
	rate  float64
	count int64
	keys  int
	start time.Time
	n     int64
}

// NewSource returns a source of count records (0: unbounded) at rate
// records per second (0: as fast as possible) over keys distinct keys.
func NewSource(rate float64, count int64, keys int) *Source {
	return &Source{rate: rate, count: count, keys: max(1, keys)}
}

var currencies = []string{"EUR", "USD", "GBP", "CZK"}

// Order returns the n-th synthetic order's value (deterministic in n).
func Order(n int64, keys int) (key, value []byte) {
	c := n % int64(keys)
	key = []byte("c-" + strconv.FormatInt(c, 10))
	v := make([]byte, 0, 160)
	v = append(v, `{"order_id":"o-`...)
	v = strconv.AppendInt(v, n, 10)
	v = append(v, `","customer":{"id":"c-`...)
	v = strconv.AppendInt(v, c, 10)
	v = append(v, `","name":"Customer `...)
	v = strconv.AppendInt(v, c, 10)
	v = append(v, `"},"amount_cents":`...)
	v = strconv.AppendInt(v, (n*7919)%100000, 10)
	v = append(v, `,"currency":"`...)
	v = append(v, currencies[n%int64(len(currencies))]...)
	v = append(v, `","tags":["generated","batch-`...)
	v = strconv.AppendInt(v, n/1000, 10)
	v = append(v, `"]}`...)
	return key, v
}

// Fetch implements pipeline.Source.
func (g *Source) Fetch(ctx context.Context) ([]pipeline.Msg, error) { return g.FetchUpTo(ctx, 256) }

// FetchUpTo implements pipeline.BoundedSource.
func (g *Source) FetchUpTo(ctx context.Context, n int) ([]pipeline.Msg, error) {
	if g.start.IsZero() {
		g.start = time.Now()
	}
	if g.count > 0 && g.n >= g.count {
		return nil, io.EOF
	}
	want := int64(max(1, min(n, 256)))
	if g.rate > 0 {
		due := int64(time.Since(g.start).Seconds()*g.rate) + 1
		for due <= g.n {
			d := time.Duration(float64(g.n+1-due)/g.rate*float64(time.Second)) + time.Millisecond
			if err := wait.Sleep(ctx, d); err != nil {
				return nil, err
			}
			due = int64(time.Since(g.start).Seconds()*g.rate) + 1
		}
		want = min(want, due-g.n)
	}
	if g.count > 0 {
		want = min(want, g.count-g.n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := time.Now()
	msgs := make([]pipeline.Msg, want)
	for i := range msgs {
		k, v := Order(g.n, g.keys)
		msgs[i].Record = record.Record{Key: k, Value: v, Timestamp: now, Topic: "generate", Offset: g.n,
			Headers: []record.Header{{Key: "fluid-schema-version", Value: []byte("2")}}}
		g.n++
	}
	return msgs, nil
}

// Ack implements pipeline.Source; generated records need no acknowledgement.
func (g *Source) Ack([]pipeline.Msg) {}

// Commit implements pipeline.Source.
func (g *Source) Commit(context.Context) error { return nil }

// Close implements pipeline.Source.
func (g *Source) Close(context.Context) error { return nil }
