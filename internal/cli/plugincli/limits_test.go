package plugincli_test

import (
	"strings"
	"testing"
)

// TestRecordSizeLimit: `plugin run` and `plugin test` refuse an output
// record the pipeline's Kafka sink would refuse (over its default
// max_record_bytes, 1048588 bytes), as that sink does: an error line of
// kind rejected with the sink's message; --max-record-bytes sets the
// limit (a pipeline's sink.max_record_bytes), a negative one turns it off.
func TestRecordSizeLimit(t *testing.T) {
	identity := watPlugin(t, "identity")
	dir := t.TempDir()
	big := strings.Repeat("x", 2<<20)
	in := writeFile(t, dir, "in.jsonl", `{"value":"small","offset":1}`+"\n"+`{"value":"`+big+`","offset":2}`+"\n")
	kept := writeFile(t, dir, "kept.jsonl", `{"value":"small"}`+"\n"+`{"value":"`+big+`"}`+"\n")
	refused := writeFile(t, dir, "refused.jsonl", `{"value":"small"}`+"\n"+`{"error":"","kind":"rejected","input_offset":2}`+"\n")

	code, out, errOut := run(t, "run", identity, "--input", in)
	const wantErr = `{"error":"record too large: 2097152 bytes (key, value and headers), over the sink's max_record_bytes of 1048588","kind":"rejected","input_offset":2}`
	if code != 0 || !strings.HasSuffix(out, wantErr+"\n") || !strings.Contains(errOut, "1 rejected") || !strings.Contains(errOut, "--max-record-bytes 1048588") {
		t.Fatalf("run: exit %d, stderr %s\nstdout (end) %s\nwant it to end %s", code, errOut, out[max(0, len(out)-300):], wantErr)
	}
	if code, out, errOut := run(t, "test", identity, "--input", in, "--expect", kept); code != 1 || !strings.Contains(out, "line 2 differs: want a record, got an error (rejected)") {
		t.Fatalf("test expecting the record kept: exit %d\n%.600s\n%s", code, out, errOut)
	}
	if code, out, errOut := run(t, "test", identity, "--input", in, "--expect", refused); code != 0 {
		t.Fatalf("test expecting the record refused: exit %d\n%.600s\n%s", code, out, errOut)
	}
	if code, out, errOut := run(t, "test", identity, "--input", in, "--expect", kept, "--max-record-bytes", "-1"); code != 0 {
		t.Fatalf("--max-record-bytes -1: exit %d\n%.600s\n%s", code, out, errOut)
	}
	if code, out, errOut := run(t, "test", identity, "--input", in, "--expect", kept, "--max-record-bytes", "4194304"); code != 0 {
		t.Fatalf("--max-record-bytes 4194304: exit %d\n%.600s\n%s", code, out, errOut)
	}
}
