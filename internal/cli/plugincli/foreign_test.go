package plugincli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestForeignModules: `streamd plugin inspect` names the ABI of a Redpanda
// data transform and of a Fluvio SmartModule, and `plugin test` runs them
// (environment variables and params from --config, outputs from
// --output), with the verdicts a pipeline would give: a record the
// transform fails on alone is an error line of kind trap; one a
// SmartModule rejects, of kind rejected with its hint.
func TestForeignModules(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	in := write("in.jsonl", `{"key":"a1","value":"7","offset":10}
{"key":"b2","value":"x","offset":11}
{"key":"a3","value":"-1","offset":12}
`)
	tests := []struct {
		dir, name string
		abi       string
		args      []string
		expect    string
	}{
		{"redpanda/rust", "tee", "redpanda data transforms v2", []string{"--output", "orders", "--output", "copy"},
			`{"key":"a1","value":"7","offset":10}
{"key":"a1","value":"7","offset":10}
{"key":"b2","value":"x","offset":11}
{"key":"b2","value":"x","offset":11}
{"key":"a3","value":"-1","offset":12}
{"key":"a3","value":"-1","offset":12}
`},
		{"redpanda/go", "regexp_filter", "redpanda data transforms v2", []string{"--config", `{"PATTERN":"^a"}`},
			`{"key":"a1","value":"7","offset":10}
{"key":"a3","value":"-1","offset":12}
`},
		{"redpanda/rust", "validation_filter", "redpanda data transforms v2", nil,
			`{"key":"a1","value":"7","offset":10}
{"key":"a3","value":"-1","offset":12}
`},
		{"fluvio", "map", "fluvio smartmodule map (api 22)", nil,
			`{"key":"a1","value":"14","offset":10}
{"error":"fluvio smartmodule map: invalid digit found in string","kind":"rejected","input_offset":11}
{"key":"a3","value":"-2","offset":12}
`},
		{"fluvio", "filter", "fluvio smartmodule filter (api 22)", nil, ""},
	}
	for _, tc := range tests {
		wasm := testenv.ForeignWasm(t, tc.dir, tc.name)
		code, out, errOut := run(t, "inspect", wasm)
		if tc.name == "regexp_filter" {
			// Its main needs PATTERN; inspect gives no config, as it
			// calls a streamd plugin's init with {}.
			if code != 2 || !strings.Contains(errOut, "Missing PATTERN variable") {
				t.Errorf("inspect %s: exit %d, %s%s", tc.name, code, out, errOut)
			}
		} else if code != 0 || !strings.Contains(out, `"abi_name":"`+tc.abi+`"`) || !strings.Contains(out, `"name":"`+tc.name+`"`) {
			t.Errorf("inspect %s: exit %d, %s%s", tc.name, code, out, errOut)
		}
		expect := write(tc.name+".expected.jsonl", tc.expect)
		args := append([]string{"test", wasm, "--input", in, "--expect", expect, "--messages"}, tc.args...)
		if code, out, errOut := run(t, args...); code != 0 {
			t.Errorf("plugin test %s: exit %d\n%s%s", tc.name, code, out, errOut)
		}
	}
}
