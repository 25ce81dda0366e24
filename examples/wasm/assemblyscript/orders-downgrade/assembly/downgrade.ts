// The orders-v2 -> orders-v1 downgrade (examples/wasm/testdata/README.md) on
// raw UTF-8 bytes: a strict byte-level JSON validator that extracts the four
// wanted fields in place, and a writer for the compact v1 shape.
//
// Nothing here allocates on the success path: strings are kept as spans of
// the input, decoded keys go to a scratch arena sized once per record, and
// the output is written straight into the SDK's output buffer.

import { Output, jsonEscapeByte, writeDecimal } from "@streamd/sdk";

/** The deepest nesting accepted; the top-level object is level 1. */
export const MAX_DEPTH: i32 = 64;

// ---------------------------------------------------------------------------
// Parser state (one parse at a time per instance).

let base: usize = 0; // start of the value
let end: usize = 0; // end of the value
let pos: usize = 0; // current byte
let errMsg: string = "";

// Spans of the wanted strings in the input (between the quotes) and whether
// they contain escapes.
let orderStart: usize = 0;
let orderEnd: usize = 0;
let orderEsc: bool = false;
let custStart: usize = 0;
let custEnd: usize = 0;
let custEsc: bool = false;
let curStart: usize = 0;
let curEnd: usize = 0;
let curEsc: bool = false;
let amount: i64 = 0;

// The last string scanned by scanString.
let strStart: usize = 0;
let strEnd: usize = 0;
let strEsc: bool = false;

// fail records a syntax error at the current position; always returns false.
function fail(msg: string): bool {
  errMsg = "at byte " + (<i64>(pos - base)).toString() + ": " + msg;
  return false;
}

// failPlain records an error without a position; always returns false.
function failPlain(msg: string): bool {
  errMsg = msg;
  return false;
}

// @ts-ignore: decorator
@inline
function skipWS(): void {
  // pos and end are globals (a global.get/set each in wazero): work on locals.
  let p = pos;
  const e = end;
  while (p < e) {
    const c = load<u8>(p);
    if (c != 0x20 && c != 0x0A && c != 0x0D && c != 0x09) break;
    p++;
  }
  pos = p;
}

// ---------------------------------------------------------------------------
// Key sets: the decoded keys of one object, to find duplicates.

// Decoded keys with escapes are copied to this arena, sized per record to the
// value length (a decoded key is never longer than its source), so pointers
// into it stay valid for the whole record.
let arena: usize = 0;
let arenaCap: usize = 0;
let arenaPos: usize = 0;

function arenaReset(need: usize): void {
  if (need > arenaCap) {
    if (arena != 0) heap.free(arena);
    let c = arenaCap * 2;
    if (c < need) c = need;
    if (c < 4096) c = 4096;
    arena = heap.alloc(c);
    arenaCap = c;
  }
  arenaPos = arena;
}

// A key set keeps (ptr, len, hash) triples in a raw array and, past
// SMALL keys, an open-addressing table of indexes into it.
const SMALL: i32 = 8;

// Unmanaged: not a GC object, so the parser's functions that use one need
// no shadow-stack frame.
// @ts-ignore: decorator
@unmanaged
class KeySet {
  keys: usize = 0; // 12 bytes per key: ptr u32, len u32, hash u32
  keyCap: i32 = 0;
  n: i32 = 0;
  table: usize = 0; // u32 slots holding index+1, 0 = empty
  tableCap: i32 = 0; // power of two, 0 = no table in use
  tableAlloc: i32 = 0;

  reset(): void {
    this.n = 0;
    this.tableCap = 0;
  }

  private slotFor(hash: u32, ptr: usize, len: u32): usize {
    const mask = <u32>this.tableCap - 1;
    let i = hash & mask;
    while (true) {
      const s = this.table + (<usize>i << 2);
      const v = load<u32>(s);
      if (v == 0) return s;
      const k = this.keys + <usize>(v - 1) * 12;
      if (load<u32>(k, 8) == hash && load<u32>(k, 4) == len && memory.compare(<usize>load<u32>(k), ptr, <usize>len) == 0) return s;
      i = (i + 1) & mask;
    }
  }

