// A sink that "writes" records by counting them; a value "x" is refused.
import { sink, Record, Output } from "../../index";
export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init, streamd_process } from "../../index";

let written = 0;

function write(rec: Record, out: Output): void {
  const v = rec.valueString();
  if (v == "x") {
    out.reject("refused x");
    return;
  }
  if (v == "emit") {
    out.emitCopy(rec);
    return;
  }
  if (v == "keep") {
    written++;
    out.keep();
    return;
  }
  if (v == "down") {
    out.fail("sink down after " + written.toString());
    return;
  }
  written++;
}

sink("counter", "1.0.0", write);
