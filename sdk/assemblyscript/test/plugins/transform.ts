// A transform that exercises every Output path, chosen by the record value.
import { transform, onInit, log, LOG_INFO, Record, Output, putBytes, putLenBytes, putRecordHead } from "../../index";
export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init, streamd_process } from "../../index";

let prefix = "";

const RAW_NAME: usize = memory.data<u8>([0x68]); // h
const RAW_VALUE: usize = memory.data<u8>([0x72, 0x61, 0x77]); // raw

function init(config: Uint8Array): string | null {
  const s = String.UTF8.decode(config.buffer);
  if (s.includes('"refuse"')) return "config refused: " + s;
  if (s.includes('"prefix"')) prefix = "p:";
  log(LOG_INFO, "init " + s);
  return null;
}

function fn(rec: Record, out: Output): void {
  const v = rec.valueString();
  if (v === null) {
    out.reject("null value");
    return;
  }
  if (v == "keep") {
    out.keep();
  } else if (v == "drop") {
    // nothing: zero records
  } else if (v == "reject") {
    out.reject("rejected: é");
  } else if (v == "two") {
    // Emits a record built from strings and a copy of the input.
    out.begin(rec.timestampMs + 1);
    out.keyString(prefix + "k2");
    out.valueString("second");
    out.headerString("h", "x");
    out.header("n", null);
    out.header("b", rec.key());
    out.end();
    out.emitCopy(rec);
  } else if (v == "nulls") {
    out.begin(42);
    out.end();
  } else if (v == "stream") {
    out.begin(7);
    out.key(rec.key());
    out.beginValue();
    out.writeString("n=");
    out.writeI64(-9223372036854775807 - 1);
    out.writeByte(0x2C);
    const p = out.reserve(3);
    store<u8>(p, 0x61);
    store<u8>(p, 0x62, 1);
    out.commit(2);
    out.endValue();
    for (let i = 0; i < rec.headerCount; i++) {
      if (!rec.headerIs(i, "drop-me")) out.copyHeader(rec, i);
    }
    out.end();
  } else if (v == "emit-then-keep") {
    out.emitCopy(rec);
    out.keep();
  } else if (v == "reject-then-emit") {
    out.reject("no");
    out.emitCopy(rec);
  } else if (v == "emit-then-drop") {
    out.emitCopy(rec);
    out.drop();
  } else if (v == "header") {
    const h = rec.header("want");
    out.begin(0);
    out.value(h);
    out.end();
  } else if (v == "big") {
    // A value much larger than the initial output buffer.
    out.begin(0);
    out.beginValue();
    for (let i = 0; i < 300000; i++) out.writeString("0123456789");
    out.endValue();
    out.end();
  } else if (v == "raw" || v == "raw-over") {
    // One record written raw: the input's key and value, its headers copied
    // in one piece, then h: raw; timestamp + 5. raw-over commits a byte more
    // than it reserved.
    const kl = rec.keyLen;
    const max: usize = <usize>(20 + 4 + 4 + 4 + 8 + 1 + 3) + (kl > 0 ? <usize>kl : 0) + <usize>rec.valueLen + <usize>rec.headersLen;
    const start = out.reserveRecord(max);
    let d = putRecordHead(start, rec.timestampMs + 5);
    d = putLenBytes(d, rec.keyPtr, kl);
    d = putLenBytes(d, rec.valuePtr, rec.valueLen);
    store<u32>(d, <u32>rec.headerCount + 1);
    d = putBytes(d + 4, rec.headersPtr, <usize>rec.headersLen);
    d = putLenBytes(d, RAW_NAME, 1);
    d = putLenBytes(d, RAW_VALUE, 3);
    out.commitRecord(v == "raw" ? d : start + max + 1);
  } else if (v == "fail") {
    out.fail("destination down");
  } else if (v == "assert") {
    assert(false, "boom");
  } else if (v == "open") {
    out.begin(0);
  } else if (v == "alloc") {
    // Allocates per record; the incremental GC must keep memory bounded.
    const s = "x".repeat(1000) + rec.index.toString();
    out.begin(0);
    out.valueString(s);
    out.end();
  } else {
    out.keep();
  }
}

onInit(init);
transform("test-transform", "0.1.0-\"q\"", fn);
