// @streamd/sdk: write streamd WebAssembly plugins (host ABI v1, docs/abi.md)
// in AssemblyScript.
//
// A plugin's entry file registers one function at top level and re-exports
// the ABI functions:
//
//   import { transform, Record, Output } from "@streamd/sdk";
//   export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init,
//            streamd_process } from "@streamd/sdk";
//
//   function upper(rec: Record, out: Output): void { out.keep(); }
//   transform("upper", "1.0.0", upper);
//
// The SDK owns the input buffer and a reusable output buffer, decodes request
// batches, calls the plugin function once per record and encodes the result
// batch. Record data is read straight from the input buffer; output is
// written straight into the output buffer, so a plugin that uses the raw
// accessors allocates nothing per record.
//
// Build with `--exportStart _initialize` (the top-level registration then
// runs when the host calls _initialize) and
// `--use abort=~lib/@streamd/sdk/assembly/index/streamdAbort` (a failed
// assertion logs its message through the host and traps); README.md has the
// full asc command line.

// ---------------------------------------------------------------------------
// Host imports (module "streamd"). Nothing else may be imported.

@external("streamd", "reply")
declare function hostReply(ptr: usize, len: u32): void;

@external("streamd", "log")
declare function hostLog(level: i32, ptr: usize, len: u32): void;

// ---------------------------------------------------------------------------
// Constants of ABI v1.

/** Request ops (docs/abi.md section 7). */
export const OP_TRANSFORM: u32 = 1;
/** Codec op: the record value is a payload to encode. */
export const OP_ENCODE: u32 = 2;
/** Codec op: the record value is a payload to decode. */
export const OP_DECODE: u32 = 3;
/** Sink op: write the records durably. */
export const OP_WRITE: u32 = 4;

/** Call statuses (docs/abi.md section 4). */
export const STATUS_OK: i32 = 0;
/** The whole call failed; the reply is a message. */
export const STATUS_ERR_BATCH: i32 = 2;
/** The request's op is not served by this plugin. */
export const STATUS_ERR_UNSUPPORTED: i32 = 3;
/** streamd_init rejected the config. */
export const STATUS_ERR_CONFIG: i32 = 4;
/** Anything else. */
export const STATUS_ERR_INTERNAL: i32 = 5;

/** Log levels of the host's log import. */
export const LOG_DEBUG: i32 = 0;
/** Info log level. */
export const LOG_INFO: i32 = 1;
/** Warning log level. */
export const LOG_WARN: i32 = 2;
/** Error log level. */
export const LOG_ERROR: i32 = 3;

const KIND_NONE: i32 = 0;
const KIND_TRANSFORM: i32 = 1;
const KIND_CODEC: i32 = 2;
const KIND_SINK: i32 = 3;

const KEEP_MARK: u32 = 0xFFFFFFFF;

// ---------------------------------------------------------------------------
// Logging and abort.

/** Logs a message through the host at level (LOG_DEBUG..LOG_ERROR). */
export function log(level: i32, msg: string): void {
  const buf = String.UTF8.encode(msg);
  hostLog(level, changetype<usize>(buf), <u32>buf.byteLength);
}

/** Logs len UTF-8 bytes at ptr through the host. */
export function logBytes(level: i32, ptr: usize, len: u32): void {
  hostLog(level, ptr, len);
}

// A static scratch area for abort messages: abort must not allocate, since it
// may be reached from a failing allocator.
const ABORT_CAP: usize = 512;
const abortBuf: usize = memory.data(512);
let abortLen: usize = 0;

function abortPutByte(b: u32): void {
  if (abortLen < ABORT_CAP) {
    store<u8>(abortBuf + abortLen, <u8>b);
    abortLen++;
  }
}