  private rebuild(cap: i32): void {
    if (cap > this.tableAlloc) {
      if (this.table != 0) heap.free(this.table);
      this.table = heap.alloc(<usize>cap << 2);
      this.tableAlloc = cap;
    }
    const first = this.tableCap == 0;
    this.tableCap = cap;
    memory.fill(this.table, 0, <usize>cap << 2);
    for (let j = 0; j < this.n; j++) {
      const k = this.keys + <usize>j * 12;
      if (first) store<u32>(k, fnv(<usize>load<u32>(k), load<u32>(k, 4)), 8);
      const s = this.slotFor(load<u32>(k, 8), <usize>load<u32>(k), load<u32>(k, 4));
      store<u32>(s, <u32>j + 1);
    }
  }

  // add returns false when the key is already in the set. Small sets are
  // searched linearly and hash nothing; hashes are computed when the table
  // is first built.
  add(ptr: usize, len: u32): bool {
    let h: u32 = 0;
    if (this.tableCap == 0) {
      for (let j = 0; j < this.n; j++) {
        const k = this.keys + <usize>j * 12;
        if (load<u32>(k, 4) == len && memory.compare(<usize>load<u32>(k), ptr, <usize>len) == 0) return false;
      }
    } else {
      h = fnv(ptr, len);
      if (load<u32>(this.slotFor(h, ptr, len)) != 0) return false;
    }
    if (this.n == this.keyCap) {
      const c = this.keyCap == 0 ? 16 : this.keyCap * 2;
      this.keys = this.keys == 0 ? heap.alloc(<usize>c * 12) : heap.realloc(this.keys, <usize>c * 12);
      this.keyCap = c;
    }
    const k = this.keys + <usize>this.n * 12;
    store<u32>(k, <u32>ptr);
    store<u32>(k, len, 4);
    store<u32>(k, h, 8);
    this.n++;
    if (this.tableCap == 0) {
      if (this.n > SMALL) this.rebuild(64);
    } else if (this.n * 2 > this.tableCap) {
      this.rebuild(this.tableCap * 2);
    } else {
      store<u32>(this.slotFor(h, ptr, len), <u32>this.n);
    }
    return true;
  }
}

function fnv(ptr: usize, len: u32): u32 {
  let h: u32 = 2166136261;
  const e = ptr + <usize>len;
  for (let p = ptr; p < e; p++) {
    h ^= <u32>load<u8>(p);
    h *= 16777619;
  }
  return h;
}

const topKeys = new KeySet();
const custKeys = new KeySet();

// keyPtr/keyLen: the decoded bytes of the last key read.
let keyPtr: usize = 0;
let keyLen: u32 = 0;

// ---------------------------------------------------------------------------
// Strings.

function hexVal(c: u32): i32 {
  if (c >= 0x30 && c <= 0x39) return <i32>(c - 0x30);
  c |= 0x20;
  if (c >= 0x61 && c <= 0x66) return <i32>(c - 0x61 + 10);
  return -1;
}

// hex4 reads 4 hex digits at p, or returns -1.
function hex4(p: usize): i32 {
  if (p + 4 > end) return -1;
  const a = hexVal(load<u8>(p));
  const b = hexVal(load<u8>(p, 1));
  const c = hexVal(load<u8>(p, 2));
  const d = hexVal(load<u8>(p, 3));
  if ((a | b | c | d) < 0) return -1;
  return (a << 12) | (b << 8) | (c << 4) | d;
}

