// A transform that reports what the JSON helpers make of each record value.
import { transform, onInit, Record, Output } from "../../index";
import { jsonValid, jsonGet, jsonString, jsonIsInt, jsonInt, jsonNumber, jsonIsTrue, jsonIsBool, jsonIsNull, jsonUnknownKey, jsonIsObject } from "../../index";
export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init, streamd_process } from "../../index";

let limit: i64 = 10;

function init(config: Uint8Array): string | null {
  const unknown = jsonUnknownKey(config, ["limit"]);
  if (unknown !== null) return "unknown key " + unknown;
  const l = jsonGet(config, "limit");
  if (l !== null) {
    if (!jsonIsInt(l)) return "limit: want an integer";
    limit = jsonInt(l);
  }
  return null;
}

function show(doc: Uint8Array, key: string): string {
  const raw = jsonGet(doc, key);
  if (raw === null) return "-";
  const s = jsonString(raw);
  if (s !== null) return "s:" + s;
  if (jsonIsInt(raw)) return "i:" + jsonInt(raw).toString();
  if (jsonIsBool(raw)) return jsonIsTrue(raw) ? "true" : "false";
  if (jsonIsNull(raw)) return "null";
  const f = jsonNumber(raw);
  if (!isNaN(f)) return "f:" + f.toString();
  return "raw:" + String.UTF8.decodeUnsafe(raw.dataStart, <usize>raw.length);
}

function fn(rec: Record, out: Output): void {
  const v = rec.value();
  if (v === null) {
    out.reject("null value");
    return;
  }
  let s = "valid=" + (jsonValid(v) ? "1" : "0") + " object=" + (jsonIsObject(v) ? "1" : "0");
  s += " a=" + show(v, "a") + " n=" + show(v, "n") + " f=" + show(v, "f") + " b=" + show(v, "b") + " z=" + show(v, "z") + " l=" + show(v, "l");
  const u = jsonUnknownKey(v, ["a", "n", "f", "b", "z", "l"]);
  s += " unknown=" + (u === null ? "-" : u) + " limit=" + limit.toString();
  out.begin(0);
  out.valueString(s);
  out.end();
}

onInit(init);
transform("test-json", "1.0.0", fn);
