package journal

import (
	"context"
	"strings"
	"testing"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
)

type fakePlugin struct {
	kind   plugins.Kind
	closed bool
}

func (p *fakePlugin) Manifest() plugins.Manifest {
	return plugins.Manifest{Name: "fake", Kind: p.kind}
}
func (p *fakePlugin) Close(context.Context) error { p.closed = true; return nil }

type fakeSinkPlugin struct{ fakePlugin }

func (*fakeSinkPlugin) Write(_ context.Context, b []record.Record) ([]error, error) {
	return make([]error, len(b)), nil
}

// OpenStore opens a plugin store through the OpenFunc WithPlugins gives it:
// with the whole dsn as the reference and Kind sink; a plugin that is not a
// sink is refused (and closed), and without WithPlugins the error says what
// is missing.
func TestOpenStoreWithPlugins(t *testing.T) {
	ctx := context.Background()
	var gotRef string
	var gotOpts plugins.Options
	sink := &fakeSinkPlugin{fakePlugin{kind: plugins.KindSink}}
	open := func(_ context.Context, ref string, opts plugins.Options) (plugins.Plugin, error) {
		gotRef, gotOpts = ref, opts
		return sink, nil
	}
	st, err := OpenStore(ctx, "wasm:store.wasm", WithPlugins(open, plugins.Options{Pool: 3}))
	if err != nil {
		t.Fatal(err)
	}
	if gotRef != "wasm:store.wasm" || gotOpts.Kind != plugins.KindSink || gotOpts.Pool != 3 {
		t.Fatalf("open(%q, %+v)", gotRef, gotOpts)
	}
	if err := st.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	notSink := &fakePlugin{kind: plugins.KindTransform}
	_, err = OpenStore(ctx, "native:./t", WithPlugins(func(context.Context, string, plugins.Options) (plugins.Plugin, error) {
		return notSink, nil
	}, plugins.Options{}))
	if err == nil || !strings.Contains(err.Error(), "not a sink") || !notSink.closed {
		t.Fatalf("a transform as the store: err %v, closed %v", err, notSink.closed)
	}

	if _, err := OpenStore(ctx, "wasm:store.wasm"); err == nil || !strings.Contains(err.Error(), "WithPlugins") {
		t.Fatalf("no loader: %v", err)
	}
}
