package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// headCacheMaxActions bounds what one partition's cache keeps; past it the
// partition's cache is dropped and reads go to Kafka until the store
// catches up.
const headCacheMaxActions = 200_000

// headCache tails each journal partition that has been read once, keeping
// every key's actions above the store's pointer, so that reading a hot
// journal does not read Kafka again on each call: a read waits until the
// tail has passed its Mark and takes the key's actions from memory. What
// the store has replicated is evicted as reads report the pointer.
type headCache struct {
	j      *Journal
	mu     sync.Mutex
	topics map[string]*topicTail
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type topicTail struct {
	cl    *kgo.Client
	parts map[int32]*partTail
	err   error
}

type partTail struct {
	from    int64 // lowest offset kept (actions below were evicted)
	next    int64 // next offset to consume
	keys    map[string][]headAction
	count   int
	changed chan struct{} // closed and replaced when next advances
}

func newHeadCache(j *Journal) *headCache {
	ctx, cancel := context.WithCancel(context.Background())
	return &headCache{j: j, topics: map[string]*topicTail{}, ctx: ctx, cancel: cancel}
}

// close stops the consumers and waits for them until ctx is done.
func (c *headCache) close(ctx context.Context) error {
	c.cancel()
	c.mu.Lock()
	for _, t := range c.topics {
		t.cl.Close()
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("journal: head cache consumers had not stopped by the deadline: %w", ctx.Err())
	}
}

// actions returns key's actions at offsets start..mark.Offset, from the
// cache when it covers them (cached true), else from Kafka. stored (<=
// start) is the store's pointer + 1: what is below it is replicated and
// evicted.
func (c *headCache) actions(ctx context.Context, key Key, mark Position, start, stored int64) (acts []headAction, cached bool, err error) {
	p, err := c.partition(key.Topic, mark.Partition, stored)
	if err != nil {
		return nil, false, err
	}
	for {
		c.mu.Lock()
		if stored > p.from {
			c.evict(p, stored)
		}
		if p.from > start {
			c.mu.Unlock()
			acts, err := c.j.readHead(ctx, key, mark, start) // the cache does not cover it
			return acts, false, err
		}
		if p.next > mark.Offset {
			// The key's actions are in offset order: take start..mark.Offset
			// without copying (the slice is only ever appended to or
			// replaced, never written in place).
			acts := p.keys[key.ID]
			lo, _ := slices.BinarySearchFunc(acts, start, func(a headAction, off int64) int { return cmp.Compare(a.offset, off) })
			hi, found := slices.BinarySearchFunc(acts, mark.Offset, func(a headAction, off int64) int { return cmp.Compare(a.offset, off) })
			if found {
				hi++
			}
			c.mu.Unlock()
			return acts[lo:hi:hi], true, nil
		}
		ch := p.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(10 * time.Second):
			acts, err := c.j.readHead(ctx, key, mark, start)
			return acts, false, err
		}
	}
}

// evict drops actions below start; c.mu is held.
func (c *headCache) evict(p *partTail, start int64) {
	p.from = start
	for id, acts := range p.keys {
		i := 0
		for i < len(acts) && acts[i].offset < start {
			i++
		}
		p.count -= i
		if i == len(acts) {
			delete(p.keys, id)
		} else if i > 0 {
			p.keys[id] = append([]headAction(nil), acts[i:]...)
		}
	}
}

// partition returns the tail of topic/partition, starting one at start if
// there is none.
func (c *headCache) partition(topic string, partition int32, start int64) (*partTail, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[topic]
	if !ok {
		opts := append([]kgo.Opt{kgo.FetchMaxWait(200 * time.Millisecond)}, c.j.consOpts...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		t = &topicTail{cl: cl, parts: map[int32]*partTail{}}
		c.topics[topic] = t
		c.wg.Add(1)
		go c.run(topic, t)
	}
	if t.err != nil {
		return nil, t.err
	}
	p, ok := t.parts[partition]
	if !ok {
		p = &partTail{from: start, next: start, keys: map[string][]headAction{}, changed: make(chan struct{})}
		t.parts[partition] = p
		t.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(start)}})
	}
	return p, nil
}

func (c *headCache) run(topic string, t *topicTail) {
	defer c.wg.Done()
	for {
		fs := t.cl.PollFetches(c.ctx)
		if c.ctx.Err() != nil {
			return
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
				ferr = err
			}
		})
		// Decode before taking the lock that reads and Append checks wait on.
		type decoded struct {
			a  headAction
			ok bool
		}
		var dec [][]decoded
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			d := make([]decoded, len(ftp.Records))
			for i, r := range ftp.Records {
				d[i].a, d[i].ok = c.j.decodeHead(r)
			}
			dec = append(dec, d)
		})
		c.mu.Lock()
		if ferr != nil {
			// Drop the topic: reads fall back to Kafka and a later read starts
			// a new tail.
			c.j.o.logger.Warn("journal: head cache consumer failed", "topic", topic, "err", ferr)
			delete(c.topics, topic)
			for _, p := range t.parts {
				p.from = 1<<62 - 1
				close(p.changed)
				p.changed = make(chan struct{})
			}
			c.mu.Unlock()
			t.cl.Close()
			return
		}
		k := 0
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			d := dec[k]
			k++
			p := t.parts[ftp.Partition]
			if p == nil || len(ftp.Records) == 0 {
				return
			}
			for i, r := range ftp.Records {
				if r.Offset < p.next {
					continue
				}
				p.next = r.Offset + 1
				if r.Offset < p.from {
					continue
				}
				a, ok := d[i].a, d[i].ok
				if !ok {
					continue
				}
				if p.count >= headCacheMaxActions {
					// Too much unreplicated head: stop caching below here.
					p.keys, p.count, p.from = map[string][]headAction{}, 0, p.next
					continue
				}
				id := string(r.Key)
				p.keys[id] = append(p.keys[id], a)
				p.count++
			}
			close(p.changed)
			p.changed = make(chan struct{})
		})
		c.mu.Unlock()
	}
}