function abortPutString(s: string | null): void {
  if (s === null) return;
  const p = changetype<usize>(s);
  const n = s.length;
  for (let i = 0; i < n; i++) {
    let c = <u32>load<u16>(p + (<usize>i << 1));
    if (c >= 0xD800 && c < 0xDC00 && i + 1 < n) {
      const d = <u32>load<u16>(p + (<usize>(i + 1) << 1));
      if (d >= 0xDC00 && d < 0xE000) {
        c = 0x10000 + ((c - 0xD800) << 10) + (d - 0xDC00);
        i++;
      }
    }
    if (c >= 0xD800 && c < 0xE000) c = 0xFFFD;
    if (c < 0x80) {
      abortPutByte(c);
    } else if (c < 0x800) {
      abortPutByte(0xC0 | (c >> 6));
      abortPutByte(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      abortPutByte(0xE0 | (c >> 12));
      abortPutByte(0x80 | ((c >> 6) & 0x3F));
      abortPutByte(0x80 | (c & 0x3F));
    } else {
      abortPutByte(0xF0 | (c >> 18));
      abortPutByte(0x80 | ((c >> 12) & 0x3F));
      abortPutByte(0x80 | ((c >> 6) & 0x3F));
      abortPutByte(0x80 | (c & 0x3F));
    }
  }
}

function abortPutUint(v: u32): void {
  if (v >= 10) abortPutUint(v / 10);
  abortPutByte(0x30 + v % 10);
}

/**
 * The abort handler: logs "abort: MSG at FILE:LINE:COL" at error level and
 * traps. Select it with
 * `--use abort=~lib/@streamd/sdk/assembly/index/streamdAbort`.
 */
export function streamdAbort(msg: string | null, file: string | null, line: u32, column: u32): void {
  abortLen = 0;
  abortPutString("abort: ");
  abortPutString(msg);
  if (file !== null) {
    abortPutString(" at ");
    abortPutString(file);
    abortPutByte(0x3A);
    abortPutUint(line);
    abortPutByte(0x3A);
    abortPutUint(column);
  }
  hostLog(LOG_ERROR, abortBuf, <u32>abortLen);
  unreachable();
}

// ---------------------------------------------------------------------------
// Registration.

/** A plugin function: called once per input record. See Output. */
export type RecordFn = (rec: Record, out: Output) => void;

/**
 * An init function: receives the plugin's config as UTF-8 JSON bytes and
 * returns null to accept it or a reason to refuse it.
 */
export type InitFn = (config: Uint8Array) => string | null;

function noRecordFn(rec: Record, out: Output): void {
  out.reject("streamd sdk: no function registered for this op");
}


function validName(name: string): bool {
  const n = name.length;
  if (n < 1 || n > 64) return false;
  for (let i = 0; i < n; i++) {
    const c = name.charCodeAt(i);
    if (!((c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2E || c == 0x5F || c == 0x2D)) return false;
  }
  return true;
}

function register(k: i32, kindName: string, name: string, version: string): void {
  assert(kind == KIND_NONE, "streamd sdk: a plugin registers exactly one function set");
  assert(validName(name), "streamd sdk: plugin name must match [a-z0-9._-]{1,64}");
  kind = k;
  // Build the manifest once with the same string encoder as record output.
  const w = new ByteWriter(64);
  w.ascii('{"name":');
  w.jsonString(name);
  w.ascii(',"kind":"');
  w.ascii(kindName);
  w.ascii('","version":');
  w.jsonString(version);
  w.ascii(',"abi":1}');
  manifest = w.toArrayBuffer();
}

/** Registers a transform: fn is called for every record of a TRANSFORM batch. */
export function transform(name: string, version: string, fn: RecordFn): void {
  register(KIND_TRANSFORM, "transform", name, version);
  fnA = fn;
}

/**
 * Registers a codec: encode is called for ENCODE batches, decode for DECODE
 * batches. Each must answer exactly one record (Output.emitValue), keep, or
 * reject. Neither is called for a null payload (a tombstone): it stays null.
 */
export function codec(name: string, version: string, encode: RecordFn, decode: RecordFn): void {
  register(KIND_CODEC, "codec", name, version);
  fnA = encode;
  fnB = decode;
}

/**
 * Registers a sink: write is called for every record of a WRITE batch. A
 * record counts as durably written when write returns without rejecting it
 * (keep() says the same). Emitting records from a sink is an error.
 */
export function sink(name: string, version: string, write: RecordFn): void {
  register(KIND_SINK, "sink", name, version);
  fnA = write;
}

/** Registers the function that checks the plugin's config at streamd_init. */
export function onInit(fn: InitFn): void {
  initFn = fn;
}

// ---------------------------------------------------------------------------
// A small growable byte writer, used for the manifest and messages.

/** A growable byte buffer on the GC heap, for building small byte strings. */
export class ByteWriter {
  private buf: Uint8Array;
  private n: i32 = 0;

  constructor(cap: i32 = 64) {
    this.buf = new Uint8Array(cap > 0 ? cap : 64);
  }

  private grow(extra: i32): void {
    if (this.n + extra <= this.buf.length) return;
    let c = this.buf.length * 2;
    if (c < this.n + extra) c = this.n + extra;
    const nb = new Uint8Array(c);
    memory.copy(nb.dataStart, this.buf.dataStart, <usize>this.n);
    this.buf = nb;
  }

  /** Appends one byte. */
  byte(b: u8): void {
    this.grow(1);
    this.buf[this.n++] = b;
  }

  /** Appends the UTF-8 encoding of s. */
  ascii(s: string): void {
    const len = String.UTF8.byteLength(s);
    this.grow(len);
    String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, this.buf.dataStart + <usize>this.n);
    this.n += len;
  }

  /** Appends s as a JSON string with the minimal escaping of jsonEscape. */
  jsonString(s: string): void {
    const b = String.UTF8.encode(s);
    const len = b.byteLength;
    this.grow(len * 6 + 2);
    const w = jsonEscapeRaw(changetype<usize>(b), <usize>len, this.buf.dataStart + <usize>this.n, true);
    this.n += <i32>w;
  }

  /** Returns a copy of the bytes written so far. */
  toArrayBuffer(): ArrayBuffer {
    return this.buf.buffer.slice(0, this.n);
  }
}

/**
 * Writes the UTF-8 bytes [src, src+len) to dst as a JSON string with minimal
 * escaping: `"` and `\` backslash-escaped, U+0008/0C/0A/0D/09 as \b \f \n \r
 * \t, other bytes below 0x20 as \u00xx (lowercase hex), everything else raw.
 * With quotes, surrounds it with '"'. dst needs room for 6*len+2 bytes.
 * Returns the number of bytes written. The input must be valid UTF-8.
 */
export function jsonEscapeRaw(src: usize, len: usize, dst: usize, quotes: bool): usize {
  let d = dst;
  if (quotes) store<u8>(d++, 0x22);
  const end = src + len;
  for (let p = src; p < end; p++) {
    const b = <u32>load<u8>(p);
    d = jsonEscapeByte(b, d);
  }
  if (quotes) store<u8>(d++, 0x22);
  return d - dst;
}

/**
 * Writes one byte b (a whole ASCII code point or one byte of a UTF-8
 * sequence) at d with the minimal JSON escaping; returns the new end.
 */
// @ts-ignore: decorator
@inline
export function jsonEscapeByte(b: u32, d: usize): usize {
  if (b >= 0x20 && b != 0x22 && b != 0x5C) {
    store<u8>(d, <u8>b);
    return d + 1;
  }
  return jsonEscapeSlow(b, d);
}

const HEX: usize = memory.data<u8>([0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66]);

function jsonEscapeSlow(b: u32, d: usize): usize {
  store<u8>(d, 0x5C);
  let c: u32 = 0;
  switch (b) {
    case 0x22: c = 0x22; break;
    case 0x5C: c = 0x5C; break;
    case 0x08: c = 0x62; break; // b
    case 0x0C: c = 0x66; break; // f
    case 0x0A: c = 0x6E; break; // n
    case 0x0D: c = 0x72; break; // r
    case 0x09: c = 0x74; break; // t
  }
  if (c != 0) {
    store<u8>(d + 1, <u8>c);
    return d + 2;
  }
  store<u8>(d + 1, 0x75); // u
  store<u8>(d + 2, 0x30);
  store<u8>(d + 3, 0x30);
  store<u8>(d + 4, load<u8>(HEX + (b >> 4)));
  store<u8>(d + 5, load<u8>(HEX + (b & 0xF)));
  return d + 6;
}

// ---------------------------------------------------------------------------
// Input buffer (streamd_buffer).

const MIN_BUFFER: usize = 64 << 10;
// TLSF refuses blocks above 1 GiB; asking for more returns 0 instead of
// trapping inside the allocator.
const MAX_BUFFER: usize = (1 << 30) - 64;

let inPtr: usize = 0;
let inCap: usize = 0;

/**
 * ABI export: returns the address of the input buffer, at least size bytes
 * long, or 0 when that much room cannot be provided. Growth doubles the
 * buffer; a memory.grow refused by the host's memory cap traps.
 */
export function streamd_buffer(size: i32): usize {
  if (size < 0 || <usize>size > MAX_BUFFER) return 0;
  const want = <usize>size;
  if (want <= inCap && inPtr != 0) return inPtr;
  let c = inCap * 2;
  if (c < MIN_BUFFER) c = MIN_BUFFER;
  if (c < want) c = want;
  if (c > MAX_BUFFER) c = want;
  if (inPtr != 0) heap.free(inPtr);
  inPtr = 0;
  inCap = 0;
  const p = heap.alloc(c);
  inPtr = p;
  inCap = c;
  return p;
}

/** ABI export: the version marker. The host never calls it. */
export function streamd_abi_v1(): void {}

// ---------------------------------------------------------------------------
// Output buffer: a raw heap block reused for every reply.

let outPtr: usize = 0;
let outEnd: usize = 0;
let outPos: usize = 0;

function outReset(): void {
  if (outPtr == 0) {
    outPtr = heap.alloc(MIN_BUFFER);
    outEnd = outPtr + MIN_BUFFER;
  }
  outPos = outPtr;
}

function outGrow(n: usize): void {
  const used = outPos - outPtr;
  const cap = outEnd - outPtr;
  let c = cap * 2;
  if (c < used + n) c = used + n;
  const p = heap.realloc(outPtr, c);
  outPtr = p;
  outPos = p + used;
  outEnd = p + c;
}

// @ts-ignore: decorator
@inline
function outEnsure(n: usize): void {
  if (outPos + n > outEnd) outGrow(n);
}

// @ts-ignore: decorator
@inline
function outU32(v: u32): void {
  outEnsure(4);
  store<u32>(outPos, v);
  outPos += 4;
}

function outBytes(ptr: usize, len: usize): void {
  outEnsure(len);
  outPos = putBytes(outPos, ptr, len);
}

function outOffset(): u32 {
  return <u32>(outPos - outPtr);
}

function patchU32(off: u32, v: u32): void {
  store<u32>(outPtr + <usize>off, v);
}

function replyBytes(ptr: usize, len: usize): void {
  hostReply(ptr, <u32>len);
}

function replyString(msg: string): void {
  const b = String.UTF8.encode(msg);
  hostReply(changetype<usize>(b), <u32>b.byteLength);
}

// ---------------------------------------------------------------------------
// Input records.

/**
 * One input record, read in place from the request batch. The SDK reuses a
 * single Record for every call; its fields and the raw pointers are valid only
 * while the plugin function runs. Lengths of -1 mean null.
 */
// @ts-ignore: decorator
@unmanaged
export class Record {
  /** Where the record was read, or -1. */
  offset: i64 = -1;
  /** Milliseconds since the Unix epoch. */
  timestampMs: i64 = 0;
  /** Where the record was read, or -1. */
  partition: i32 = -1;
  /** Address of the key bytes in the input buffer. */
  keyPtr: usize = 0;
  /** Key length in bytes, -1 for a null key. */
  keyLen: i32 = -1;
  /** Address of the value bytes in the input buffer. */
  valuePtr: usize = 0;
  /** Value length in bytes, -1 for a null value. */
  valueLen: i32 = -1;
  /** Number of headers. */
  headerCount: i32 = 0;
  /** Address of the record's encoded body (docs/abi.md section 7). */
  bodyPtr: usize = 0;
  /** Length of the record's encoded body. */
  bodyLen: u32 = 0;
  /** Index of this record in its batch. */
  index: i32 = 0;
  /**
   * Address of the record's headers as they are encoded in the request
   * (docs/abi.md section 7: name_len, name, value_len, value per header),
   * the same encoding as in an output record: copying headersLen bytes from
   * here emits all headerCount headers unchanged (see reserveRecord).
   */
  headersPtr: usize = 0;
  /** Length of the encoded headers at headersPtr. */
  headersLen: u32 = 0;

  /** The key, copied, or null. */
  key(): Uint8Array | null {
    return copyBytes(this.keyPtr, this.keyLen);
  }

  /** The key decoded as UTF-8, or null. */
  keyString(): string | null {
    if (this.keyLen < 0) return null;
    return String.UTF8.decodeUnsafe(this.keyPtr, <usize>this.keyLen);
  }

  /** The value, copied, or null. */
  value(): Uint8Array | null {
    return copyBytes(this.valuePtr, this.valueLen);
  }

  /** The value decoded as UTF-8, or null. */
  valueString(): string | null {
    if (this.valueLen < 0) return null;
    return String.UTF8.decodeUnsafe(this.valuePtr, <usize>this.valueLen);
  }

  /** Address of header i's name bytes. */
  // @ts-ignore: decorator
  @inline
  headerNamePtr(i: i32): usize {
    return load<u32>(headerIndex(i));
  }

  /** Length of header i's name. */
  // @ts-ignore: decorator
  @inline
  headerNameLen(i: i32): i32 {
    return load<i32>(headerIndex(i), 4);
  }

  /** Address of header i's value bytes. */
  // @ts-ignore: decorator
  @inline
  headerValuePtr(i: i32): usize {
    return load<u32>(headerIndex(i), 8);
  }

  /** Length of header i's value, -1 for null. */
  // @ts-ignore: decorator
  @inline
  headerValueLen(i: i32): i32 {
    return load<i32>(headerIndex(i), 12);
  }

  /** Header i's name. */
  headerName(i: i32): string {
    const h = headerIndex(i);
    return String.UTF8.decodeUnsafe(load<u32>(h), <usize>load<i32>(h, 4));
  }

  /** Header i's value, copied, or null. */
  headerValue(i: i32): Uint8Array | null {
    const h = headerIndex(i);
    return copyBytes(load<u32>(h, 8), load<i32>(h, 12));
  }

  /** Whether header i's name equals name. */
  headerIs(i: i32, name: string): bool {
    const h = headerIndex(i);
    return bytesEqualString(load<u32>(h), load<i32>(h, 4), name);
  }

  /** The value of the last header called name, or null (also when absent). */
  header(name: string): Uint8Array | null {
    for (let i = this.headerCount - 1; i >= 0; i--) {
      if (this.headerIs(i, name)) return this.headerValue(i);
    }
    return null;
  }
}

function copyBytes(ptr: usize, len: i32): Uint8Array | null {
  if (len < 0) return null;
  const a = new Uint8Array(len);
  memory.copy(a.dataStart, ptr, <usize>len);
  return a;
}

function bytesEqualString(ptr: usize, len: i32, s: string): bool {
  // Compare as UTF-8 without allocating for the common ASCII case.
  const n = s.length;
  let ascii = true;
  for (let i = 0; i < n; i++) {
    if (s.charCodeAt(i) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) {
    if (len != n) return false;
    for (let i = 0; i < n; i++) {
      if (<i32>load<u8>(ptr + <usize>i) != s.charCodeAt(i)) return false;
    }
    return true;
  }
  const b = String.UTF8.encode(s);
  if (b.byteLength != len) return false;
  return memory.compare(ptr, changetype<usize>(b), <usize>len) == 0;
}

// Header index: 16 bytes per header (name ptr, name len, value ptr, value len),
// a raw heap block grown as needed.
let hdrPtr: usize = 0;
let hdrCap: i32 = 0;

// @ts-ignore: decorator
@inline
function headerIndex(i: i32): usize {
  assert(i >= 0 && i < theRecord.headerCount, "streamd sdk: header index out of range");
  return hdrPtr + (<usize>i << 4);
}

function hdrEnsure(n: i32): void {
  if (n <= hdrCap) return;
  let c = hdrCap * 2;
  if (c < 16) c = 16;
  if (c < n) c = n;
  hdrPtr = hdrPtr == 0 ? heap.alloc(<usize>c << 4) : heap.realloc(hdrPtr, <usize>c << 4);
  hdrCap = c;
}

const theRecord = new Record();

// ---------------------------------------------------------------------------
// Output.

const OUTCOME_RECORDS: i32 = 0;
const OUTCOME_KEEP: i32 = 1;
const OUTCOME_REJECT: i32 = 2;

// Record-building phases.
const PH_NONE: i32 = 0; // no record open
const PH_KEY: i32 = 1; // begun; key next
const PH_VALUE: i32 = 2; // key written; value next
const PH_VALUE_OPEN: i32 = 3; // value being streamed
const PH_HEADERS: i32 = 4; // value written; headers, then end
const PH_RAW: i32 = 5; // reserveRecord; commitRecord next

/**
 * The answer for one input record. A plugin function either emits records
 * (zero or more; none drops the input record), calls keep() to pass the input
 * record on unchanged, or calls reject() with a reason. The last of keep,
 * reject and drop wins over anything emitted before it.
 *
 * Records are built in wire order: begin(timestamp), key, value, headers,
 * end(). A skipped key or value is null. The value can be streamed:
 * beginValue(), then write/reserve+commit, then endValue().
 */
// @ts-ignore: decorator
@unmanaged
export class Output {
  private entryOff: u32 = 0; // offset of this entry's status word
  private count: u32 = 0; // records emitted for this entry
  private outcome: i32 = OUTCOME_RECORDS;
  private phase: i32 = PH_NONE;
  private recOff: u32 = 0; // offset of the open record's size word
  private lenOff: u32 = 0; // offset of the open value's length word
  private hdrCountOff: u32 = 0; // offset of the open record's header count
  private hdrCount: u32 = 0;
  private rawMax: usize = 0; // reserveRecord's max
  /** Set by fail(): the whole batch fails with this message. */
  get failMsg(): string | null {
    return batchFailMsg;
  }
  set failMsg(msg: string | null) {
    batchFailMsg = msg;
  }

  /** @internal Starts the entry for one input record. */
  startEntry(): void {
    this.entryOff = outOffset();
    this.count = 0;
    this.outcome = OUTCOME_RECORDS;
    this.phase = PH_NONE;
    // status OK and out_count (patched in finishEntry), as one word.
    outEnsure(8);
    store<u64>(outPos, 0);
    outPos += 8;
  }

  /** @internal Finishes the entry; returns the number of records emitted. */
  finishEntry(): u32 {
    assert(this.phase == PH_NONE, "streamd sdk: record begun but not ended");
    if (this.outcome == OUTCOME_RECORDS) patchU32(this.entryOff + 4, this.count);
    return this.count;
  }

  /** @internal Whether the entry is a rejection. */
  get rejected(): bool {
    return this.outcome == OUTCOME_REJECT;
  }

  /** @internal Whether the entry is KEEP. */
  get kept(): bool {
    return this.outcome == OUTCOME_KEEP;
  }

  private rewind(): void {
    outPos = outPtr + <usize>this.entryOff;
    this.count = 0;
    this.phase = PH_NONE;
  }

  /** Answers KEEP: the input record goes on unchanged. */
  keep(): void {
    this.rewind();
    // status OK and the KEEP mark, as one word.
    outEnsure(8);
    store<u64>(outPos, <u64>KEEP_MARK << 32);
    outPos += 8;
    this.outcome = OUTCOME_KEEP;
  }

  /** Drops the input record: answers zero records. */
  drop(): void {
    this.rewind();
    outU32(0);
    outU32(0);
    this.outcome = OUTCOME_RECORDS;
  }

  /** Rejects the input record (ERR_RECORD) with a reason. */
  reject(reason: string): void {
    this.rewind();
    outU32(1);
    const lenOff = outOffset();
    outU32(0);
    const n = String.UTF8.byteLength(reason);
    outEnsure(<usize>n);
    String.UTF8.encodeUnsafe(changetype<usize>(reason), reason.length, outPos);
    outPos += <usize>n;
    patchU32(lenOff, <u32>n);
    this.outcome = OUTCOME_REJECT;
  }

  /** Rejects the input record with len UTF-8 bytes at ptr as the reason. */
  rejectBytes(ptr: usize, len: usize): void {
    this.rewind();
    outU32(1);
    outU32(<u32>len);
    outBytes(ptr, len);
    this.outcome = OUTCOME_REJECT;
  }

  /**
   * Fails the whole batch (ERR_BATCH) with a message: the host retries the
   * batch one record at a time. For sinks whose destination is unavailable.
   */
  fail(msg: string): void {
    batchFailMsg = msg;
  }

  /** Begins an output record with the given timestamp. */
  begin(timestampMs: i64): void {
    assert(this.phase == PH_NONE, "streamd sdk: Output.begin while a record is open");
    if (this.outcome != OUTCOME_RECORDS) {
      // Emitting after keep/reject starts the answer over.
      this.drop();
    }
    this.recOff = outOffset();
    outEnsure(4 + 8 + 8 + 4);
    store<u32>(outPos, 0); // size, patched in end()
    store<i64>(outPos, -1, 4); // offset
    store<i64>(outPos, timestampMs, 12);
    store<i32>(outPos, -1, 20); // partition
    outPos += 24;
    this.phase = PH_KEY;
  }

  /** Writes the key as len bytes at ptr; len -1 writes a null key. */
  keyRaw(ptr: usize, len: i32): void {
    assert(this.phase == PH_KEY, "streamd sdk: Output.key must follow begin");
    writeLenBytes(ptr, len);
    this.phase = PH_VALUE;
  }

  /** Writes the key (null for a null key). */
  key(k: Uint8Array | null): void {
    if (k === null) this.keyRaw(0, -1);
    else this.keyRaw(k.dataStart, k.length);
  }

  /** Writes the key as the UTF-8 encoding of s (null for a null key). */
  keyString(s: string | null): void {
    assert(this.phase == PH_KEY, "streamd sdk: Output.key must follow begin");
    writeLenString(s);
    this.phase = PH_VALUE;
  }

  private needValue(): void {
    if (this.phase == PH_KEY) this.keyRaw(0, -1);
    assert(this.phase == PH_VALUE, "streamd sdk: Output.value must follow key");
  }

  /** Writes the value as len bytes at ptr; len -1 writes a null value. */
  valueRaw(ptr: usize, len: i32): void {
    this.needValue();
    writeLenBytes(ptr, len);
    this.startHeaders();
  }

  /** Writes the value (null for a null value). */
  value(v: Uint8Array | null): void {
    if (v === null) this.valueRaw(0, -1);
    else this.valueRaw(v.dataStart, v.length);
  }

  /** Writes the value as the UTF-8 encoding of s (null for a null value). */
  valueString(s: string | null): void {
    this.needValue();
    writeLenString(s);
    this.startHeaders();
  }

  /** Starts streaming the value: write, reserve/commit, then endValue. */
  beginValue(): void {
    this.needValue();
    this.lenOff = outOffset();
    outU32(0);
    this.phase = PH_VALUE_OPEN;
  }

  /** Appends one byte to the streamed value. */
  writeByte(b: u8): void {
    outEnsure(1);
    store<u8>(outPos, b);
    outPos++;
  }

  /** Appends len bytes at ptr to the streamed value. */
  write(ptr: usize, len: usize): void {
    outBytes(ptr, len);
  }

  /** Appends the bytes of buf to the streamed value. */
  writeBuffer(buf: ArrayBuffer): void {
    outBytes(changetype<usize>(buf), <usize>buf.byteLength);
  }

  /** Appends the UTF-8 encoding of s to the streamed value. */
  writeString(s: string): void {
    const n = String.UTF8.byteLength(s);
    outEnsure(<usize>n);
    String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, outPos);
    outPos += <usize>n;
  }

  /** Appends v in decimal to the streamed value. */
  writeI64(v: i64): void {
    outEnsure(20);
    outPos += writeDecimal(v, outPos);
  }

  /**
   * Returns the address of n writable bytes at the end of the streamed value.
   * Write at most n bytes there, then call commit with the count written.
   * The address is valid until the next Output call.
   */
  reserve(n: usize): usize {
    outEnsure(n);
    return outPos;
  }

  /** Adds n bytes written at the address reserve returned. */
  commit(n: usize): void {
    assert(outPos + n <= outEnd, "streamd sdk: commit past reserve");
    outPos += n;
  }

  /** Ends the streamed value. */
  endValue(): void {
    assert(this.phase == PH_VALUE_OPEN, "streamd sdk: endValue without beginValue");
    patchU32(this.lenOff, <u32>(outPos - outPtr - <usize>this.lenOff - 4));
    this.startHeaders();
  }

  private startHeaders(): void {
    this.hdrCountOff = outOffset();
    outU32(0);
    this.hdrCount = 0;
    this.phase = PH_HEADERS;
  }

  private needHeaders(): void {
    if (this.phase == PH_KEY || this.phase == PH_VALUE) this.valueRaw(0, -1);
    assert(this.phase == PH_HEADERS, "streamd sdk: Output.header must follow the value");
  }

  /** Appends a header: name and value as raw bytes; valueLen -1 is null. */
  headerRaw(namePtr: usize, nameLen: i32, valuePtr: usize, valueLen: i32): void {
    this.needHeaders();
    assert(nameLen >= 0, "streamd sdk: header name must not be null");
    writeLenBytes(namePtr, nameLen);
    writeLenBytes(valuePtr, valueLen);
    this.hdrCount++;
  }

  /** Appends a header (value null for a null value). */
  header(name: string, value: Uint8Array | null): void {
    this.needHeaders();
    writeLenString(name);
    if (value === null) writeLenBytes(0, -1);
    else writeLenBytes(value.dataStart, value.length);
    this.hdrCount++;
  }

  /** Appends a header whose value is the UTF-8 encoding of value. */
  headerString(name: string, value: string | null): void {
    this.needHeaders();
    writeLenString(name);
    writeLenString(value);
    this.hdrCount++;
  }

  /** Appends input header i of rec unchanged. */
  copyHeader(rec: Record, i: i32): void {
    this.headerRaw(rec.headerNamePtr(i), rec.headerNameLen(i), rec.headerValuePtr(i), rec.headerValueLen(i));
  }

  /** Ends the output record. */
  end(): void {
    this.needHeaders();
    patchU32(this.hdrCountOff, this.hdrCount);
    patchU32(this.recOff, <u32>(outPos - outPtr - <usize>this.recOff - 4));
    this.count++;
    this.phase = PH_NONE;
  }

  /**
   * Begins an output record that the plugin writes itself with raw stores:
   * returns the address of max writable bytes for the record's body in the
   * encoding of docs/abi.md sections 7-8 (offset, timestamp, partition,
   * key_len, key, value_len, value, header_count, headers; putRecordHead,
   * putLenBytes and Record.headersPtr help). Write at most max bytes there,
   * then call commitRecord with the address after the last byte written; no
   * other Output call may come between. One reservation and no per-field
   * checks or calls: for plugins that know their record's size, like a
   * transform answering one record per input. The host checks the encoding.
   */
  reserveRecord(max: usize): usize {
    assert(this.phase == PH_NONE, "streamd sdk: Output.reserveRecord while a record is open");
    if (this.outcome != OUTCOME_RECORDS) this.drop();
    outEnsure(4 + max);
    this.rawMax = max;
    this.phase = PH_RAW;
    return outPos + 4;
  }

  /** Ends the record begun by reserveRecord; end is after its last byte. */
  commitRecord(end: usize): void {
    assert(this.phase == PH_RAW, "streamd sdk: Output.commitRecord without reserveRecord");
    const body = outPos + 4;
    assert(end >= body && end - body <= this.rawMax, "streamd sdk: commitRecord past reserveRecord's bytes");
    store<u32>(outPos, <u32>(end - body));
    outPos = end;
    this.count++;
    this.phase = PH_NONE;
  }

  /** Emits a copy of rec as an output record (offset and partition -1). */
  emitCopy(rec: Record): void {
    this.begin(rec.timestampMs);
    this.keyRaw(rec.keyPtr, rec.keyLen);
    this.valueRaw(rec.valuePtr, rec.valueLen);
    for (let i = 0; i < rec.headerCount; i++) this.copyHeader(rec, i);
    this.end();
  }

  /** Emits one record holding just a value: the answer of a codec. */
  emitValue(v: Uint8Array | null): void {
    this.begin(0);
    this.value(v);
    this.end();
  }
}

function writeLenBytes(ptr: usize, len: i32): void {
  if (len < 0) {
    outU32(0xFFFFFFFF);
    return;
  }
  outEnsure(4 + <usize>len);
  store<u32>(outPos, <u32>len);
  outPos = putBytes(outPos + 4, ptr, <usize>len);
}

function writeLenString(s: string | null): void {
  if (s === null) {
    outU32(0xFFFFFFFF);
    return;
  }
  const n = String.UTF8.byteLength(s);
  outEnsure(4 + <usize>n);
  store<u32>(outPos, <u32>n);
  String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, outPos + 4);
  outPos += 4 + <usize>n;
}