// utf8Len validates the UTF-8 sequence at p (first byte >= 0x80) and returns
// its length, or 0 when it is invalid (overlong, surrogate, > U+10FFFF or
// truncated), like Go's utf8.DecodeRune.
function utf8Len(p: usize): usize {
  const b0 = <u32>load<u8>(p);
  const left = end - p;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (left < 2) return 0;
    const b1 = <u32>load<u8>(p, 1);
    return (b1 & 0xC0) == 0x80 ? 2 : 0;
  }
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (left < 3) return 0;
    const b1 = <u32>load<u8>(p, 1);
    const b2 = <u32>load<u8>(p, 2);
    let lo: u32 = 0x80;
    let hi: u32 = 0xBF;
    if (b0 == 0xE0) lo = 0xA0;
    else if (b0 == 0xED) hi = 0x9F;
    if (b1 < lo || b1 > hi || (b2 & 0xC0) != 0x80) return 0;
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (left < 4) return 0;
    const b1 = <u32>load<u8>(p, 1);
    const b2 = <u32>load<u8>(p, 2);
    const b3 = <u32>load<u8>(p, 3);
    let lo: u32 = 0x80;
    let hi: u32 = 0xBF;
    if (b0 == 0xF0) lo = 0x90;
    else if (b0 == 0xF4) hi = 0x8F;
    if (b1 < lo || b1 > hi || (b2 & 0xC0) != 0x80 || (b3 & 0xC0) != 0x80) return 0;
    return 4;
  }
  return 0;
}

// specials16 is the 16-bit mask of the bytes at p..p+15 that end a run of
// plain string bytes: '"', '\\', control (< 0x20) and non-ASCII (>= 0x80:
// negative as signed bytes, so one signed compare with 0x20 finds both).
// wazero compiles it to SSE: one bounds check for the 16 bytes.
// @ts-ignore: decorator
@inline
function specials16(p: usize): u32 {
  const v = v128.load(p);
  const m = v128.or(v128.or(i8x16.eq(v, i8x16.splat(0x22)), i8x16.eq(v, i8x16.splat(0x5C))), i8x16.lt_s(v, i8x16.splat(0x20)));
  return <u32>i8x16.bitmask(m);
}

// plainRun returns the first byte at or after p (p <= e) that is not plain
// printable ASCII other than '"' and '\\', or e. It reads 16 bytes at a time
// and never outside [base, e): the last, short run is read as the 16 bytes
// that end at e, with the bytes before p shifted out of the mask (values
// shorter than 16 bytes go byte by byte).
// @ts-ignore: decorator
@inline
function plainRun(p: usize, e: usize): usize {
  while (p + 16 <= e) {
    const m = specials16(p);
    if (m != 0) return p + <usize>ctz(m);
    p += 16;
  }
  if (p >= e) return e;
  const q = e - 16;
  if (e - base >= 16) {
    const m = specials16(q) >> <u32>(p - q);
    return m != 0 ? p + <usize>ctz(m) : e;
  }
  while (p < e) {
    const c = load<u8>(p);
    if (c < 0x20 || c >= 0x80 || c == 0x22 || c == 0x5C) break;
    p++;
  }
  return p;
}

// scanString validates the string whose opening quote is at pos, leaving
// pos after the closing quote and the contents in strStart/strEnd/strEsc.
//
// The hot loop of the plugin: it works on locals (the globals pos and end
// each cost a load or store per use under wazero) and writes pos back only
// when it leaves, and its failures are out of line (failAt), so that it has
// no managed values and the incremental runtime gives it no shadow-stack
// frame to push and pop per call.
function scanString(): bool {
  const e = end;
  let p = pos + 1; // after the opening quote
  strStart = p;
  let esc = false;
  while (true) {
    p = plainRun(p, e);
    if (p >= e) return failAt(p, ERR_UNTERMINATED);
    const c = <u32>load<u8>(p);
    if (c == 0x22) {
      strEnd = p;
      strEsc = esc;
      pos = p + 1;
      return true;
    }
    if (c < 0x20) return failAt(p, ERR_CONTROL);
    if (c >= 0x80) {
      const n = utf8Len(p);
      if (n == 0) return failAt(p, ERR_UTF8);
      p += n;
      continue;
    }
    // Backslash.
    esc = true;
    if (p + 1 >= e) return failAt(p, ERR_UNTERMINATED);
    const x = <u32>load<u8>(p + 1);
    switch (x) {
      case 0x22: case 0x5C: case 0x2F: case 0x62: case 0x66: case 0x6E: case 0x72: case 0x74:
        p += 2;
        break;
      case 0x75: {
        const r = hex4(p + 2);
        if (r < 0) return failAt(p, ERR_U_ESCAPE);
        if (r >= 0xDC00 && r <= 0xDFFF) return failAt(p, ERR_SURROGATE);
        if (r >= 0xD800 && r <= 0xDBFF) {
          if (p + 12 > e || load<u8>(p + 6) != 0x5C || load<u8>(p + 7) != 0x75) return failAt(p, ERR_SURROGATE);
          const lo = hex4(p + 8);
          if (lo < 0xDC00 || lo > 0xDFFF) return failAt(p, ERR_SURROGATE);
          p += 12;
        } else {
          p += 6;
        }
        break;
      }
      default:
        return failAt(p, ERR_ESCAPE);
    }
  }
  return false; // unreachable: the loop only exits by return
}

