// The orders-v2 -> orders-v1 downgrade (examples/wasm/testdata/README.md) on
// raw UTF-8 bytes: a strict byte-level JSON validator that extracts the four
// wanted fields in place, and a writer for the compact v1 shape.
//
// Nothing here allocates on the success path: strings are kept as spans of
// the input, decoded keys go to a scratch arena sized once per record, and
// the output is written straight into the SDK's output buffer.
//
// The parser's functions take the position p and the value's end e as
// arguments and return the position after what they read, or 0 for a
// failure (the value is in the SDK's input buffer, never at address 0), with
// the message in errMsg. Module globals (a load or store through the module
// context per use under wazero) hold only the results and what failures
// need. Nothing on the success path builds a string or holds a managed
// value, so no function there has a shadow-stack frame: messages are built
// out of line, in the fail functions.

import { jsonEscapeByte, putBytes } from "@streamd/sdk";

/** The deepest nesting accepted; the top-level object is level 1. */
export const MAX_DEPTH: i32 = 64;

// ---------------------------------------------------------------------------
// Parser state (one parse at a time per instance).

let base: usize = 0; // start of the value
let errMsg: string = "";
// The opening quote of the last string scanString found an escape in (so a
// string holds escapes when this is its opening quote; set only on that
// path, and reset per record).
let lastEsc: usize = 0;

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
// Whether amount_cents is 0 (or -0): its output is then "0".
let amountZero: bool = false;
// The literal of amount_cents in the input: JSON's integers are written as
// Go's strconv writes an int64 (no leading zeros, no '+'), but for "-0".
let amountStart: usize = 0;
let amountEnd: usize = 0;

// fail records a syntax error at byte p; always returns 0.
function fail(p: usize, msg: string): usize {
  errMsg = "at byte " + (<i64>(p - base)).toString() + ": " + msg;
  return 0;
}

// failPlain records an error without a position; always returns 0.
function failPlain(msg: string): usize {
  errMsg = msg;
  return 0;
}

// ws returns the first byte at or after p that is not JSON whitespace, or e.
// @ts-ignore: decorator
@inline
function ws(p: usize, e: usize): usize {
  // JSON whitespace is all below 0x21: a byte above it (what follows nearly
  // every token of an order) ends the run with no loop entered.
  if (p < e && load<u8>(p) > 0x20) return p;
  while (p < e) {
    const c = load<u8>(p);
    if (c != 0x20 && c != 0x0A && c != 0x0D && c != 0x09) break;
    p++;
  }
  return p;
}

