// @NAME@: a streamd Wasm transform that upper-cases the ASCII letters of
// each record's value (after an optional prefix from its config) and
// rejects a record with a null value. Build it with build.sh; test it with
// `streamd plugin test` (README.md).
import { transform, onInit, Record, Output, jsonGet, jsonString, jsonUnknownKey } from "@streamd/sdk";
export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init, streamd_process } from "@streamd/sdk";

let prefix = "";

// The config table of the pipeline TOML, as JSON; a string refuses it.
function init(config: Uint8Array): string | null {
  const unknown = jsonUnknownKey(config, ["prefix"]);
  if (unknown !== null) return "unknown key " + unknown;
  const p = jsonGet(config, "prefix");
  if (p !== null) {
    const s = jsonString(p);
    if (s === null) return "prefix: want a string";
    prefix = s;
  }
  return null;
}

function upper(rec: Record, out: Output): void {
  if (rec.valueLen < 0) {
    out.reject("null value"); // rejects this record (ERR_RECORD)
    return;
  }
  out.begin(rec.timestampMs);
  out.keyRaw(rec.keyPtr, rec.keyLen);
  out.beginValue();
  out.writeString(prefix);
  for (let i = 0; i < rec.valueLen; i++) {
    const c = load<u8>(rec.valuePtr + <usize>i);
    out.writeByte(c >= 0x61 && c <= 0x7a ? c - 0x20 : c);
  }
  out.endValue();
  for (let i = 0; i < rec.headerCount; i++) out.copyHeader(rec, i);
  out.end();
}

onInit(init);
transform("@NAME@", "0.1.0", upper);