/**
 * Writes v in plain decimal at d (at most 20 bytes); returns the count.
 */
export function writeDecimal(v: i64, d: usize): usize {
  let p = d;
  let u: u64;
  if (v < 0) {
    store<u8>(p++, 0x2D);
    u = <u64>0 - <u64>v;
  } else {
    u = <u64>v;
  }
  // Digits backwards into a small scratch, then forwards.
  let tmp = memory.data(24);
  let n: usize = 0;
  do {
    store<u8>(tmp + n, <u8>(0x30 + <u32>(u % 10)));
    u /= 10;
    n++;
  } while (u != 0);
  for (let i: usize = 0; i < n; i++) store<u8>(p + i, load<u8>(tmp + n - 1 - i));
  return p + n - d;
}

// The message of Output.fail for the batch being processed: a module global,
// so the GC sees it (Record and Output are unmanaged: not traced, and never
// spilled to the shadow stack around calls, which a managed object passed to
// every plugin call would be, at each call it makes).
let batchFailMsg: string | null = null;

/**
 * Copies n bytes from src to dst (the ranges must not overlap) and returns
 * dst + n. Short copies use 16-, 8-, 4- and 2-byte loads and stores (the
 * last one overlapping, so nothing outside the two ranges is touched)
 * instead of memory.copy, which wazero runs as a call out of the guest; up
 * to 32 bytes without a loop (under the host's fuel every loop entered is a
 * fuel check); from 256 bytes on it is memory.copy. The 16-byte steps need
 * --enable simd (without it, 8-byte steps).
 */