// String errors, reported by failAt.
const ERR_UNTERMINATED: i32 = 0;
const ERR_CONTROL: i32 = 1;
const ERR_UTF8: i32 = 2;
const ERR_U_ESCAPE: i32 = 3;
const ERR_SURROGATE: i32 = 4;
const ERR_ESCAPE: i32 = 5;

// failAt records string error code at byte p (kept out of line: it builds
// the message); always returns false.
function failAt(p: usize, code: i32): bool {
  pos = p;
  switch (code) {
    case ERR_UNTERMINATED: return fail("unterminated string");
    case ERR_CONTROL: return fail("control character in string");
    case ERR_UTF8: return fail("invalid UTF-8 in string");
    case ERR_U_ESCAPE: return fail("invalid \\u escape");
    case ERR_SURROGATE: return fail("unpaired surrogate escape");
  }
  return fail("invalid escape \\" + String.fromCharCode(<i32>load<u8>(p + 1)));
}

// Writes code point cp at d as UTF-8; returns the new end.
function putUTF8(cp: u32, d: usize): usize {
  if (cp < 0x80) {
    store<u8>(d, <u8>cp);
    return d + 1;
  }
  if (cp < 0x800) {
    store<u8>(d, <u8>(0xC0 | (cp >> 6)));
    store<u8>(d, <u8>(0x80 | (cp & 0x3F)), 1);
    return d + 2;
  }
  if (cp < 0x10000) {
    store<u8>(d, <u8>(0xE0 | (cp >> 12)));
    store<u8>(d, <u8>(0x80 | ((cp >> 6) & 0x3F)), 1);
    store<u8>(d, <u8>(0x80 | (cp & 0x3F)), 2);
    return d + 3;
  }
  store<u8>(d, <u8>(0xF0 | (cp >> 18)));
  store<u8>(d, <u8>(0x80 | ((cp >> 12) & 0x3F)), 1);
  store<u8>(d, <u8>(0x80 | ((cp >> 6) & 0x3F)), 2);
  store<u8>(d, <u8>(0x80 | (cp & 0x3F)), 3);
  return d + 4;
}

// decodeEscape decodes the (validated) escape at s, writes it at d, either
// as plain UTF-8 (escape false) or re-escaped minimally (escape true).
// Returns the new end of d; advances escPos past the escape.
let escPos: usize = 0;

function decodeEscape(s: usize, d: usize, escape: bool): usize {
  const e = <u32>load<u8>(s + 1);
  let cp: u32;
  switch (e) {
    case 0x62: cp = 0x08; break;
    case 0x66: cp = 0x0C; break;
    case 0x6E: cp = 0x0A; break;
    case 0x72: cp = 0x0D; break;
    case 0x74: cp = 0x09; break;
    case 0x75: {
      cp = <u32>hex4(s + 2);
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (<u32>hex4(s + 8) - 0xDC00);
        escPos = s + 12;
      } else {
        escPos = s + 6;
      }
      if (escape && cp < 0x80) return jsonEscapeByte(cp, d);
      return putUTF8(cp, d);
    }
    default: cp = e; // '"', '\', '/'
  }
  escPos = s + 2;
  if (escape) return jsonEscapeByte(cp, d);
  store<u8>(d, <u8>cp);
  return d + 1;
}

