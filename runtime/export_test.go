package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/streamd/streamd/runtime/internal/fuel"
)

// SetRewrite makes h instrument modules with f instead of fuel.Rewrite,
// so that a test can give it a module the instrumentation cannot read.
func SetRewrite(h *Host, f func(bin []byte, o fuel.Options) ([]byte, error)) {
	h.rewrite = f
}

// SetRaw makes h load modules that are not plugins: the same checks,
// rewrite, limits and instantiation (start function included) as a
// plugin's, but no ABI exports are required and no manifest or init is
// called. CallExport then calls their functions.
func SetRaw(h *Host) { h.raw = true }

// Exports lists the functions a module loaded by a raw Host exports.
func (m *Module) Exports() []string {
	var names []string
	for name := range m.compiled.ExportedFunctions() {
		names = append(names, name)
	}
	return names
}

// CallExport calls the exported function name of a module loaded by a raw
// Host with zero arguments, as Call calls a plugin: on an instance of the
// pool, under the module's timeout, with the log's limits of a call of one
// record; an instance whose call failed is replaced.
func (m *Module) CallExport(ctx context.Context, name string) error {
	if !m.enter() {
		return ErrClosed
	}
	defer m.calls.Done()
	inst := <-m.pool
	if inst == nil {
		var err error
		if inst, err = m.newInstance(ctx); err != nil {
			m.pool <- nil
			return err
		}
	}
	fn := inst.mod.ExportedFunction(name)
	if fn == nil {
		m.pool <- inst
		return fmt.Errorf("no export %q", name)
	}
	def := fn.Definition()
	stack := make([]uint64, max(len(def.ParamTypes()), len(def.ResultTypes()), 1))
	if m.timeout > 0 {
		inst.until = time.Now().Add(m.timeout)
	}
	inst.log.reset(1)
	err := inst.invokeStack(ctx, fn, stack)
	inst.until = time.Time{}
	inst.endLog()
	if err != nil || inst.mod.IsClosed() {
		inst.close(context.WithoutCancel(ctx))
		inst = nil
	}
	m.pool <- inst
	return err
}