// @ts-ignore: decorator
@inline
export function putBytes(dst: usize, src: usize, n: usize): usize {
  if (n >= 256) {
    memory.copy(dst, src, n);
  } else if (n <= 32 && n >= 16) {
    // No loop (under the host's fuel, every loop entered is a fuel check):
    // the first 16 bytes and the last 16, overlapping.
    if (ASC_FEATURE_SIMD) {
      v128.store(dst, v128.load(src));
      v128.store(dst + n - 16, v128.load(src + n - 16));
    } else {
      store<u64>(dst, load<u64>(src));
      store<u64>(dst + 8, load<u64>(src + 8));
      store<u64>(dst + n - 16, load<u64>(src + n - 16));
      store<u64>(dst + n - 8, load<u64>(src + n - 8));
    }
  } else if (n >= 16) {
    if (ASC_FEATURE_SIMD) {
      let i: usize = 0;
      while (i + 16 <= n) {
        v128.store(dst + i, v128.load(src + i));
        i += 16;
      }
      if (i < n) v128.store(dst + n - 16, v128.load(src + n - 16));
    } else {
      let i: usize = 0;
      while (i + 8 <= n) {
        store<u64>(dst + i, load<u64>(src + i));
        i += 8;
      }
      if (i < n) store<u64>(dst + n - 8, load<u64>(src + n - 8));
    }
  } else if (n >= 8) {
    store<u64>(dst, load<u64>(src));
    store<u64>(dst + n - 8, load<u64>(src + n - 8));
  } else if (n >= 4) {
    store<u32>(dst, load<u32>(src));
    store<u32>(dst + n - 4, load<u32>(src + n - 4));
  } else if (n >= 2) {
    store<u16>(dst, load<u16>(src));
    store<u16>(dst + n - 2, load<u16>(src + n - 2));
  } else if (n == 1) {
    store<u8>(dst, load<u8>(src));
  }
  return dst + n;
}