// decodeTo writes the decoded bytes of the validated string [s, e) at d.
function decodeTo(s: usize, e: usize, d: usize, escape: bool): usize {
  let p = s;
  while (p < e) {
    const c = load<u8>(p);
    if (c != 0x5C) {
      store<u8>(d++, c);
      p++;
      continue;
    }
    d = decodeEscape(p, d, escape);
    p = escPos;
  }
  return d;
}

// readKey reads an object key at pos (which must be '"'); with keep, its
// decoded bytes go to keyPtr/keyLen.
function readKey(keep: bool): bool {
  if (pos >= end || load<u8>(pos) != 0x22) return fail("expected a string key");
  if (!scanString()) return false;
  if (!keep) return true;
  if (!strEsc) {
    keyPtr = strStart;
    keyLen = <u32>(strEnd - strStart);
    return true;
  }
  keyPtr = arenaPos;
  arenaPos = decodeTo(strStart, strEnd, arenaPos, false);
  keyLen = <u32>(arenaPos - keyPtr);
  return true;
}

// ---------------------------------------------------------------------------
// Values.

// Literal bytes for the known keys and for true/false/null.
const K_ORDER_ID = String.UTF8.encode("order_id");
const K_CUSTOMER = String.UTF8.encode("customer");
const K_AMOUNT = String.UTF8.encode("amount_cents");
const K_CURRENCY = String.UTF8.encode("currency");
const K_ID = String.UTF8.encode("id");

// @ts-ignore: decorator
@inline
function keyIs(k: ArrayBuffer): bool {
  return keyLen == <u32>k.byteLength && memory.compare(keyPtr, changetype<usize>(k), <usize>keyLen) == 0;
}

// Which known top-level key keyPtr/keyLen is, compared a word at a time.
const KEY_OTHER: i32 = 0;
const KEY_ORDER_ID: i32 = 1;
const KEY_CUSTOMER: i32 = 2;
const KEY_AMOUNT: i32 = 3;
const KEY_CURRENCY: i32 = 4;

function topKey(): i32 {
  if (keyLen == 8) {
    const w = load<u64>(keyPtr);
    if (w == load<u64>(changetype<usize>(K_ORDER_ID))) return KEY_ORDER_ID;
    if (w == load<u64>(changetype<usize>(K_CUSTOMER))) return KEY_CUSTOMER;
    if (w == load<u64>(changetype<usize>(K_CURRENCY))) return KEY_CURRENCY;
  } else if (keyLen == 12) {
    if (load<u64>(keyPtr) == load<u64>(changetype<usize>(K_AMOUNT)) && load<u32>(keyPtr, 8) == load<u32>(changetype<usize>(K_AMOUNT), 8)) return KEY_AMOUNT;
  }
  return KEY_OTHER;
}

function literal(word: u64, n: usize): bool {
  // word holds the literal's bytes little-endian.
  if (end - pos < n) return fail("invalid literal");
  for (let i: usize = 0; i < n; i++) {
    if (<u64>load<u8>(pos + i) != ((word >> (i * 8)) & 0xFF)) return fail("invalid literal");
  }
  pos += n;
  return true;
}

let numIsInt: bool = false;

@inline
function isDigit(c: u32): bool {
  return c - 0x30 < 10;
}

// number validates a JSON number at pos and sets numIsInt.
function number(): bool {
  if (pos < end && load<u8>(pos) == 0x2D) pos++;
  if (pos < end && load<u8>(pos) == 0x30) {
    pos++;
  } else if (pos < end && load<u8>(pos) >= 0x31 && load<u8>(pos) <= 0x39) {
    while (pos < end && isDigit(load<u8>(pos))) pos++;
  } else {
    return fail("invalid number");
  }
  numIsInt = true;
  if (pos < end && load<u8>(pos) == 0x2E) {
    numIsInt = false;
    pos++;
    if (pos >= end || !isDigit(load<u8>(pos))) return fail("invalid number");
    while (pos < end && isDigit(load<u8>(pos))) pos++;
  }
  if (pos < end && (load<u8>(pos) | 0x20) == 0x65) {
    numIsInt = false;
    pos++;
    if (pos < end && (load<u8>(pos) == 0x2B || load<u8>(pos) == 0x2D)) pos++;
    if (pos >= end || !isDigit(load<u8>(pos))) return fail("invalid number");
    while (pos < end && isDigit(load<u8>(pos))) pos++;
  }
  return true;
}

