package wasm

import (
	"context"

	"github.com/streamd/streamd/plugins"
)

// Reload reloads the plugin's file now (streamd does this on SIGHUP) if it
// was opened with OpenWatched; the new module is swapped in between
// batches, and a module that fails to load leaves the old one in place and
// is reported. A plugin opened with Open has nothing to reload.
func (b *base) Reload(ctx context.Context) error {
	r, ok := b.m.(interface {
		Reload(context.Context) (bool, error)
	})
	if !ok {
		return nil
	}
	_, err := r.Reload(ctx)
	return err
}

// Reloads returns how many times a new version of the plugin's file was
// swapped in: 0 for a plugin opened with Open.
func (b *base) Reloads() int64 {
	if r, ok := b.m.(interface{ Reloads() int64 }); ok {
		return r.Reloads()
	}
	return 0
}

// ReloadRefused returns the last refused reload of the plugin's file while
// the file holds that version, or nil (plugins.ReloadReporter).
func (b *base) ReloadRefused() *plugins.ReloadRefusal {
	if r, ok := b.m.(plugins.ReloadReporter); ok {
		return r.ReloadRefused()
	}
	return nil
}
