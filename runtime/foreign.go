package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/streamd/streamd/plugins"
	"github.com/streamd/streamd/record"
	"github.com/streamd/streamd/runtime/internal/fluvio"
)

// A guest runs the batches of one instance of a module written for
// another host's ABI (a Redpanda data transform, a Fluvio SmartModule)
// behind the same Call as a streamd plugin's: the instance's memory cap,
// fuel, timeout, log budget and grants are the same, only what crosses
// between host and guest differs.
type guest interface {
	// start readies a new instance, within the instantiation's deadline
	// (inst.until): Redpanda's _start up to its first batch, Fluvio's
	// init.
	start(ctx context.Context) error
	// process runs one batch (Module.Call).
	process(ctx context.Context, op Op, recs []record.Record) ([]plugins.Result, error)
	// stop ends whatever the guest runs between batches (Redpanda's
	// _start); it is called before the instance's module is closed.
	stop()
}

// foreign is what a module of another host's ABI is given of its stage.
type foreign struct {
	// env: a Redpanda transform's environment (the stage's config, then
	// REDPANDA_INPUT_TOPIC and REDPANDA_OUTPUT_TOPIC*).
	env [][2]string
	// params: a Fluvio SmartModule's params (the stage's config).
	params  []fluvio.Param
	input   string
	outputs []string // the first is the default
	// registry serves redpanda_schema_registry (nil: none configured).
	registry plugins.SchemaRegistry
	sr       *srCache
}

// maxRedpandaOutputs is how many output topics a Redpanda transform may
// have (Redpanda's limit): REDPANDA_OUTPUT_TOPIC_0 to _7.
const maxRedpandaOutputs = 8

// newForeign checks the stage's settings for a module of abi and turns
// them into what the module is given.
func newForeign(name string, abi ABI, opts plugins.Options) (*foreign, error) {
	f := &foreign{input: opts.Wasm.Input, outputs: slices.Clone(opts.Wasm.Outputs), registry: opts.Wasm.SchemaRegistry}
	if f.input == "" {
		f.input = "input"
	}
	if len(f.outputs) == 0 {
		f.outputs = []string{"output"}
	}
	for i, o := range f.outputs {
		if o == "" || slices.Contains(f.outputs[:i], o) {
			return nil, fmt.Errorf("%s: outputs %q: each output needs a name of its own", name, f.outputs)
		}
	}
	keys := make([]string, 0, len(opts.Config))
	for k := range opts.Config {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	vals := make([]string, len(keys))
	for i, k := range keys {
		v, err := scalar(opts.Config[k])
		if err != nil {
			what := "an environment variable"
			if abi.Name == ABIFluvio {
				what = "a SmartModule param"
			}
			return nil, fmt.Errorf("%s: config key %q is %s, whose value must be a string, number or boolean: %w", name, k, what, err)
		}
		vals[i] = v
	}
	switch abi.Name {
	case ABIRedpanda:
		if len(f.outputs) > maxRedpandaOutputs {
			return nil, fmt.Errorf("%s: %d outputs: a Redpanda data transform writes to %d at most", name, len(f.outputs), maxRedpandaOutputs)
		}
		for i, k := range keys {
			if strings.HasPrefix(k, "REDPANDA_") {
				return nil, fmt.Errorf("%s: config key %q: the REDPANDA_ environment variables are the host's (REDPANDA_INPUT_TOPIC, REDPANDA_OUTPUT_TOPIC_N)", name, k)
			}
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(vals[i], 0) {
				return nil, fmt.Errorf("%s: config key %q: not an environment variable (no '=' or NUL in a name, no NUL in a value)", name, k)
			}
			f.env = append(f.env, [2]string{k, vals[i]})
		}
		f.env = append(f.env, [2]string{"REDPANDA_INPUT_TOPIC", f.input}, [2]string{"REDPANDA_OUTPUT_TOPIC", f.outputs[0]})
		for i, o := range f.outputs {
			f.env = append(f.env, [2]string{"REDPANDA_OUTPUT_TOPIC_" + strconv.Itoa(i), o})
		}
		if abi.SchemaRegistry {
			if f.registry == nil {
				return nil, fmt.Errorf("%s: the module imports %s, and the stage has no schema registry: configure [schema_registry] (the stage's registry key names another one)", name, rpSRModule)
			}
			f.sr = newSRCache()
		}
	case ABIFluvio:
		for i, k := range keys {
			if len(k) > 1<<15-1 || len(vals[i]) > 1<<15-1 {
				return nil, fmt.Errorf("%s: config key %q: a SmartModule param's name and value are at most 32767 bytes", name, k)
			}
			f.params = append(f.params, fluvio.Param{Key: k, Value: vals[i]})
		}
		if len(f.params) > 1<<16-1 {
			return nil, fmt.Errorf("%s: %d config keys: a SmartModule takes at most 65535 params", name, len(f.params))
		}
		fluvio.SortParams(f.params)
		if abi.Kind == "aggregate" {
			return nil, fmt.Errorf("%s: refused: a Fluvio aggregate SmartModule carries its accumulator from record to record, and streamd has no durable place for it yet (an accumulator kept in memory would start over at every restart or rebalance); filter, map, filter_map and array_map SmartModules run", name)
		}
	}
	return f, nil
}

// scalar formats a config value as an environment variable or a param.
func scalar(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case int:
		return strconv.Itoa(v), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case json.Number:
		return v.String(), nil
	}
	return "", fmt.Errorf("%T", v)
}

