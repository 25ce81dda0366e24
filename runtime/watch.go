package runtime

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

// Watched is a Module that can be replaced by a new version of its file
// while in use: Reload (or the polling started by LoadWatched) loads the new
// version and swaps it in between batches. A call in progress finishes on
// the module it started on, so no record is processed by both versions.
type Watched struct {
	h    *Host
	path string
	opts plugins.Options

	cur atomic.Pointer[Module]

	mu      sync.Mutex // serializes reloads
	stamp   fileStamp
	failed  [32]byte                              // sum of the last content that failed to load
	refused atomic.Pointer[plugins.ReloadRefusal] // while the file holds a refused version
	reloads atomic.Int64
	stop    chan struct{}
	done    chan struct{}
	closed  atomic.Bool
}

// fileStamp says whether a file may have changed. The inode is part of it:
// a same-size file renamed into place within one coarse kernel timestamp
// tick has the old mtime, but never the old inode.
type fileStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

// LoadWatched loads path like Load and, if interval > 0, polls the file
// every interval (checking size and mtime, then content hash) and reloads it
// when it changed. A version that fails to load, or has another name or
// kind, is logged and the running one kept.
func (h *Host) LoadWatched(ctx context.Context, path string, opts plugins.Options, interval time.Duration) (*Watched, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	m, err := h.Load(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	w := &Watched{h: h, path: path, opts: opts, stamp: stampOf(st)}
	w.cur.Store(m)
	if interval > 0 {
		w.stop, w.done = make(chan struct{}), make(chan struct{})
		go w.poll(context.WithoutCancel(ctx), interval)
	}
	return w, nil
}

func stampOf(st os.FileInfo) fileStamp { return fileStamp{st.Size(), st.ModTime(), inode(st)} }

func (w *Watched) poll(ctx context.Context, interval time.Duration) {
	defer close(w.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		st, err := os.Stat(w.path)
		if err != nil {
			continue // being replaced; try again next tick
		}
		w.mu.Lock()
		changed := stampOf(st) != w.stamp
		w.mu.Unlock()
		if !changed {
			continue
		}
		if _, err := w.reload(ctx, true); err != nil {
			w.cur.Load().logger.Error("plugin reload failed; keeping the running version", "path", w.path, "err", err)
		}
	}
}

// Reload reads the file again and, if its contents changed, loads and swaps
// in the new version. It reports whether it swapped.
func (w *Watched) Reload(ctx context.Context) (bool, error) { return w.reload(ctx, false) }

// reload is Reload; quiet (the poller) returns a nil error for content that
// already failed to load, so a bad file is reported once, not every tick.
// A failed load does not record the file's stamp: it is tried again on the
// next tick (a file still being written loads once it is complete).
func (w *Watched) reload(ctx context.Context, quiet bool) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() {
		return false, ErrClosed
	}
	st, err := os.Stat(w.path)
	if err != nil {
		return false, err
	}
	bin, err := readModule(w.path, w.opts)
	if err != nil {
		return false, err
	}
	old := w.cur.Load()
	sum := sha256.Sum256(bin)
	if sum == old.sum {
		w.stamp = stampOf(st)
		w.refused.Store(nil) // the file is back to the running version
		return false, nil
	}
	fail := func(err error) (bool, error) {
		w.refused.Store(&plugins.ReloadRefusal{Err: err, At: time.Now()})
		if quiet && sum == w.failed {
			return false, nil
		}
		w.failed = sum
		return false, err
	}
	m, err := w.h.load(ctx, w.path, bin, w.opts)
	if err != nil {
		return fail(err)
	}
	if a, b := m.Manifest(), old.Manifest(); a.Name != b.Name || a.Kind != b.Kind {
		_ = m.Close(ctx)
		w.stamp = stampOf(st) // a different plugin: final until the file changes
		return fail(fmt.Errorf("%s: new version is %s plugin %q, the running one %s plugin %q",
			w.path, a.Kind, a.Name, b.Kind, b.Name))
	}
	w.stamp = stampOf(st)
	w.cur.Store(m)
	w.reloads.Add(1)
	w.refused.Store(nil)
	old.logger.Info("plugin reloaded", "path", w.path, "version", m.Manifest().Version)
	// Calls in progress on old finish first; Close waits for them.
	go func() { _ = old.Close(context.WithoutCancel(ctx)) }()
	return true, nil
}

// Reloads returns how many times a new version was swapped in.
func (w *Watched) Reloads() int64 { return w.reloads.Load() }

// ReloadRefused returns the last refused reload while the file holds that
// version, or nil (plugins.ReloadReporter).
func (w *Watched) ReloadRefused() *plugins.ReloadRefusal { return w.refused.Load() }

// ABI returns what the running version was written against.
func (w *Watched) ABI() ABI { return w.cur.Load().ABI() }

// Manifest returns the manifest of the running version.
func (w *Watched) Manifest() plugins.Manifest { return w.cur.Load().Manifest() }

// Call runs a batch on the running version (see Module.Call).
func (w *Watched) Call(ctx context.Context, op Op, recs []record.Record) ([]plugins.Result, error) {
	for {
		m := w.cur.Load()
		res, err := m.Call(ctx, op, recs)
		if errors.Is(err, ErrClosed) && !w.closed.Load() && w.cur.Load() != m {
			continue // swapped between Load and Call: use the new one
		}
		return res, err
	}
}

// Close stops polling and closes the running version.
func (w *Watched) Close(ctx context.Context) error {
	if w.closed.Swap(true) {
		return nil
	}
	if w.stop != nil {
		close(w.stop)
		<-w.done
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur.Load().Close(ctx)
}