// eqBytes compares n bytes at a and b, 8 at a time (no memory.compare: under
// wazero a call out of the guest), reading nothing past either.
// @ts-ignore: decorator
@inline
function eqBytes(a: usize, b: usize, n: usize): bool {
  while (n >= 8) {
    if (load<u64>(a) != load<u64>(b)) return false;
    a += 8;
    b += 8;
    n -= 8;
  }
  if (n >= 4) {
    if (load<u32>(a) != load<u32>(b)) return false;
    a += 4;
    b += 4;
    n -= 4;
  }
  while (n > 0) {
    if (load<u8>(a) != load<u8>(b)) return false;
    a++;
    b++;
    n--;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Key sets: the decoded keys of one object other than the known ones (those
// are bits of seen and custID), to find duplicates.

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
      if (load<u32>(k, 8) == hash && load<u32>(k, 4) == len && eqBytes(<usize>load<u32>(k), ptr, <usize>len)) return s;
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
        if (load<u32>(k, 4) == len && eqBytes(<usize>load<u32>(k), ptr, <usize>len)) return false;
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

// addKey is KeySet.add with its commonest case inline, in the two callers:
// a set under SMALL keys with room (an order's objects have one or two keys
// other than the known ones), searched and appended without a call.
// @ts-ignore: decorator
@inline
function addKey(set: KeySet, k: usize, n: u32): bool {
  const c = set.n;
  if (set.tableCap != 0 || c >= SMALL || c >= set.keyCap) return set.add(k, n);
  const keys = set.keys;
  for (let j = 0; j < c; j++) {
    const x = keys + <usize>j * 12;
    if (load<u32>(x, 4) == n && eqBytes(<usize>load<u32>(x), k, <usize>n)) return false;
  }
  const x = keys + <usize>c * 12;
  store<u32>(x, <u32>k);
  store<u32>(x, n, 4);
  store<u32>(x, 0, 8);
  set.n = c + 1;
  return true;
}

const topKeys = new KeySet();
const custKeys = new KeySet();

// The decoded bytes of the key a failure names (failDuplicate).
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

// hex4 reads 4 hex digits at p (before e), or returns -1.
function hex4(p: usize, e: usize): i32 {
  if (p + 4 > e) return -1;
  const a = hexVal(load<u8>(p));
  const b = hexVal(load<u8>(p, 1));
  const c = hexVal(load<u8>(p, 2));
  const d = hexVal(load<u8>(p, 3));
  if ((a | b | c | d) < 0) return -1;
  return (a << 12) | (b << 8) | (c << 4) | d;
}

// utf8Len validates the UTF-8 sequence at p (first byte >= 0x80, before e)
// and returns its length, or 0 when it is invalid (overlong, surrogate,
// > U+10FFFF or truncated), like Go's utf8.DecodeRune.
function utf8Len(p: usize, e: usize): usize {
  const b0 = <u32>load<u8>(p);
  const left = e - p;
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

// scanString validates the string whose opening quote is at q (before e)
// and returns the position after its closing quote, or 0. A string with an
// escape sets lastEsc to q.
function scanString(q: usize, e: usize): usize {
  let p = q + 1; // after the opening quote
  while (true) {
    p = plainRun(p, e);
    if (p >= e) return failString(p, ERR_UNTERMINATED);
    const c = <u32>load<u8>(p);
    if (c == 0x22) return p + 1;
    if (c < 0x20) return failString(p, ERR_CONTROL);
    if (c >= 0x80) {
      const n = utf8Len(p, e);
      if (n == 0) return failString(p, ERR_UTF8);
      p += n;
      continue;
    }
    // Backslash.
    lastEsc = q;
    if (p + 1 >= e) return failString(p, ERR_UNTERMINATED);
    const x = <u32>load<u8>(p + 1);
    switch (x) {
      case 0x22: case 0x5C: case 0x2F: case 0x62: case 0x66: case 0x6E: case 0x72: case 0x74:
        p += 2;
        break;
      case 0x75: {
        const r = hex4(p + 2, e);
        if (r < 0) return failString(p, ERR_U_ESCAPE);
        if (r >= 0xDC00 && r <= 0xDFFF) return failString(p, ERR_SURROGATE);
        if (r >= 0xD800 && r <= 0xDBFF) {
          if (p + 12 > e || load<u8>(p + 6) != 0x5C || load<u8>(p + 7) != 0x75) return failString(p, ERR_SURROGATE);
          const lo = hex4(p + 8, e);
          if (lo < 0xDC00 || lo > 0xDFFF) return failString(p, ERR_SURROGATE);
          p += 12;
        } else {
          p += 6;
        }
        break;
      }
      default:
        return failString(p, ERR_ESCAPE);
    }
  }
  return 0; // unreachable: the loop only exits by return
}

// str is scanString with its commonest case inline, in its callers: a
// string whose closing quote is the first special byte of the 16 after its
// opening quote (the keys and most values of an order), found without a
// call. Anything else, the 16 bytes included, is scanString's.
// @ts-ignore: decorator
@inline
function str(q: usize, e: usize): usize {
  const p = q + 1;
  if (p + 16 <= e) {
    const m = specials16(p);
    if (m != 0) {
      const z = p + <usize>ctz(m);
      if (load<u8>(z) == 0x22) return z + 1;
    }
  }
  return scanString(q, e);
}

// String errors, reported by failString.
const ERR_UNTERMINATED: i32 = 0;
const ERR_CONTROL: i32 = 1;
const ERR_UTF8: i32 = 2;
const ERR_U_ESCAPE: i32 = 3;
const ERR_SURROGATE: i32 = 4;
const ERR_ESCAPE: i32 = 5;

// failString records string error code at byte p; always returns 0.
function failString(p: usize, code: i32): usize {
  switch (code) {
    case ERR_UNTERMINATED: return fail(p, "unterminated string");
    case ERR_CONTROL: return fail(p, "control character in string");
    case ERR_UTF8: return fail(p, "invalid UTF-8 in string");
    case ERR_U_ESCAPE: return fail(p, "invalid \\u escape");
    case ERR_SURROGATE: return fail(p, "unpaired surrogate escape");
  }
  return fail(p, "invalid escape \\" + String.fromCharCode(<i32>load<u8>(p + 1)));
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
      // Validated: the digits are there.
      cp = <u32>hex4(s + 2, s + 6);
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (<u32>hex4(s + 8, s + 12) - 0xDC00);
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

// ---------------------------------------------------------------------------
// Values.

// The known top-level keys, as the bits of seen: each may appear once.
let seen: u32 = 0;
const SEEN_ORDER: u32 = 1;
const SEEN_CUSTOMER: u32 = 2;
const SEEN_AMOUNT: u32 = 4;
const SEEN_CURRENCY: u32 = 8;
// Whether the customer object had its "id".
let custID: bool = false;

// topKey returns the SEEN_ bit of the known top-level key [k, k+n), or 0,
// compared a word at a time (the words are the keys' bytes, little-endian).
// @ts-ignore: decorator
@inline
function topKey(k: usize, n: usize): u32 {
  if (n == 8) {
    const w = load<u64>(k);
    if (w == 0x64695F726564726F) return SEEN_ORDER; // order_id
    if (w == 0x72656D6F74737563) return SEEN_CUSTOMER; // customer
    if (w == 0x79636E6572727563) return SEEN_CURRENCY; // currency
  } else if (n == 12) {
    if (load<u64>(k) == 0x635F746E756F6D61 && load<u32>(k, 8) == 0x73746E65) return SEEN_AMOUNT; // amount_cents
  }
  return 0;
}

// literal checks that the n bytes of word (little-endian) are at p.
function literal(p: usize, e: usize, word: u64, n: usize): usize {
  if (e - p < n) return fail(p, "invalid literal");
  for (let i: usize = 0; i < n; i++) {
    if (<u64>load<u8>(p + i) != ((word >> (i * 8)) & 0xFF)) return fail(p, "invalid literal");
  }
  return p + n;
}

// Whether the last number() read was an integer (no fraction, no exponent).
let numIsInt: bool = false;

// @ts-ignore: decorator
@inline
function isDigit(c: u32): bool {
  return c - 0x30 < 10;
}

// digits returns the first byte at or after p that is not a digit, or e.
// @ts-ignore: decorator
@inline
function digits(p: usize, e: usize): usize {
  while (p < e && isDigit(load<u8>(p))) p++;
  return p;
}

// number validates a JSON number at p and sets numIsInt.
function number(p: usize, e: usize): usize {
  if (p < e && load<u8>(p) == 0x2D) p++;
  if (p < e && load<u8>(p) == 0x30) {
    p++;
  } else if (p < e && load<u8>(p) >= 0x31 && load<u8>(p) <= 0x39) {
    p = digits(p, e);
  } else {
    return fail(p, "invalid number");
  }
  let isInt = true;
  if (p < e && load<u8>(p) == 0x2E) {
    isInt = false;
    p++;
    if (p >= e || !isDigit(load<u8>(p))) return fail(p, "invalid number");
    p = digits(p, e);
  }
  if (p < e && (load<u8>(p) | 0x20) == 0x65) {
    isInt = false;
    p++;
    if (p < e && (load<u8>(p) == 0x2B || load<u8>(p) == 0x2D)) p++;
    if (p >= e || !isDigit(load<u8>(p))) return fail(p, "invalid number");
    p = digits(p, e);
  }
  numIsInt = isInt;
  return p;
}

// value validates any JSON value at p; depth is the level an object or
// array here would have.
function value(p: usize, e: usize, depth: i32): usize {
  p = ws(p, e);
  if (p >= e) return fail(p, "unexpected end of value");
  const c = <u32>load<u8>(p);
  switch (c) {
    case 0x22: return str(p, e);
    case 0x7B: return object(p, e, depth); // {
    case 0x5B: return array(p, e, depth); // [
    case 0x74: return literal(p, e, 0x65757274, 4); // true
    case 0x66: return literal(p, e, 0x65736C6166, 5); // false
    case 0x6E: return literal(p, e, 0x6C6C756E, 4); // null
  }
  if (c == 0x2D || isDigit(c)) return number(p, e);
  return failUnexpected(p, c);
}

// failUnexpected names the byte c at p (out of line, with its message).
function failUnexpected(p: usize, c: u32): usize {
  return fail(p, "unexpected character " + quoteByte(c));
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

function array(p: usize, e: usize, depth: i32): usize {
  if (depth > MAX_DEPTH) return fail(p, "nesting deeper than 64");
  p = ws(p + 1, e); // after '['
  if (p < e && load<u8>(p) == 0x5D) return p + 1;
  while (true) {
    // A string element is read inline (value would do the same after the
    // same whitespace).
    p = ws(p, e);
    p = p < e && load<u8>(p) == 0x22 ? str(p, e) : value(p, e, depth + 1);
    if (p == 0) return 0;
    p = ws(p, e);
    if (p >= e) return fail(p, "unterminated array");
    const c = load<u8>(p);
    if (c == 0x2C) {
      p++;
    } else if (c == 0x5D) {
      return p + 1;
    } else {
      return fail(p, "expected ',' or ']'");
    }
  }
  return 0; // unreachable
}

// skip validates the value at p of a member nobody wants, at nesting level
// depth: value, with its commonest cases inline in the two callers (a string,
// an order's "name" and "note", read without a call to value; an array, its
// "tags", with a call to array but not to value first).
// @ts-ignore: decorator
@inline
function skip(p: usize, e: usize, depth: i32): usize {
  p = ws(p, e);
  if (p < e) {
    const c = load<u8>(p);
    if (c == 0x22) return str(p, e);
    if (c == 0x5B) return array(p, e, depth);
  }
  return value(p, e, depth);
}

// keyEnd reads the key at p (after whitespace): returns the position after
// its closing quote, or 0.
// @ts-ignore: decorator
@inline
function key(p: usize, e: usize): usize {
  if (p >= e || load<u8>(p) != 0x22) return fail(p, "expected a string key");
  return str(p, e);
}

// colon checks for the ':' after a key at p (after whitespace) and returns
// the position after it, or 0.
// @ts-ignore: decorator
@inline
function colon(p: usize, e: usize): usize {
  if (p >= e || load<u8>(p) != 0x3A) return fail(p, "expected ':'");
  return p + 1;
}

// Member separators: after a member, at p (after whitespace).
const NEXT_FAIL: i32 = 0;
const NEXT_MEMBER: i32 = 1;
const NEXT_END: i32 = 2;

// next reads what follows an object member at p: ',' (NEXT_MEMBER), '}'
// (NEXT_END), or anything else (NEXT_FAIL, recorded).
// @ts-ignore: decorator
@inline
function next(p: usize, e: usize): i32 {
  if (p >= e) {
    fail(p, "unterminated object");
    return NEXT_FAIL;
  }
  const c = load<u8>(p);
  if (c == 0x2C) return NEXT_MEMBER;
  if (c == 0x7D) return NEXT_END;
  fail(p, "expected ',' or '}'");
  return NEXT_FAIL;
}

// object validates an object at p (which is '{') at nesting level depth
// whose members nobody wants: keys are scanned, not decoded nor checked for
// duplicates.
function object(p: usize, e: usize, depth: i32): usize {
  if (depth > MAX_DEPTH) return fail(p, "nesting deeper than 64");
  p = ws(p + 1, e);
  if (p < e && load<u8>(p) == 0x7D) return p + 1;
  while (true) {
    p = key(ws(p, e), e);
    if (p == 0) return 0;
    p = colon(ws(p, e), e);
    if (p == 0) return 0;
    p = value(p, e, depth + 1);
    if (p == 0) return 0;
    p = ws(p, e);
    const n = next(p, e);
    if (n == NEXT_END) return p + 1;
    if (n == NEXT_FAIL) return 0;
    p++;
  }
  return 0; // unreachable
}

// keyBytes sets keyStart/keyLength to the decoded bytes of the key whose
// opening quote is at q and closing quote at z: the input bytes, or, with
// escapes, their decoding in the arena.
let keyStart: usize = 0;
let keyLength: usize = 0;

// @ts-ignore: decorator
@inline
function keyBytes(q: usize, z: usize): void {
  if (lastEsc != q) {
    keyStart = q + 1;
    keyLength = z - q - 1;
    return;
  }
  const k = arenaPos;
  arenaPos = decodeTo(q + 1, z, k, false);
  keyStart = k;
  keyLength = arenaPos - k;
}

// topObject reads the top-level object at p (which is '{').
function topObject(p: usize, e: usize): usize {
  p = ws(p + 1, e);
  if (p < e && load<u8>(p) == 0x7D) return p + 1;
  while (true) {
    const q = ws(p, e);
    p = key(q, e);
    if (p == 0) return 0;
    keyBytes(q, p - 1);
    p = colon(ws(p, e), e);
    if (p == 0) return 0;
    const k = keyStart;
    const n = keyLength;
    const which = topKey(k, n);
    if (which == 0) {
      if (!addKey(topKeys, k, <u32>n)) return failDuplicate(k, n, false);
      p = skip(p, e, 2);
    } else {
      if ((seen & which) != 0) return failDuplicate(k, n, false);
      seen |= which;
      p = topMember(p, e, which);
    }
    if (p == 0) return 0;
    p = ws(p, e);
    const c = next(p, e);
    if (c == NEXT_END) return p + 1;
    if (c == NEXT_FAIL) return 0;
    p++;
  }
  return 0; // unreachable
}

// customer reads the customer object at p (which is '{', level 2).
function customer(p: usize, e: usize): usize {
  p = ws(p + 1, e);
  if (p < e && load<u8>(p) == 0x7D) return p + 1;
  while (true) {
    const q = ws(p, e);
    p = key(q, e);
    if (p == 0) return 0;
    keyBytes(q, p - 1);
    p = colon(ws(p, e), e);
    if (p == 0) return 0;
    const k = keyStart;
    const n = keyLength;
    if (n == 2 && load<u16>(k) == 0x6469) { // id
      if (custID) return failDuplicate(k, n, true);
      custID = true;
      p = ws(p, e);
      const s = p + 1;
      p = keptString(p, e, FIELD_CUSTOMER_ID);
      if (p == 0) return 0;
      custStart = s;
      custEnd = p - 1;
      custEsc = lastEsc == s - 1;
    } else {
      if (!addKey(custKeys, k, <u32>n)) return failDuplicate(k, n, true);
      p = skip(p, e, 3);
      if (p == 0) return 0;
    }
    p = ws(p, e);
    const c = next(p, e);
    if (c == NEXT_END) return p + 1;
    if (c == NEXT_FAIL) return 0;
    p++;
  }
  return 0; // unreachable
}

// failDuplicate reports the key [k, k+n) as a duplicate (out of line: it
// builds the message).
function failDuplicate(k: usize, n: usize, inCustomer: bool): usize {
  keyPtr = k;
  keyLen = <u32>n;
  return failPlain("duplicate key " + quoteKey() + (inCustomer ? " in customer" : ""));
}

function quoteKey(): string {
  return '"' + String.UTF8.decodeUnsafe(keyPtr, <usize>keyLen) + '"';
}

// The kept string fields, for keptString's error.
const FIELD_ORDER_ID: i32 = 0;
const FIELD_CURRENCY: i32 = 1;
const FIELD_CUSTOMER_ID: i32 = 2;

function failNotString(field: i32): usize {
  if (field == FIELD_ORDER_ID) return failPlain("order_id is not a string");
  if (field == FIELD_CURRENCY) return failPlain("currency is not a string");
  return failPlain("customer.id is not a string");
}

// keptString reads a value at p (after whitespace) that must be a string.
// Inline, like topMember: in topObject and customer, no call per kept
// string (inline without topMember it counted worse).
// @ts-ignore: decorator
@inline
function keptString(p: usize, e: usize, field: i32): usize {
  if (p >= e || load<u8>(p) != 0x22) {
    if (value(p, e, 2) == 0) return 0;
    return failNotString(field);
  }
  return str(p, e);
}

// topMember reads the value at p of the known top-level member which
// (inline in topObject, its one caller).
// @ts-ignore: decorator
@inline
function topMember(p: usize, e: usize, which: u32): usize {
  p = ws(p, e);
  const s = p + 1;
  if (which == SEEN_ORDER) {
    p = keptString(p, e, FIELD_ORDER_ID);
    if (p == 0) return 0;
    orderStart = s;
    orderEnd = p - 1;
    orderEsc = lastEsc == s - 1;
    return p;
  }
  if (which == SEEN_CURRENCY) {
    p = keptString(p, e, FIELD_CURRENCY);
    if (p == 0) return 0;
    curStart = s;
    curEnd = p - 1;
    curEsc = lastEsc == s - 1;
    return p;
  }
  if (which == SEEN_AMOUNT) return integer(p, e);
  // SEEN_CUSTOMER
  if (p >= e || load<u8>(p) != 0x7B) return fail(p, "customer is not an object");
  custKeys.reset();
  custID = false;
  p = customer(p, e);
  if (p == 0) return 0;
  if (!custID) return failPlain("missing customer.id");
  return p;
}

// integer reads amount_cents at p (after whitespace): an integer literal
// that fits int64. Its common form, a literal of at most 19 digits (which
// cannot overflow u64) not followed by '.', 'e' or 'E', is read and
// accumulated in one pass (up to 15 digits with 16 bytes left in the value:
// counted, not accumulated); anything else goes to integerSlow, which reads
// it as a number first, like the reference. Inline in topObject, its one
// caller: no call per record.
// @ts-ignore: decorator
@inline
function integer(p: usize, e: usize): usize {
  let q = p;
  const neg = q < e && load<u8>(q) == 0x2D;
  if (neg) q++;
  if (q < e && isDigit(load<u8>(q))) {
    const first = q;
    let u: u64 = 0;
    if (load<u8>(q) == 0x30) {
      q++; // a leading 0 ends the literal: number() reads no more either
    } else {
      // With 16 bytes before the value's end, the digits are counted in
      // one step (wazero: SSE), not one loop iteration (fuel check) each:
      // at most 15 digits fit int64 with either sign, and the first is not
      // 0, so the value is not 0.
      if (q + 16 <= e) {
        const v = v128.load(q);
        const m = <u32>i8x16.bitmask(i8x16.lt_u(i8x16.sub(v, i8x16.splat(0x30)), i8x16.splat(10)));
        const d = ctz(~m);
        if (d < 16) {
          const z = q + <usize>d;
          const c = <u32>load<u8>(z);
          if (c == 0x2E || (c | 0x20) == 0x65) return integerSlow(p, e);
          amountZero = false;
          amountStart = p;
          amountEnd = z;
          return z;
        }
      }
      while (q < e) {
        const c = <u32>load<u8>(q);
        if (!isDigit(c)) break;
        u = u * 10 + <u64>(c - 0x30);
        q++;
      }
    }
    if (q - first <= 19 && (q >= e || (load<u8>(q) != 0x2E && (load<u8>(q) | 0x20) != 0x65))) {
      if (neg && u <= <u64>0x8000000000000000) {
        amountZero = u == 0;
      } else if (!neg && u < <u64>0x8000000000000000) {
        amountZero = u == 0;
      } else {
        return failPlain("amount_cents does not fit int64");
      }
      amountStart = p;
      amountEnd = q;
      return q;
    }
  }
  return integerSlow(p, e);
}

// integerSlow is integer for any value: not a number, not an integer, too
// long to fit.
function integerSlow(p: usize, e: usize): usize {
  const start = p;
  if (p >= e || (load<u8>(p) != 0x2D && !isDigit(load<u8>(p)))) {
    if (value(p, e, 2) == 0) return 0;
    return failPlain("amount_cents is not a number");
  }
  const end = number(p, e);
  if (end == 0) return 0;
  if (!numIsInt) return failPlain("amount_cents is not an integer");
  p = start;
  const neg = load<u8>(p) == 0x2D;
  if (neg) p++;
  let u: u64 = 0;
  while (p < end) {
    const d = <u64>(load<u8>(p) - 0x30);
    if (u > (<u64>0xFFFFFFFFFFFFFFFF - d) / 10) return failPlain("amount_cents does not fit int64");
    u = u * 10 + d;
    p++;
  }
  if (neg && u <= <u64>0x8000000000000000) {
    amountZero = u == 0;
  } else if (!neg && u < <u64>0x8000000000000000) {
    amountZero = u == 0;
  } else {
    return failPlain("amount_cents does not fit int64");
  }
  amountStart = start;
  amountEnd = end;
  return end;
}

/**
 * Parses the value [ptr, ptr+len) and, on success, leaves the wanted fields
 * in the parser state; on failure returns false with the reason in errMsg.
 */
// Inline in the plugin's one caller, like writeValue: a call fewer each.
// @ts-ignore: decorator
@inline
export function parse(ptr: usize, len: i32): bool {
  if (len < 0) {
    failPlain("null value");
    return false;
  }
  base = ptr;
  const e = ptr + <usize>len;
  seen = 0;
  lastEsc = 0;
  arenaReset(<usize>len);
  topKeys.reset();
  let p = ws(ptr, e);
  if (p >= e) {
    fail(p, "empty value");
    return false;
  }
  if (load<u8>(p) != 0x7B) {
    fail(p, "value is not a JSON object");
    return false;
  }
  p = topObject(p, e);
  if (p == 0) return false;
  p = ws(p, e);
  if (p != e) {
    fail(p, "data after the JSON object");
    return false;
  }
  if ((seen & SEEN_ORDER) == 0) return failPlain("missing order_id") != 0;
  if ((seen & SEEN_CUSTOMER) == 0) return failPlain("missing customer") != 0;
  if ((seen & SEEN_AMOUNT) == 0) return failPlain("missing amount_cents") != 0;
  if ((seen & SEEN_CURRENCY) == 0) return failPlain("missing currency") != 0;
  return true;
}

/** The reason of the last failed parse. */
export function parseError(): string {
  return errMsg;
}

// ---------------------------------------------------------------------------
// Output.

// putConst writes the 16 bytes (two little-endian words) of one constant
// part of the v1 value at d, of which the first n are the part and the rest
// padding that what follows overwrites; returns d + n. Immediates, so no
// load from a constant in memory.
// @ts-ignore: decorator
@inline
function putConst(d: usize, lo: u64, hi: u64, n: usize): usize {
  store<u64>(d, lo);
  store<u64>(d, hi, 8);
  return d + n;
}

// putString writes the kept string [s, e) at d as a minimally escaped JSON
// string and returns the new end. Without escapes the source bytes are
// already minimal (valid JSON strings hold no raw '"', '\' or control
// characters) and are copied with the SDK's putBytes (wide loads and stores,
// no memory.copy); with escapes the output never exceeds the source either
// (every escape decodes to at most its own length, raw bytes copy one for
// one).
// @ts-ignore: decorator
@inline
function putString(d: usize, s: usize, e: usize, esc: bool): usize {
  store<u8>(d, 0x22);
  const w = esc ? decodeTo(s, e, d + 1, true) : putBytes(d + 1, s, e - s);
  store<u8>(w, 0x22);
  return w + 1;
}

/**
 * The most bytes writeValue can write for the last successful parse: the
 * three strings (never longer decoded) and their quotes, the constants with
 * their 16-byte stores, the amount's at most 20 bytes and '}'.
 */
export function valueMax(): usize {
  return (orderEnd - orderStart) + (custEnd - custStart) + (curEnd - curStart) + 6 + 4 * 16 + 20 + 1;
}

/**
 * Writes the v1 value of the last successful parse at d (valueMax bytes
 * there are writable) with raw stores; returns the end of the value.
 */
// @ts-ignore: decorator
@inline
export function writeValue(d: usize): usize {
  let w = putConst(d, 0x5F726564726F227B, 0x202020203A226469, 12); // {"order_id":
  w = putString(w, orderStart, orderEnd, orderEsc);
  w = putConst(w, 0x6D6F74737563222C, 0x203A2264695F7265, 15); // ,"customer_id":
  w = putString(w, custStart, custEnd, custEsc);
  w = putConst(w, 0x746E756F6D61222C, 0x3A2273746E65635F, 16); // ,"amount_cents":
  // The input's digits are the output's (no division per digit), but for
  // -0, which is 0.
  if (amountZero) {
    store<u8>(w, 0x30);
    w++;
  } else {
    w = putBytes(w, amountStart, amountEnd - amountStart);
  }
  w = putConst(w, 0x6E6572727563222C, 0x202020203A227963, 12); // ,"currency":
  w = putString(w, curStart, curEnd, curEsc);
  store<u8>(w, 0x7D);
  return w + 1;
}