/**
 * Writes len:i32 and then len bytes from ptr at d (len -1: a null, no
 * bytes), as keys, values and header fields are encoded; returns the end.
 */
// @ts-ignore: decorator
@inline
export function putLenBytes(d: usize, ptr: usize, len: i32): usize {
  store<i32>(d, len);
  if (len <= 0) return d + 4;
  return putBytes(d + 4, ptr, <usize>len);
}

/**
 * Writes an output record's fixed fields at d (offset -1, timestampMs,
 * partition -1: 20 bytes) and returns d + 20; the key follows.
 */
// @ts-ignore: decorator
@inline
export function putRecordHead(d: usize, timestampMs: i64): usize {
  store<i64>(d, -1);
  store<i64>(d, timestampMs, 8);
  store<i32>(d, -1, 16);
  return d + 20;
}

const theOutput = new Output();

// ---------------------------------------------------------------------------
// The ABI entry points.

/** ABI export: replies with the manifest. */
export function streamd_manifest(): i32 {
  const m = manifest;
  if (m === null) {
    replyString("streamd sdk: no plugin registered: call transform(), codec() or sink() at top level of the entry file");
    return STATUS_ERR_INTERNAL;
  }
  replyBytes(changetype<usize>(m), <usize>m.byteLength);
  return STATUS_OK;
}

