// JSON helpers (RFC 8259) for a plugin's config and for JSON values: they
// read a document where it is, handing out a member's raw JSON text as a
// view (subarray) of the document, and decode a raw value on demand.
//
//   function init(config: Uint8Array): string | null {
//     const unknown = jsonUnknownKey(config, ["field", "limit"]);
//     if (unknown !== null) return "unknown key " + unknown;
//     const f = jsonGet(config, "field");
//     if (f !== null) {
//       const s = jsonString(f);
//       if (s === null) return "field: want a string";
//       field = s;
//     }
//     const l = jsonGet(config, "limit");
//     if (l !== null && !jsonIsInt(l)) return "limit: want an integer";
//     if (l !== null) limit = jsonInt(l);
//     return null;
//   }
//
// Writing: ByteWriter.jsonString and Output.writeString with jsonEscapeRaw
// (index.ts).

/** Nesting deeper than this is not valid. */
export const JSON_MAX_DEPTH: i32 = 64;

// A scan position, module state: AssemblyScript has no closures, and a
// plugin instance runs one call at a time.
let buf: Uint8Array = new Uint8Array(0);
let pos: i32 = 0;
let end: i32 = 0;

function ch(): i32 {
  return pos < end ? <i32>unchecked(buf[pos]) : -1;
}

function ws(): void {
  while (pos < end) {
    const c = unchecked(buf[pos]);
    if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
    pos++;
  }
}

function hex4(): i32 {
  if (end - pos < 4) return -1;
  let v = 0;
  for (let k = 0; k < 4; k++) {
    const c = <i32>unchecked(buf[pos + k]);
    let d: i32;
    if (c >= 0x30 && c <= 0x39) d = c - 0x30;
    else if (c >= 0x61 && c <= 0x66) d = c - 0x61 + 10;
    else if (c >= 0x41 && c <= 0x46) d = c - 0x41 + 10;
    else return -1;
    v = v * 16 + d;
  }
  pos += 4;
  return v;
}

