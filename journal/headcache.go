package journal

import (
	"context"
)

// headCache is a placeholder until the cache lands: it reads Kafka.
type headCache struct{ j *Journal }

func newHeadCache(j *Journal) *headCache { return &headCache{j: j} }

func (c *headCache) actions(ctx context.Context, key Key, mark Position, start int64) ([]headAction, error) {
	return c.j.readHead(ctx, key, mark, start)
}

func (c *headCache) close() {}