/** ABI export: checks the config (len bytes of JSON in the input buffer). */
export function streamd_init(len: i32): i32 {
  if (len < 0 || <usize>len > inCap) {
    replyString("streamd sdk: init: config length " + len.toString() + " exceeds the input buffer (" + inCap.toString() + " bytes)");
    return STATUS_ERR_INTERNAL;
  }
  const f = initFn;
  if (f === null) return STATUS_OK;
  const cfg = new Uint8Array(len);
  if (len > 0) memory.copy(cfg.dataStart, inPtr, <usize>len);
  const reason = f(cfg);
  if (reason !== null) {
    replyString(reason);
    return STATUS_ERR_CONFIG;
  }
  return STATUS_OK;
}

function batchError(msg: string): i32 {
  replyString("streamd sdk: bad request batch: " + msg);
  return STATUS_ERR_BATCH;
}

function opName(op: u32): string {
  switch (op) {
    case OP_TRANSFORM: return "TRANSFORM";
    case OP_ENCODE: return "ENCODE";
    case OP_DECODE: return "DECODE";
    case OP_WRITE: return "WRITE";
  }
  return "op " + op.toString();
}

/** ABI export: processes the len-byte request batch in the input buffer. */
export function streamd_process(len: i32): i32 {
  if (len < 0 || <usize>len > inCap) {
    return batchError("length " + len.toString() + " exceeds the input buffer (" + inCap.toString() + " bytes)");
  }
  const base = inPtr;
  const end = base + <usize>len;
  if (len < 8) return batchError("header needs 8 bytes, have " + len.toString());
  const op = load<u32>(base);
  const count = load<u32>(base, 4);

  let fn: RecordFn = noRecordFn;
  let k = kind;
  if (k == KIND_TRANSFORM && op == OP_TRANSFORM) fn = fnA;
  else if (k == KIND_CODEC && op == OP_ENCODE) fn = fnA;
  else if (k == KIND_CODEC && op == OP_DECODE) fn = fnB;
  else if (k == KIND_SINK && op == OP_WRITE) fn = fnA;
  else {
    replyString("streamd sdk: this plugin does not serve " + opName(op));
    return STATUS_ERR_UNSUPPORTED;
  }
  // Every record takes at least 36 bytes (size, offset, timestamp,
  // partition, key_len, value_len, header_count), which bounds count before
  // anything is written.
  if (<u64>count * 36 > <u64>(len - 8)) {
    return batchError("count " + count.toString() + " records cannot fit in " + len.toString() + " bytes");
  }

  outReset();
  outU32(count);
  const rec = theRecord;
  const out = theOutput;
  batchFailMsg = null;
  let p = base + 8;
  for (let i: u32 = 0; i < count; i++) {
    if (p + 4 > end) return sizeError(i, p, -1, len);
    const size = load<u32>(p);
    const body = p + 4;
    if (<u64>size > <u64>(end - body)) return sizeError(i, p, <i64>size, len);
    const bend = body + <usize>size;
    const err = parseBody(rec, body, bend);
    if (err >= 0) return bodyError(i, p, err);
    rec.bodyPtr = body;
    rec.bodyLen = size;
    rec.index = <i32>i;
    out.startEntry();
    if (k == KIND_CODEC && rec.valueLen < 0) {
      out.keep(); // a null payload (a tombstone) stays null: the codec is not called
    } else {
      fn(rec, out);
    }
    // A pointer test: AssemblyScript compiles `!== null` on a string to a
    // call of String.__ne (with a shadow-stack frame), per record.
    if (changetype<usize>(batchFailMsg) != 0) {
      replyString(changetype<string>(batchFailMsg));
      return STATUS_ERR_BATCH;
    }
    const n = out.finishEntry();
    if (k == KIND_CODEC && !out.rejected && !out.kept && n != 1) {
      out.reject("streamd sdk: a codec must answer exactly one record, got " + n.toString());
    } else if (k == KIND_SINK && !out.rejected && !out.kept && n != 0) {
      out.reject("streamd sdk: a sink answers written (nothing, or keep) or reject, not records");
    }
    p = bend;
  }
  if (p != end) {
    return batchError(((end - p) as i32).toString() + " trailing bytes after record " + count.toString() + " at byte " + (<i32>(p - base)).toString());
  }
  replyBytes(outPtr, outPos - outPtr);
  return STATUS_OK;
}