// value validates any JSON value at pos; depth is the level an object or
// array here would have.
function value(depth: i32): bool {
  skipWS();
  if (pos >= end) return fail("unexpected end of value");
  const c = <u32>load<u8>(pos);
  switch (c) {
    case 0x7B: return object(depth, 0); // {
    case 0x5B: return array(depth); // [
    case 0x22: return scanString();
    case 0x74: return literal(0x65757274, 4); // true
    case 0x66: return literal(0x65736C6166, 5); // false
    case 0x6E: return literal(0x6C6C756E, 4); // null
  }
  if (c == 0x2D || isDigit(c)) return number();
  return failUnexpected(c);
}

// failUnexpected is out of line: building its message needs a shadow-stack
// frame, which value() then does not have.
function failUnexpected(c: u32): bool {
  return fail("unexpected character " + quoteByte(c));
}

// quoteByte renders a byte like Go's %q of a byte.
function quoteByte(c: u32): string {
  if (c >= 0x20 && c < 0x7F) {
    if (c == 0x27 || c == 0x5C) return "'\\" + String.fromCharCode(<i32>c) + "'";
    return "'" + String.fromCharCode(<i32>c) + "'";
  }
  const hex = "0123456789abcdef";
  return "'\\x" + hex.charAt(<i32>(c >> 4)) + hex.charAt(<i32>(c & 0xF)) + "'";
}

function array(depth: i32): bool {
  if (depth > MAX_DEPTH) return fail("nesting deeper than 64");
  pos++; // [
  skipWS();
  if (pos < end && load<u8>(pos) == 0x5D) {
    pos++;
    return true;
  }
  while (true) {
    if (!value(depth + 1)) return false;
    skipWS();
    if (pos >= end) return fail("unterminated array");
    const c = load<u8>(pos);
    if (c == 0x2C) {
      pos++;
    } else if (c == 0x5D) {
      pos++;
      return true;
    } else {
      return fail("expected ',' or ']'");
    }
  }
}

// Object roles: what to do with the members.
const OBJ_ANY: i32 = 0;
const OBJ_TOP: i32 = 1;
const OBJ_CUSTOMER: i32 = 2;

let seen: i32 = 0;
const SEEN_ORDER: i32 = 1;
const SEEN_CUSTOMER: i32 = 2;
const SEEN_AMOUNT: i32 = 4;
const SEEN_CURRENCY: i32 = 8;
let custID: bool = false;

// object reads an object at pos (which is '{') at nesting level depth.
function object(depth: i32, role: i32): bool {
  if (depth > MAX_DEPTH) return fail("nesting deeper than 64");
  pos++; // {
  skipWS();
  if (pos < end && load<u8>(pos) == 0x7D) {
    pos++;
    return true;
  }
  while (true) {
    skipWS();
    if (!readKey(role != OBJ_ANY)) return false;
    skipWS();
    if (pos >= end || load<u8>(pos) != 0x3A) return fail("expected ':'");
    pos++;
    if (role == OBJ_TOP) {
      if (!topKeys.add(keyPtr, keyLen)) return failDuplicate("");
      if (!topMember(depth)) return false;
    } else if (role == OBJ_CUSTOMER) {
      if (!custKeys.add(keyPtr, keyLen)) return failDuplicate(" in customer");
      if (keyIs(K_ID)) {
        if (!keptString(FIELD_CUSTOMER_ID)) return false;
        custStart = strStart;
        custEnd = strEnd;
        custEsc = strEsc;
        custID = true;
      } else if (!value(depth + 1)) {
        return false;
      }
    } else if (!value(depth + 1)) {
      return false;
    }
    skipWS();
    if (pos >= end) return fail("unterminated object");
    const c = load<u8>(pos);
    if (c == 0x2C) {
      pos++;
    } else if (c == 0x7D) {
      pos++;
      return true;
    } else {
      return fail("expected ',' or '}'");
    }
  }
}

