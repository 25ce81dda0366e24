// @NAME@: a streamd Wasm codec: ENCODE and DECODE both reverse the bytes of
// a payload (replace them with your encoding). A null payload (a tombstone)
// never reaches it: the SDK keeps it null. Build it with build.sh; test it
// with `streamd plugin test --op encode` (README.md).
import { codec, Record, Output } from "@streamd/sdk";
export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init, streamd_process } from "@streamd/sdk";

function reverse(rec: Record, out: Output): void {
  const v = rec.value()!; // never null here
  v.reverse();
  out.emitValue(v);
}

codec("@NAME@", "0.1.0", reverse, reverse);
