// orders-downgrade: the streamd transform that turns orders-v2 JSON values
// into the orders-v1 shape (examples/wasm/testdata/README.md), written in
// AssemblyScript on the @streamd/sdk.
import { transform, Record, Output } from "@streamd/sdk";
import { parse, parseError, writeValue } from "./downgrade";
export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init, streamd_process } from "@streamd/sdk";

const SCHEMA_HEADER = String.UTF8.encode("fluid-schema-version");
const SCHEMA_V1 = String.UTF8.encode("1");

function isSchemaHeader(rec: Record, i: i32): bool {
  const n = rec.headerNameLen(i);
  return n == SCHEMA_HEADER.byteLength &&
    memory.compare(rec.headerNamePtr(i), changetype<usize>(SCHEMA_HEADER), <usize>n) == 0;
}

function downgrade(rec: Record, out: Output): void {
  if (!parse(rec.valuePtr, rec.valueLen)) {
    out.reject(parseError());
    return;
  }
  out.begin(rec.timestampMs);
  out.keyRaw(rec.keyPtr, rec.keyLen);
  out.beginValue();
  writeValue(out);
  out.endValue();
  for (let i = 0; i < rec.headerCount; i++) {
    if (!isSchemaHeader(rec, i)) out.copyHeader(rec, i);
  }
  out.headerRaw(changetype<usize>(SCHEMA_HEADER), SCHEMA_HEADER.byteLength, changetype<usize>(SCHEMA_V1), SCHEMA_V1.byteLength);
  out.end();
}

transform("orders-downgrade", "1.0.0", downgrade);
