package runtime

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/streamd/streamd/runtime/internal/fluvio"
)

// The ABIs a module can be written against (ABI.Name).
const (
	// ABIStreamd is streamd's own host ABI (docs/abi.md).
	ABIStreamd = "streamd"
	// ABIRedpanda is Redpanda's data transforms ABI: the guest imports
	// module redpanda_transform (check_abi_version_2, read_batch_header,
	// read_next_record, write_record, write_record_with_options) and
	// runs its own loop from _start.
	ABIRedpanda = "redpanda"
	// ABIFluvio is Fluvio's SmartModule ABI: the guest exports filter,
	// map, filter_map, array_map or aggregate, alloc and dealloc, and
	// imports env.copy_records.
	ABIFluvio = "fluvio"
)

// ABI is the contract a module was written against, read from its imports
// and exports at load, before any of its code runs.
type ABI struct {
	// Name is ABIStreamd, ABIRedpanda or ABIFluvio.
	Name string
	// Version is the ABI's version: streamd's N of streamd_abi_vN,
	// Redpanda's N of check_abi_version_N, and for Fluvio the
	// SmartModule API version the host speaks to the module.
	Version int
	// Kind is a Fluvio SmartModule's kind: filter, map, filter_map,
	// array_map or aggregate.
	Kind string
	// SchemaRegistry: a Redpanda module imports the schema registry
	// module (redpanda_schema_registry).
	SchemaRegistry bool
}

// String names the ABI as `streamd plugin inspect` shows it.
func (a ABI) String() string {
	switch a.Name {
	case ABIRedpanda:
		s := fmt.Sprintf("redpanda data transforms v%d", a.Version)
		if a.SchemaRegistry {
			s += " with schema registry v0"
		}
		return s
	case ABIFluvio:
		return fmt.Sprintf("fluvio smartmodule %s (api %d)", a.Kind, a.Version)
	}
	return fmt.Sprintf("streamd v%d", a.Version)
}

// The imports and exports the foreign ABIs name.
const (
	rpModule     = "redpanda_transform"
	rpSRModule   = "redpanda_schema_registry"
	rpABIVersion = 2
	flModule     = "env"
)

var (
	i32 = api.ValueTypeI32

	// redpandaImports are the functions of module redpanda_transform, v2.
	redpandaImports = map[string]funcType{
		"check_abi_version_2":       {nil, nil},
		"read_batch_header":         {[]api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}},
		"read_next_record":          {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}},
		"write_record":              {[]api.ValueType{i32, i32}, []api.ValueType{i32}},
		"write_record_with_options": {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}},
	}
	// redpandaSRImports are the functions of module
	// redpanda_schema_registry, v0.
	redpandaSRImports = map[string]funcType{
		"check_abi_version_0":       {nil, nil},
		"get_schema_definition_len": {[]api.ValueType{i32, i32}, []api.ValueType{i32}},
		"get_schema_definition":     {[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}},
		"get_subject_schema_len":    {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}},
		"get_subject_schema":        {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}},
		"create_subject_schema":     {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}},
	}
	// fluvioKinds are the exports that make a module a SmartModule, by
	// the name streamd gives its kind.
	fluvioKinds = []string{"filter", "map", "filter_map", "array_map", "aggregate"}
	fluvioFn    = funcType{[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}}
	// fluvioLookBack is the export of a SmartModule's look_back, which
	// streamd does not run.
	fluvioLookBack = "look_back"
)

type funcType struct{ params, results []api.ValueType }

func (f funcType) String() string { return signature(f.params, f.results) }

func (f funcType) is(def api.FunctionDefinition) bool {
	return slices.Equal(def.ParamTypes(), f.params) && slices.Equal(def.ResultTypes(), f.results)
}