// instantiateForeign makes the host modules a module of abi imports.
func instantiateForeign(ctx context.Context, rt wazero.Runtime, abi ABI) error {
	switch abi.Name {
	case ABIRedpanda:
		b := rt.NewHostModuleBuilder(rpModule)
		fn := func(name string, f api.GoModuleFunc) {
			t := redpandaImports[name]
			b.NewFunctionBuilder().WithGoModuleFunction(f, t.params, t.results).Export(name)
		}
		fn("check_abi_version_2", func(context.Context, api.Module, []uint64) {})
		fn("read_batch_header", rpCall((*rpGuest).readBatchHeader))
		fn("read_next_record", rpCall((*rpGuest).readNextRecord))
		fn("write_record", rpCall((*rpGuest).writeRecord))
		fn("write_record_with_options", rpCall((*rpGuest).writeRecordWithOptions))
		if _, err := b.Instantiate(ctx); err != nil {
			return err
		}
		if abi.SchemaRegistry {
			b := rt.NewHostModuleBuilder(rpSRModule)
			fn := func(name string, f api.GoModuleFunc) {
				t := redpandaSRImports[name]
				b.NewFunctionBuilder().WithGoModuleFunction(f, t.params, t.results).Export(name)
			}
			fn("check_abi_version_0", func(context.Context, api.Module, []uint64) {})
			fn("get_schema_definition_len", rpCall((*rpGuest).getSchemaDefinitionLen))
			fn("get_schema_definition", rpCall((*rpGuest).getSchemaDefinition))
			fn("get_subject_schema_len", rpCall((*rpGuest).getSubjectSchemaLen))
			fn("get_subject_schema", rpCall((*rpGuest).getSubjectSchema))
			fn("create_subject_schema", rpCall((*rpGuest).createSubjectSchema))
			if _, err := b.Instantiate(ctx); err != nil {
				return err
			}
		}
	case ABIFluvio:
		_, err := rt.NewHostModuleBuilder(flModule).
			NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(hostCopyRecords), []api.ValueType{i32, i32}, nil).
			WithParameterNames("ptr", "len").Export("copy_records").
			Instantiate(ctx)
		return err
	}
	return nil
}

// newGuest makes inst's guest for its module's ABI.
func (m *Module) newGuest(inst *instance) guest {
	switch m.abi.Name {
	case ABIRedpanda:
		return newRPGuest(inst)
	case ABIFluvio:
		return newFLGuest(inst)
	}
	return nil
}
