// @NAME@: a streamd Wasm sink that "writes" each record by logging it
// (replace that with the durable write of your destination) and refuses a
// record with a null value. Build it with build.sh; test it with
// `streamd plugin test` (README.md).
import { sink, Record, Output, logBytes, LOG_DEBUG } from "@streamd/sdk";
export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init, streamd_process } from "@streamd/sdk";

// write must make the record durable before it returns without rejecting:
// the pipeline acknowledges what the sink says is written.
function write(rec: Record, out: Output): void {
  if (rec.valueLen < 0) {
    out.reject("null value: nothing to write"); // not written (ERR_RECORD)
    return;
  }
  logBytes(LOG_DEBUG, rec.valuePtr, <u32>rec.valueLen);
}

sink("@NAME@", "0.1.0", write);
