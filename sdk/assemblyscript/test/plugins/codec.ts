// A codec: ENCODE upper-cases ASCII values, DECODE lower-cases them.
import { codec, Record, Output } from "../../index";
export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init, streamd_process } from "../../index";

function mapCase(rec: Record, out: Output, upper: bool): void {
  const v = rec.value();
  if (v === null) {
    out.reject("null value");
    return;
  }
  if (v.length == 3 && v[0] == 0x32) { // "2.." : answer two records (invalid for a codec)
    out.emitValue(v);
    out.emitValue(v);
    return;
  }
  if (v.length == 4 && v[0] == 0x6E) { // "none": answer nothing (invalid)
    return;
  }
  for (let i = 0; i < v.length; i++) {
    const c = v[i];
    if (upper && c >= 0x61 && c <= 0x7A) v[i] = c - 32;
    if (!upper && c >= 0x41 && c <= 0x5A) v[i] = c + 32;
  }
  out.emitValue(v);
}

function encode(rec: Record, out: Output): void {
  mapCase(rec, out, true);
}

function decode(rec: Record, out: Output): void {
  mapCase(rec, out, false);
}

codec("case", "1.0.0", encode, decode);