// failDuplicate reports the key in keyPtr/keyLen as a duplicate (out of
// line, like failUnexpected, to keep object() free of a shadow-stack frame).
function failDuplicate(where: string): bool {
  return failPlain("duplicate key " + quoteKey() + where);
}

function quoteKey(): string {
  return '"' + String.UTF8.decodeUnsafe(keyPtr, <usize>keyLen) + '"';
}

// The kept string fields, for keptString's error.
const FIELD_ORDER_ID: i32 = 0;
const FIELD_CURRENCY: i32 = 1;
const FIELD_CUSTOMER_ID: i32 = 2;

function failNotString(field: i32): bool {
  if (field == FIELD_ORDER_ID) return failPlain("order_id is not a string");
  if (field == FIELD_CURRENCY) return failPlain("currency is not a string");
  return failPlain("customer.id is not a string");
}

// keptString reads a value that must be a string. field is a FIELD_ number,
// not a name: a string argument live across value() would need a frame.
function keptString(field: i32): bool {
  skipWS();
  if (pos >= end || load<u8>(pos) != 0x22) {
    if (!value(2)) return false;
    return failNotString(field);
  }
  return scanString();
}

// topMember reads the value of a top-level member whose key is in keyPtr.
function topMember(depth: i32): bool {
  const which = topKey();
  if (which == KEY_OTHER) return value(depth + 1);
  if (which == KEY_ORDER_ID) {
    if (!keptString(FIELD_ORDER_ID)) return false;
    orderStart = strStart;
    orderEnd = strEnd;
    orderEsc = strEsc;
    seen |= SEEN_ORDER;
    return true;
  }
  if (which == KEY_CURRENCY) {
    if (!keptString(FIELD_CURRENCY)) return false;
    curStart = strStart;
    curEnd = strEnd;
    curEsc = strEsc;
    seen |= SEEN_CURRENCY;
    return true;
  }
  if (which == KEY_AMOUNT) {
    seen |= SEEN_AMOUNT;
    return integer();
  }
  // KEY_CUSTOMER
  {
    seen |= SEEN_CUSTOMER;
    skipWS();
    if (pos >= end || load<u8>(pos) != 0x7B) return fail("customer is not an object");
    custKeys.reset();
    custID = false;
    if (!object(depth + 1, OBJ_CUSTOMER)) return false;
    if (!custID) return failPlain("missing customer.id");
    return true;
  }
}

// integer reads amount_cents: an integer literal that fits int64.
function integer(): bool {
  skipWS();
  const start = pos;
  if (pos >= end || (load<u8>(pos) != 0x2D && !isDigit(load<u8>(pos)))) {
    if (!value(2)) return false;
    return failPlain("amount_cents is not a number");
  }
  if (!number()) return false;
  if (!numIsInt) return failPlain("amount_cents is not an integer");
  let p = start;
  const neg = load<u8>(p) == 0x2D;
  if (neg) p++;
  let u: u64 = 0;
  while (p < pos) {
    const d = <u64>(load<u8>(p) - 0x30);
    if (u > (<u64>0xFFFFFFFFFFFFFFFF - d) / 10) return failPlain("amount_cents does not fit int64");
    u = u * 10 + d;
    p++;
  }
  if (neg && u <= <u64>0x8000000000000000) {
    amount = <i64>(<u64>0 - u);
  } else if (!neg && u < <u64>0x8000000000000000) {
    amount = <i64>u;
  } else {
    return failPlain("amount_cents does not fit int64");
  }
  return true;
}

/**
 * Parses the value [ptr, ptr+len) and, on success, leaves the wanted fields
 * in the parser state; on failure returns false with the reason in errMsg.
 */
