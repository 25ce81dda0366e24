// Package loop is a minimal at-least-once consume -> sink -> commit loop
// on a franz-go group consumer: what the pipeline engine does with a
// journal sink, for tests and benchmarks that must not depend on it (the
// crash test runs it in a child process that it kills).
package loop

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/x/kgox"
	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// Run polls cl (a group consumer with auto-commit off), writes each fetch
// to sink, and commits the fetched offsets only once sink reports every
// record durable. It returns when ctx ends or on the first error.
func Run(ctx context.Context, cl *kgo.Client, sink plugins.Sink) error {
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				ferr = errors.Join(ferr, fmt.Errorf("fetch %s/%d: %w", t, p, err))
			}
		})
		if ferr != nil {
			return ferr
		}
		krecs := fs.Records()
		if len(krecs) == 0 {
			continue
		}
		batch := kgox.AppendRecords(make([]record.Record, 0, len(krecs)), krecs)
		errs, err := sink.Write(ctx, batch)
		if err != nil {
			return err
		}
		for i, e := range errs {
			if e != nil {
				return fmt.Errorf("record %s/%d@%d: %w", batch[i].Topic, batch[i].Partition, batch[i].Offset, e)
			}
		}
		if err := cl.CommitRecords(ctx, krecs...); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
}
