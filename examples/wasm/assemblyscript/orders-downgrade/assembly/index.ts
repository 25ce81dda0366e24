// orders-downgrade: the streamd transform that turns orders-v2 JSON values
// into the orders-v1 shape (examples/wasm/testdata/README.md), written in
// AssemblyScript on the @streamd/sdk.
import { transform, Record, Output, putBytes, putLenBytes, putRecordHead } from "@streamd/sdk";
import { parse, parseError, valueMax, writeValue } from "./downgrade";
export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init, streamd_process } from "@streamd/sdk";

// The header the output record carries: fluid-schema-version: 1.
const SCHEMA_HEADER: usize = memory.data<u8>([0x66, 0x6C, 0x75, 0x69, 0x64, 0x2D, 0x73, 0x63, 0x68, 0x65, 0x6D, 0x61, 0x2D, 0x76, 0x65, 0x72, 0x73, 0x69, 0x6F, 0x6E]);
const SCHEMA_HEADER_LEN: i32 = 20;
const SCHEMA_V1: usize = memory.data<u8>([0x31]);

// isSchemaHeader compares header i's name with fluid-schema-version as two
// words and a half (immediates: its bytes little-endian). Inline: no call
// per header.
// @ts-ignore: decorator
@inline
function isSchemaHeader(rec: Record, i: i32): bool {
  if (rec.headerNameLen(i) != SCHEMA_HEADER_LEN) return false;
  const p = rec.headerNamePtr(i);
  return load<u64>(p) == 0x63732D6469756C66 && load<u64>(p, 8) == 0x7265762D616D6568 && load<u32>(p, 16) == 0x6E6F6973;
}

// reject answers the parse's error: out of line, so downgrade, which holds
// no managed value otherwise, has no shadow-stack frame.
function reject(out: Output): void {
  out.reject(parseError());
}

// downgrade answers one record, written with one reservation and raw stores
// (Output.reserveRecord): the fixed fields, the key, the v1 value, the
// input's headers but fluid-schema-version (copied in one piece when none is
// that header), then fluid-schema-version: 1.
function downgrade(rec: Record, out: Output): void {
  if (!parse(rec.valuePtr, rec.valueLen)) {
    reject(out);
    return;
  }
  const hc = rec.headerCount;
  let replace = false;
  for (let i = 0; i < hc; i++) {
    if (isSchemaHeader(rec, i)) {
      replace = true;
      break;
    }
  }
  const kl = rec.keyLen;
  // Fixed fields, key_len, value_len, header_count, the new header's two
  // lengths, its name and value, then the key, the value and the headers.
  const max: usize = <usize>(20 + 4 + 4 + 4 + 8 + SCHEMA_HEADER_LEN + 1) + (kl > 0 ? <usize>kl : 0) + valueMax() + <usize>rec.headersLen;
  let d = putRecordHead(out.reserveRecord(max), rec.timestampMs);
  d = putLenBytes(d, rec.keyPtr, kl);
  const v = d + 4;
  d = writeValue(v);
  store<u32>(v - 4, <u32>(d - v));
  const count = d;
  d += 4;
  let n: u32 = 0;
  if (!replace) {
    d = putBytes(d, rec.headersPtr, <usize>rec.headersLen);
    n = <u32>hc;
  } else {
    for (let i = 0; i < hc; i++) {
      if (isSchemaHeader(rec, i)) continue;
      d = putLenBytes(d, rec.headerNamePtr(i), rec.headerNameLen(i));
      d = putLenBytes(d, rec.headerValuePtr(i), rec.headerValueLen(i));
      n++;
    }
  }
  d = putLenBytes(d, SCHEMA_HEADER, SCHEMA_HEADER_LEN);
  d = putLenBytes(d, SCHEMA_V1, 1);
  store<u32>(count, n + 1);
  out.commitRecord(d);
}

transform("orders-downgrade", "1.0.0", downgrade);