export function parse(ptr: usize, len: i32): bool {
  if (len < 0) return failPlain("null value");
  base = ptr;
  end = ptr + <usize>len;
  pos = ptr;
  seen = 0;
  arenaReset(<usize>len);
  topKeys.reset();
  skipWS();
  if (pos >= end) return fail("empty value");
  if (load<u8>(pos) != 0x7B) return fail("value is not a JSON object");
  if (!object(1, OBJ_TOP)) return false;
  skipWS();
  if (pos != end) return fail("data after the JSON object");
  if ((seen & SEEN_ORDER) == 0) return failPlain("missing order_id");
  if ((seen & SEEN_CUSTOMER) == 0) return failPlain("missing customer");
  if ((seen & SEEN_AMOUNT) == 0) return failPlain("missing amount_cents");
  if ((seen & SEEN_CURRENCY) == 0) return failPlain("missing currency");
  return true;
}

/** The reason of the last failed parse. */
export function parseError(): string {
  return errMsg;
}

// ---------------------------------------------------------------------------
// Output.

// The constant parts of the v1 value, each padded with spaces to 16 bytes so
// that putConst copies it with two 8-byte loads and stores; the _LEN is the
// part's real length (the padding is overwritten by what follows).
const V_ORDER_ID = String.UTF8.encode('{"order_id":    ');
const V_ORDER_ID_LEN: usize = 12;
const V_CUSTOMER_ID = String.UTF8.encode(',"customer_id": ');
const V_CUSTOMER_ID_LEN: usize = 15;
const V_AMOUNT = String.UTF8.encode(',"amount_cents":');
const V_AMOUNT_LEN: usize = 16;
const V_CURRENCY = String.UTF8.encode(',"currency":    ');
const V_CURRENCY_LEN: usize = 12;

// putConst writes the first n bytes of the 16-byte constant k at d (and up
// to 16 - n bytes of padding after them); returns d + n.
// @ts-ignore: decorator
@inline
function putConst(d: usize, k: ArrayBuffer, n: usize): usize {
  const p = changetype<usize>(k);
  store<u64>(d, load<u64>(p));
  store<u64>(d, load<u64>(p, 8), 8);
  return d + n;
}

// putString writes the kept string [s, e) at d as a minimally escaped JSON
// string and returns the new end. Without escapes the source bytes are
// already minimal (valid JSON strings hold no raw '"', '\' or control
// characters) and are copied 8 bytes at a time (no memory.copy: under wazero
// it is a call out of the guest, dearer than a few words); with escapes the
// output never exceeds the source either (every escape decodes to at most
// its own length, raw bytes copy one for one).
function putString(d: usize, s: usize, e: usize, esc: bool): usize {
  store<u8>(d, 0x22);
  let w = d + 1;
  if (esc) {
    w = decodeTo(s, e, w, true);
  } else {
    let p = s;
    while (p + 8 <= e) {
      store<u64>(w, load<u64>(p));
      p += 8;
      w += 8;
    }
    while (p < e) {
      store<u8>(w, load<u8>(p));
      p++;
      w++;
    }
  }
  store<u8>(w, 0x22);
  return w + 1;
}

/**
 * Writes the v1 value of the last successful parse as the streamed value:
 * one reserve and one commit for the whole value, written with raw stores
 * (each Output call costs a call and the SDK's checks).
 */
export function writeValue(out: Output): void {
  // The most it can take: the three strings (never longer decoded) and
  // their quotes, the constants with their 16-byte copies, 20 digits and
  // '}'.
  const max = (orderEnd - orderStart) + (custEnd - custStart) + (curEnd - curStart) + 6 + 4 * 16 + 20 + 1;
  const d = out.reserve(max);
  let w = putConst(d, V_ORDER_ID, V_ORDER_ID_LEN);
  w = putString(w, orderStart, orderEnd, orderEsc);
  w = putConst(w, V_CUSTOMER_ID, V_CUSTOMER_ID_LEN);
  w = putString(w, custStart, custEnd, custEsc);
  w = putConst(w, V_AMOUNT, V_AMOUNT_LEN);
  w += writeDecimal(amount, w);
  w = putConst(w, V_CURRENCY, V_CURRENCY_LEN);
  w = putString(w, curStart, curEnd, curEsc);
  store<u8>(w, 0x7D);
  out.commit(w + 1 - d);
}