// detectABI says which ABI a compiled module was written against and
// checks its imports and exports against it: a module that imports
// redpanda_transform is a Redpanda data transform; one that exports a
// SmartModule function and imports env.copy_records a Fluvio
// SmartModule; any other a streamd plugin (checkExports).
func detectABI(name string, cm wazero.CompiledModule, fueled bool) (ABI, error) {
	mods := map[string]bool{}
	for _, fn := range cm.ImportedFunctions() {
		mod, _, _ := fn.Import()
		mods[mod] = true
	}
	switch {
	case mods[rpModule]:
		return checkRedpanda(name, cm, fueled)
	case mods[flModule] && hasAny(cm.ExportedFunctions(), fluvioKinds):
		return checkFluvio(name, cm, fueled)
	}
	v, err := checkExports(name, cm, fueled)
	return ABI{Name: ABIStreamd, Version: v}, err
}

func hasAny(fns map[string]api.FunctionDefinition, names []string) bool {
	for _, n := range names {
		if _, ok := fns[n]; ok {
			return true
		}
	}
	return false
}

// checkImports checks that every function the module imports is one of
// allowed's (by module, then name), or WASI's, or the fuel import of an
// instrumented module.
func checkImports(name, what string, cm wazero.CompiledModule, fueled bool, allowed map[string]map[string]funcType) error {
	for _, fn := range cm.ImportedFunctions() {
		mod, imp, _ := fn.Import()
		switch {
		case mod == wasi_snapshot_preview1.ModuleName:
			continue
		case mod == "streamd" && imp == fuelImport && fueled:
			continue
		}
		fns, ok := allowed[mod]
		if !ok {
			mods := []string{wasi_snapshot_preview1.ModuleName}
			for m := range allowed {
				mods = append(mods, m)
			}
			slices.Sort(mods)
			return fmt.Errorf("%s: %w: imports %s.%s; %s may import only modules %s",
				name, ErrNotPlugin, mod, imp, what, strings.Join(mods, ", "))
		}
		want, ok := fns[imp]
		if !ok {
			return fmt.Errorf("%s: %w: imports %s.%s, which %s does not provide", name, ErrNotPlugin, mod, imp, what)
		}
		if !want.is(fn) {
			return fmt.Errorf("%s: import %s.%s has signature %s, want %s", name, mod, imp,
				signature(fn.ParamTypes(), fn.ResultTypes()), want)
		}
	}
	return nil
}

func checkRedpanda(name string, cm wazero.CompiledModule, fueled bool) (ABI, error) {
	abi := ABI{Name: ABIRedpanda, Version: rpABIVersion}
	what := "a Redpanda data transform"
	var versions []string
	for _, fn := range cm.ImportedFunctions() {
		mod, imp, _ := fn.Import()
		switch {
		case mod == rpModule && strings.HasPrefix(imp, "check_abi_version_"):
			versions = append(versions, strings.TrimPrefix(imp, "check_abi_version_"))
		case mod == rpSRModule:
			abi.SchemaRegistry = true
		}
	}
	if !slices.Contains(versions, "2") {
		have := "none"
		if len(versions) > 0 {
			have = "check_abi_version_" + strings.Join(versions, ", check_abi_version_")
		}
		return abi, fmt.Errorf("%s: %w: a Redpanda data transform imports %s.check_abi_version_2 (SDKs 1.0 and later), this one %s: streamd runs Redpanda's transform ABI version 2",
			name, ErrNotPlugin, rpModule, have)
	}
	if err := checkImports(name, what, cm, fueled, map[string]map[string]funcType{rpModule: redpandaImports, rpSRModule: redpandaSRImports}); err != nil {
		return abi, err
	}
	fns := cm.ExportedFunctions()
	start, ok := fns["_start"]
	if !ok {
		return abi, fmt.Errorf("%s: %w: a Redpanda data transform exports _start (its main), and this one does not (it exports: %s)",
			name, ErrNotPlugin, exportList(cm))
	}
	if !(funcType{}).is(start) {
		return abi, fmt.Errorf("%s: export _start has signature %s, want () -> ()", name, signature(start.ParamTypes(), start.ResultTypes()))
	}
	if _, ok := cm.ExportedMemories()["memory"]; !ok {
		return abi, fmt.Errorf("%s: %w: missing export memory (the module exports: %s)", name, ErrNotPlugin, exportList(cm))
	}
	return abi, nil
}