// sizeError reports record i's size word at p (size -1: not there) as past
// the end of the len-byte batch; bodyError reports parseBody's error err of
// record i at p. Out of line: streamd_process builds no string per record.
function sizeError(i: u32, p: usize, size: i64, len: i32): i32 {
  const at = <i32>(p - inPtr);
  if (size < 0) return batchError("record " + i.toString() + " at byte " + at.toString() + ": size past end of batch");
  return batchError("record " + i.toString() + " at byte " + at.toString() + ": size " + (<u32>size).toString() + " past end of batch (" + len.toString() + " bytes)");
}

function bodyError(i: u32, p: usize, err: i32): i32 {
  const at = <i32>(p - inPtr);
  return batchError("record " + i.toString() + " at byte " + at.toString() + ": " + bodyErrors[err] + " at byte " + (<i32>(errAt - inPtr)).toString());
}

const bodyErrors: string[] = [
  "body shorter than its fixed fields",
  "key past end of body",
  "value length past end of body",
  "value past end of body",
  "header count past end of body",
  "header name length past end of body",
  "header name past end of body",
  "header value length past end of body",
  "header value past end of body",
  "bytes left over in body after the headers",
  "negative length other than -1",
  "header count exceeds body",
];

let errAt: usize = 0;

// Parses a record body in place; returns -1 or an index into bodyErrors with
// errAt set to the failing position.
function parseBody(rec: Record, p: usize, end: usize): i32 {
  if (end - p < 24) { errAt = p; return 0; }
  rec.offset = load<i64>(p);
  rec.timestampMs = load<i64>(p, 8);
  rec.partition = load<i32>(p, 16);
  let kl = load<i32>(p, 20);
  p += 24;
  if (kl < -1) { errAt = p - 4; return 10; }
  if (kl > 0 && <usize>kl > end - p) { errAt = p; return 1; }
  rec.keyPtr = p;
  rec.keyLen = kl;
  if (kl > 0) p += <usize>kl;
  if (end - p < 4) { errAt = p; return 2; }
  let vl = load<i32>(p);
  p += 4;
  if (vl < -1) { errAt = p - 4; return 10; }
  if (vl > 0 && <usize>vl > end - p) { errAt = p; return 3; }
  rec.valuePtr = p;
  rec.valueLen = vl;
  if (vl > 0) p += <usize>vl;
  if (end - p < 4) { errAt = p; return 4; }
  const hc = load<u32>(p);
  p += 4;
  // Each header takes at least 8 bytes.
  if (<u64>hc * 8 > <u64>(end - p)) { errAt = p - 4; return 11; }
  hdrEnsure(<i32>hc);
  const hdrs = p;
  let h = hdrPtr;
  for (let j: u32 = 0; j < hc; j++) {
    if (end - p < 4) { errAt = p; return 5; }
    const nl = load<u32>(p);
    p += 4;
    if (<usize>nl > end - p) { errAt = p; return 6; }
    store<u32>(h, <u32>p);
    store<u32>(h, nl, 4);
    p += <usize>nl;
    if (end - p < 4) { errAt = p; return 7; }
    const hl = load<i32>(p);
    p += 4;
    if (hl < -1) { errAt = p - 4; return 10; }
    if (hl > 0 && <usize>hl > end - p) { errAt = p; return 8; }
    store<u32>(h, <u32>p, 8);
    store<i32>(h, hl, 12);
    if (hl > 0) p += <usize>hl;
    h += 16;
  }
  rec.headerCount = <i32>hc;
  if (p != end) { errAt = p; return 9; }
  rec.headersPtr = hdrs;
  rec.headersLen = <u32>(end - hdrs);
  return -1;
}

// ---------------------------------------------------------------------------
// Registration state. Declared last: the initializer of fnA compiles
// noRecordFn, which uses the globals above.

let kind: i32 = KIND_NONE;
let fnA: RecordFn = noRecordFn; // transform, codec encode, sink write
let fnB: RecordFn = noRecordFn; // codec decode
let initFn: InitFn | null = null;
let manifest: ArrayBuffer | null = null;
export * from "./json";
