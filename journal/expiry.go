package journal

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/internal/x/kgox"
	"github.com/streamd/streamd/record"
)

// PurgeExpired produces a Purge action for every journal in the store
// whose expiry (the last append's timestamp + expireAfter) is at or before
// now, so that expiry flows through Kafka and the replicator like any
// other Purge. It returns how many Purges it produced.
func (r *Replicator) PurgeExpired(ctx context.Context, j *Journal, now time.Time) (int, error) {
	keys, err := r.store.s.Expired(ctx, now, 1000)
	if err != nil {
		return 0, fmt.Errorf("journal expiry: %w", err)
	}
	n := 0
	for _, k := range keys {
		if _, err := j.Purge(ctx, Key{Topic: k.Topic, ID: k.ID}); err != nil {
			return n, fmt.Errorf("journal expiry: %w", err)
		}
		n++
	}
	return n, nil
}

// DefaultExpiryInterval is how often RunExpiry looks for expired journals
// when given 0 (streamd's [journal] expiry_interval default).
const DefaultExpiryInterval = time.Minute

// RunExpiry calls PurgeExpired every interval (0: DefaultExpiryInterval)
// until ctx ends. A journal is purged again only if it is still expired an
// interval later (the first Purge not yet replicated, or lost).
func (r *Replicator) RunExpiry(ctx context.Context, j *Journal, every time.Duration) error {
	if every == 0 {
		every = DefaultExpiryInterval
	}
	if every < 0 {
		return fmt.Errorf("journal expiry: interval %v must be > 0", every)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			n, err := r.PurgeExpired(ctx, j, now)
			if err != nil {
				r.o.logger.Warn("journal: expiry round failed", "err", err)
				continue
			}
			if n > 0 {
				r.o.logger.Info("journal: purged expired journals", "count", n)
			}
		}
	}
}

// QuarantineTo returns a QuarantineFunc that produces each malformed
// record to topic (see QuarantineRecord) and waits for the broker's ack.
func QuarantineTo(client *kgo.Client, topic string) QuarantineFunc {
	return func(ctx context.Context, rec record.Record, reason error) error {
		q := QuarantineRecord(rec, reason, topic)
		kr := kgox.KgoRecords([]record.Record{q}, topic)
		return client.ProduceSync(ctx, &kr[0]).FirstErr()
	}
}