func checkFluvio(name string, cm wazero.CompiledModule, fueled bool) (ABI, error) {
	abi := ABI{Name: ABIFluvio, Version: fluvio.Version}
	fns := cm.ExportedFunctions()
	var kinds []string
	for _, k := range fluvioKinds {
		if _, ok := fns[k]; ok {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) != 1 {
		return abi, fmt.Errorf("%s: %w: a Fluvio SmartModule exports one of %s, this one %s", name, ErrNotPlugin,
			strings.Join(fluvioKinds, ", "), strings.Join(kinds, " and "))
	}
	abi.Kind = kinds[0]
	if _, ok := fns[fluvioLookBack]; ok {
		return abi, fmt.Errorf("%s: %w: a Fluvio SmartModule that exports %s, which streamd does not call: Fluvio calls it with the topic's last records before the first one, to build the SmartModule's state, and without it this %s would give other results than in Fluvio", name, ErrNotPlugin, fluvioLookBack, abi.Kind)
	}
	if err := checkImports(name, "a Fluvio SmartModule", cm, fueled, map[string]map[string]funcType{
		flModule: {"copy_records": {[]api.ValueType{i32, i32}, nil}},
	}); err != nil {
		return abi, err
	}
	want := map[string]funcType{
		abi.Kind: fluvioFn,
		"alloc":  {[]api.ValueType{i32}, []api.ValueType{i32}},
	}
	optional := map[string]funcType{
		"init":    fluvioFn,
		"dealloc": {[]api.ValueType{i32, i32}, nil},
	}
	for e, t := range want {
		fn, ok := fns[e]
		if !ok {
			return abi, fmt.Errorf("%s: %w: a Fluvio SmartModule exports %s, and this one does not (it exports: %s)",
				name, ErrNotPlugin, e, exportList(cm))
		}
		if !t.is(fn) {
			return abi, fmt.Errorf("%s: export %s has signature %s, want %s", name, e, signature(fn.ParamTypes(), fn.ResultTypes()), t)
		}
	}
	for e, t := range optional {
		if fn, ok := fns[e]; ok && !t.is(fn) {
			return abi, fmt.Errorf("%s: export %s has signature %s, want %s", name, e, signature(fn.ParamTypes(), fn.ResultTypes()), t)
		}
	}
	if _, ok := cm.ExportedMemories()["memory"]; !ok {
		return abi, fmt.Errorf("%s: %w: missing export memory (the module exports: %s)", name, ErrNotPlugin, exportList(cm))
	}
	return abi, nil
}

// exportList lists a module's exported functions and memories, at most 12.
func exportList(cm wazero.CompiledModule) string {
	var have []string
	for e := range cm.ExportedFunctions() {
		have = append(have, e)
	}
	for e := range cm.ExportedMemories() {
		have = append(have, e)
	}
	slices.Sort(have)
	if len(have) == 0 {
		return "nothing"
	}
	if len(have) > 12 {
		have = append(have[:12], fmt.Sprintf("and %d more", len(have)-12))
	}
	return strings.Join(have, ", ")
}

// foreignName is the name of a module of another host's ABI, which has no
// manifest: its file's name without .wasm, in the characters a manifest
// name may have ([a-z0-9._-]{1,64}; others become '-').
func foreignName(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), ".wasm")
	b := []byte(strings.ToLower(base))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	if len(b) == 0 {
		return "module"
	}
	return string(b)
}

// abiNoun names what a module of abi is, for errors.
func abiNoun(a ABI) string {
	switch a.Name {
	case ABIRedpanda:
		return "Redpanda data transform"
	case ABIFluvio:
		return "Fluvio SmartModule"
	}
	return "streamd plugin"
}