// utf8 checks one UTF-8 sequence at pos and steps over it.
function utf8(): bool {
  const c = <u32>unchecked(buf[pos]);
  let n: i32, cp: u32, min: u32;
  if (c < 0x80) {
    pos++;
    return true;
  } else if ((c & 0xe0) == 0xc0) {
    n = 1; cp = c & 0x1f; min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    n = 2; cp = c & 0x0f; min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    n = 3; cp = c & 0x07; min = 0x10000;
  } else {
    return false;
  }
  if (end - pos <= n) return false;
  for (let k = 1; k <= n; k++) {
    const b = <u32>unchecked(buf[pos + k]);
    if ((b & 0xc0) != 0x80) return false;
    cp = (cp << 6) | (b & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) return false;
  pos += n + 1;
  return true;
}

// str scans a string at pos (its opening quote); with decode, it returns
// the text (else "" on success); null when it is not a valid string.
function str(decode: bool): string | null {
  pos++;
  let out = "";
  for (;;) {
    const run = pos;
    while (pos < end) {
      const c = unchecked(buf[pos]);
      if (c == 0x22 || c == 0x5c || c < 0x20) break;
      if (!utf8()) return null;
    }
    if (decode && pos > run) out += String.UTF8.decodeUnsafe(buf.dataStart + <usize>run, <usize>(pos - run));
    const c = ch();
    if (c < 0x20) return null;
    if (c == 0x22) {
      pos++;
      return out;
    }
    pos++; // backslash
    const e = ch();
    pos++;
    let one = -1;
    if (e == 0x22) one = 0x22;
    else if (e == 0x5c) one = 0x5c;
    else if (e == 0x2f) one = 0x2f;
    else if (e == 0x62) one = 8;
    else if (e == 0x66) one = 12;
    else if (e == 0x6e) one = 10;
    else if (e == 0x72) one = 13;
    else if (e == 0x74) one = 9;
    else if (e == 0x75) {
      let cp = hex4();
      if (cp < 0) return null;
      if (cp >= 0xd800 && cp < 0xdc00) {
        if (end - pos < 2 || unchecked(buf[pos]) != 0x5c || unchecked(buf[pos + 1]) != 0x75) return null;
        pos += 2;
        const lo = hex4();
        if (lo < 0xdc00 || lo >= 0xe000) return null;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      } else if (cp >= 0xdc00 && cp < 0xe000) {
        return null;
      }
      if (decode) out += String.fromCodePoint(cp);
      continue;
    } else {
      return null;
    }
    if (decode) out += String.fromCharCode(one);
  }
  return null; // not reached
}

function digits(): i32 {
  const d = pos;
  while (pos < end && unchecked(buf[pos]) >= 0x30 && unchecked(buf[pos]) <= 0x39) pos++;
  return pos - d;
}

function word(w: string): bool {
  const n = w.length;
  if (end - pos < n) return false;
  for (let k = 0; k < n; k++) {
    if (<i32>unchecked(buf[pos + k]) != w.charCodeAt(k)) return false;
  }
  pos += n;
  return true;
}

// value scans one value at pos (no leading whitespace).
function value(depth: i32): bool {
  const c = ch();
  if (c == 0x7b || c == 0x5b) {
    if (depth >= JSON_MAX_DEPTH) return false;
    const close = c == 0x7b ? 0x7d : 0x5d;
    pos++;
    ws();
    if (ch() == close) {
      pos++;
      return true;
    }
    for (;;) {
      ws();
      if (c == 0x7b) {
        if (ch() != 0x22 || str(false) === null) return false;
        ws();
        if (ch() != 0x3a) return false;
        pos++;
        ws();
      }
      if (!value(depth + 1)) return false;
      ws();
      const n = ch();
      pos++;
      if (n == 0x2c) continue;
      return n == close;
    }
  }
  if (c == 0x22) return str(false) !== null;
  if (c == 0x2d || (c >= 0x30 && c <= 0x39)) {
    if (c == 0x2d) pos++;
    const first = ch();
    const n = digits();
    if (n == 0 || (n > 1 && first == 0x30)) return false;
    if (ch() == 0x2e) {
      pos++;
      if (digits() == 0) return false;
    }
    if (ch() == 0x65 || ch() == 0x45) {
      pos++;
      if (ch() == 0x2b || ch() == 0x2d) pos++;
      if (digits() == 0) return false;
    }
    return true;
  }
  return word("true") || word("false") || word("null");
}

// trim sets the scan to doc without the whitespace around it.
function trim(doc: Uint8Array): void {
  buf = doc;
  pos = 0;
  end = doc.length;
  ws();
  while (end > pos) {
    const c = unchecked(doc[end - 1]);
    if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
    end--;
  }
}

/** Reports whether doc is one valid JSON document (whitespace around it allowed). */
export function jsonValid(doc: Uint8Array): bool {
  trim(doc);
  return value(0) && pos == end;
}

// member walks the object doc: it returns the raw value of the member named
// key (the last one when the name repeats), or, with key null, the name of
// the first member not in allowed; null when there is none. jsonError says
// when doc is not a valid object.
let lastInvalid = false;

function members(doc: Uint8Array, key: string | null, allowed: string[] | null): Uint8Array | null {
  lastInvalid = true;
  if (!jsonValid(doc)) return null;
  trim(doc);
  if (ch() != 0x7b) return null;
  lastInvalid = false;
  pos++;
  ws();
  if (ch() == 0x7d) return null;
  let found: Uint8Array | null = null;
  for (;;) {
    ws();
    const nameStart = pos;
    const name = str(true)!;
    const nameEnd = pos;
    ws();
    pos++; // ':'
    ws();
    const v = pos;
    value(1);
    const ve = pos;
    if (key !== null) {
      if (name == key) found = doc.subarray(v, ve);
    } else if (!allowed!.includes(name)) {
      return doc.subarray(nameStart, nameEnd);
    }
    ws();
    const c = ch();
    pos++;
    if (c == 0x7d) return found;
  }
  return null; // not reached
}

/**
 * The raw JSON text of the member named key of the JSON object doc (the
 * last one when the name repeats), or null when there is none or doc is not
 * a valid object (jsonIsObject tells which).
 */
export function jsonGet(doc: Uint8Array, key: string): Uint8Array | null {
  return members(doc, key, null);
}

/** Reports whether doc is a valid JSON object. */
export function jsonIsObject(doc: Uint8Array): bool {
  trim(doc);
  return ch() == 0x7b && jsonValid(doc);
}

/**
 * The first member name of the JSON object doc that is not in allowed, as
 * JSON text (with its quotes), so that a misspelt config key can be
 * refused; null when all are allowed. A doc that is not a valid object
 * gives "(not a JSON object)".
 */
export function jsonUnknownKey(doc: Uint8Array, allowed: string[]): string | null {
  const name = members(doc, null, allowed);
  if (lastInvalid) return "(not a JSON object)";
  if (name === null) return null;
  return String.UTF8.decodeUnsafe(name.dataStart, <usize>name.length);
}

/** The text of a raw JSON string value, or null when raw is not a string. */
export function jsonString(raw: Uint8Array): string | null {
  trim(raw);
  if (ch() != 0x22) return null;
  const s = str(true);
  if (s === null || pos != end) return null;
  return s;
}

/** Reports whether the raw JSON value is an integer literal that fits an i64. */
export function jsonIsInt(raw: Uint8Array): bool {
  trim(raw);
  const neg = ch() == 0x2d;
  if (neg) pos++;
  const d = pos;
  const n = digits();
  if (n == 0 || pos != end || (n > 1 && unchecked(raw[d]) == 0x30) || n > 19) return false;
  let v: u64 = 0;
  for (let k = 0; k < n; k++) v = v * 10 + <u64>(unchecked(raw[d + k]) - 0x30);
  return neg ? v <= 9223372036854775808 : v <= 9223372036854775807;
}

/** The raw JSON integer as an i64 (check jsonIsInt first; 0 otherwise). */
export function jsonInt(raw: Uint8Array): i64 {
  if (!jsonIsInt(raw)) return 0;
  trim(raw);
  const neg = ch() == 0x2d;
  if (neg) pos++;
  let v: u64 = 0;
  while (pos < end) v = v * 10 + <u64>(unchecked(raw[pos++]) - 0x30);
  return neg ? <i64>(0 - v) : <i64>v;
}

/** The raw JSON number as an f64, or NaN when raw is not a number. */
export function jsonNumber(raw: Uint8Array): f64 {
  trim(raw);
  const c = ch();
  if (!(c == 0x2d || (c >= 0x30 && c <= 0x39)) || !value(0) || pos != end) return NaN;
  return parseFloat(String.UTF8.decodeUnsafe(raw.dataStart, <usize>raw.length).trim());
}

/** Reports whether the raw JSON value is true (false for anything else). */
export function jsonIsTrue(raw: Uint8Array): bool {
  trim(raw);
  return word("true") && pos == end;
}

/** Reports whether the raw JSON value is true or false. */
export function jsonIsBool(raw: Uint8Array): bool {
  trim(raw);
  return (word("true") || word("false")) && pos == end;
}

/** Reports whether the raw JSON value is null. */
export function jsonIsNull(raw: Uint8Array): bool {
  trim(raw);
  return word("null") && pos == end;
}
