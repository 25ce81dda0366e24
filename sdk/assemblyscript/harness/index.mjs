// A minimal streamd host for Node, to test Wasm plugins without streamd:
// it checks a module's imports and exports against docs/abi.md, and encodes
// request batches and decodes result batches exactly as section 7 and 8 say.
//
//   import { load, OP } from "@streamd/sdk/harness";
//   const p = await load(fs.readFileSync("plugin.wasm"));
//   p.manifest();                 // {status, json}
//   p.init({});                   // status
//   p.process(OP.TRANSFORM, [{ key: "k", value: "v", headers: [["h", "x"]] }]);

/** Request ops (docs/abi.md section 7). */
export const OP = Object.freeze({ TRANSFORM: 1, ENCODE: 2, DECODE: 3, WRITE: 4 });

/** Call statuses (docs/abi.md section 4). */
export const STATUS = Object.freeze({ OK: 0, ERR_BATCH: 2, ERR_UNSUPPORTED: 3, ERR_CONFIG: 4, ERR_INTERNAL: 5 });

const enc = new TextEncoder();
const dec = new TextDecoder("utf-8", { fatal: false });

function toBytes(v, what) {
  if (v === null || v === undefined) return null;
  if (typeof v === "string") return enc.encode(v);
  if (v instanceof Uint8Array) return v;
  throw new TypeError(`${what}: want string, Uint8Array or null, got ${typeof v}`);
}

/**
 * Encodes a request batch. A record is
 * {offset, timestamp, partition, key, value, headers: [[name, value], ...]}
 * with i64 fields as number or bigint (default -1, -1, -1, as the host
 * sends a record without a position or timestamp) and bytes as
 * string, Uint8Array or null.
 */
export function encodeRequest(op, records) {
  const parts = [];
  let total = 8;
  for (const [i, r] of records.entries()) {
    const key = toBytes(r.key, `record ${i} key`);
    const value = toBytes(r.value, `record ${i} value`);
    const headers = (r.headers ?? []).map(([n, v], j) => [toBytes(n, `record ${i} header ${j} name`), toBytes(v, `record ${i} header ${j} value`)]);
    let size = 8 + 8 + 4 + 4 + (key?.length ?? 0) + 4 + (value?.length ?? 0) + 4;
    for (const [n, v] of headers) size += 4 + n.length + 4 + (v?.length ?? 0);
    parts.push({ r, key, value, headers, size });
    total += 4 + size;
  }
  const buf = new Uint8Array(total);
  const dv = new DataView(buf.buffer);
  dv.setUint32(0, op, true);
  dv.setUint32(4, records.length, true);
  let p = 8;
  const bytes = (b) => {
    if (b === null) {
      dv.setInt32(p, -1, true);
      p += 4;
      return;
    }
    dv.setInt32(p, b.length, true);
    buf.set(b, p + 4);
    p += 4 + b.length;
  };
  for (const { r, key, value, headers, size } of parts) {
    dv.setUint32(p, size, true);
    dv.setBigInt64(p + 4, BigInt(r.offset ?? -1), true);
    dv.setBigInt64(p + 12, BigInt(r.timestamp ?? -1), true);
    dv.setInt32(p + 20, r.partition ?? -1, true);
    p += 24;
    bytes(key);
    bytes(value);
    dv.setUint32(p, headers.length, true);
    p += 4;
    for (const [n, v] of headers) {
      dv.setUint32(p, n.length, true);
      buf.set(n, p + 4);
      p += 4 + n.length;
      bytes(v);
    }
  }
  if (p !== total) throw new Error(`encodeRequest: wrote ${p} bytes, want ${total}`);
  return buf;
}

class Reader {
  constructor(buf) {
    this.buf = buf;
    this.dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    this.p = 0;
  }
  need(n, what) {
    if (this.p + n > this.buf.length) throw new Error(`result: ${what} at byte ${this.p}: needs ${n} bytes, ${this.buf.length - this.p} left`);
  }
  u32(what) {
    this.need(4, what);
    const v = this.dv.getUint32(this.p, true);
    this.p += 4;
    return v;
  }
  i32(what) {
    this.need(4, what);
    const v = this.dv.getInt32(this.p, true);
    this.p += 4;
    return v;
  }
  i64(what) {
    this.need(8, what);
    const v = this.dv.getBigInt64(this.p, true);
    this.p += 8;
    return v;
  }
  bytes(n, what) {
    this.need(n, what);
    const b = this.buf.slice(this.p, this.p + n);
    this.p += n;
    return b;
  }
  lenBytes(what) {
    const at = this.p;
    const n = this.i32(`${what} length`);
    if (n === -1) return null;
    if (n < -1) throw new Error(`result: ${what} length ${n} at byte ${at}`);
    return this.bytes(n, what);
  }
}

/** Decodes one record body (docs/abi.md section 7) from a Reader. */
function readRecord(rd, where) {
  const at = rd.p;
  const size = rd.u32(`${where} size`);
  const start = rd.p;
  rd.need(size, `${where} body`);
  const offset = rd.i64(`${where} offset`);
  const timestamp = rd.i64(`${where} timestamp`);
  const partition = rd.i32(`${where} partition`);
  const key = rd.lenBytes(`${where} key`);
  const value = rd.lenBytes(`${where} value`);
  const hc = rd.u32(`${where} header count`);
  const headers = [];
  for (let i = 0; i < hc; i++) {
    const nl = rd.u32(`${where} header ${i} name length`);
    const name = dec.decode(rd.bytes(nl, `${where} header ${i} name`));
    headers.push([name, rd.lenBytes(`${where} header ${i} value`)]);
  }
  if (rd.p - start !== size) throw new Error(`result: ${where} at byte ${at}: size ${size} but body is ${rd.p - start} bytes`);
  return { offset, timestamp, partition, key, value, headers };
}

/**
 * Decodes a result batch (docs/abi.md section 8). Each entry is
 * {status: 0, keep: true}, {status: 0, records: [...]} or
 * {status: 1, error: string}. Throws naming the byte position when it does
 * not parse or count differs from want.
 */
export function decodeResult(buf, want) {
  const rd = new Reader(buf);
  const count = rd.u32("count");
  if (want !== undefined && count !== want) throw new Error(`result: count ${count}, want ${want}`);
  const entries = [];
  for (let i = 0; i < count; i++) {
    const at = rd.p;
    const status = rd.u32(`entry ${i} status`);
    if (status === 0) {
      const n = rd.u32(`entry ${i} out_count`);
      if (n === 0xFFFFFFFF) {
        entries.push({ status, keep: true });
        continue;
      }
      const records = [];
      for (let j = 0; j < n; j++) records.push(readRecord(rd, `entry ${i} record ${j}`));
      entries.push({ status, records });
    } else if (status === 1) {
      const n = rd.u32(`entry ${i} msg_len`);
      entries.push({ status, error: dec.decode(rd.bytes(n, `entry ${i} msg`)) });
    } else {
      throw new Error(`result: entry ${i} at byte ${at}: status ${status}, want 0 or 1`);
    }
  }
  if (rd.p !== buf.length) throw new Error(`result: ${buf.length - rd.p} trailing bytes at byte ${rd.p}`);
  return entries;
}

/**
 * Checks a compiled module against docs/abi.md sections 1-3: exactly one
 * streamd_abi_vN export (N must be 1), the required exports, and imports only
 * from streamd (reply, log) and wasi_snapshot_preview1. Returns the list of
 * imports.
 */
export function checkModule(mod) {
  const exports = WebAssembly.Module.exports(mod);
  const abi = exports.filter((e) => /^streamd_abi_v\d+$/.test(e.name));
  if (abi.length !== 1) throw new Error(`plugin.wasm: want exactly one streamd_abi_vN export, have ${abi.map((e) => e.name).join(", ") || "none"}`);
  if (abi[0].name !== "streamd_abi_v1") throw new Error(`plugin.wasm: plugin needs ABI ${abi[0].name.slice(11)}, this harness supports ABI v1 at most`);
  const want = { memory: "memory", streamd_buffer: "function", streamd_manifest: "function", streamd_init: "function", streamd_process: "function" };
  for (const [name, kind] of Object.entries(want)) {
    if (!exports.some((e) => e.name === name && e.kind === kind)) throw new Error(`plugin.wasm: missing ${kind} export ${name}`);
  }
  const imports = WebAssembly.Module.imports(mod);
  for (const im of imports) {
    const ok = (im.module === "streamd" && (im.name === "reply" || im.name === "log") && im.kind === "function") ||
      (im.module === "wasi_snapshot_preview1" && im.kind === "function");
    if (!ok) throw new Error(`plugin.wasm: import ${im.module}.${im.name} (${im.kind}) is not provided by the streamd ABI v1 host`);
  }
  return imports;
}

const ENOSYS = 52;

/**
 * Instantiates a plugin from its Wasm bytes (or a compiled module) with the
 * streamd imports and a WASI stub that has no files, clock or environment
 * (fd_write to 1/2 goes to the log; everything else returns ENOSYS).
 */
export async function load(wasm, opts = {}) {
  const mod = wasm instanceof WebAssembly.Module ? wasm : await WebAssembly.compile(wasm);
  checkModule(mod);
  return instantiate(mod, opts);
}

async function instantiate(mod, opts) {
  let inst;
  let reply = null;
  const logs = [];
  const mem = () => new Uint8Array(inst.exports.memory.buffer);
  const streamd = {
    reply(ptr, len) {
      reply = mem().slice(ptr >>> 0, (ptr >>> 0) + (len >>> 0));
    },
    log(level, ptr, len) {
      const msg = dec.decode(mem().subarray(ptr >>> 0, (ptr >>> 0) + (len >>> 0)));
      logs.push({ level, msg });
      if (opts.onLog) opts.onLog(level, msg);
    },
  };
  const wasiImpl = {
    fd_write(fd, iovs, iovsLen, nwritten) {
      if (fd !== 1 && fd !== 2) return 8; // EBADF
      const dv = new DataView(inst.exports.memory.buffer);
      let n = 0;
      let text = "";
      for (let i = 0; i < iovsLen; i++) {
        const p = dv.getUint32(iovs + i * 8, true);
        const l = dv.getUint32(iovs + i * 8 + 4, true);
        text += dec.decode(mem().subarray(p, p + l));
        n += l;
      }
      logs.push({ level: fd === 2 ? 3 : 1, msg: text });
      dv.setUint32(nwritten, n, true);
      return 0;
    },
    proc_exit(code) {
      throw new Error(`plugin called proc_exit(${code})`);
    },
  };
  const wasi = new Proxy(wasiImpl, {
    get(target, name) {
      return name in target ? target[name] : () => ENOSYS;
    },
  });
  inst = await WebAssembly.instantiate(mod, { streamd, wasi_snapshot_preview1: wasi });
  const ex = inst.exports;
  if (typeof ex._initialize === "function") ex._initialize();

  let bufAddr = 0;
  let bufSize = 0;
  const put = (bytes) => {
    if (bytes.length > bufSize || bufAddr === 0) {
      const a = ex.streamd_buffer(bytes.length) >>> 0;
      if (a === 0) throw new Error(`streamd_buffer(${bytes.length}) returned 0`);
      bufAddr = a;
      bufSize = bytes.length;
    }
    mem().set(bytes, bufAddr);
  };
  const call = (fn, ...args) => {
    reply = null;
    const status = fn(...args);
    return { status, reply: reply ?? new Uint8Array(0) };
  };
  return {
    exports: ex,
    logs,
    /** Calls streamd_manifest; returns {status, reply, json}. */
    manifest() {
      const r = call(ex.streamd_manifest);
      return { ...r, json: r.status === 0 ? JSON.parse(dec.decode(r.reply)) : null, text: dec.decode(r.reply) };
    },
    /** Calls streamd_init with config (object, string or bytes); returns {status, text}. */
    init(config = {}) {
      const b = config instanceof Uint8Array ? config : enc.encode(typeof config === "string" ? config : JSON.stringify(config));
      put(b);
      const r = call(ex.streamd_init, b.length);
      return { ...r, text: dec.decode(r.reply) };
    },
    /** Sends raw request bytes; returns {status, reply, text}. */
    processRaw(bytes) {
      put(bytes);
      const r = call(ex.streamd_process, bytes.length);
      return { ...r, text: dec.decode(r.reply) };
    },
    /** Encodes records, calls streamd_process and decodes the result. */
    process(op, records) {
      const r = this.processRaw(encodeRequest(op, records));
      if (r.status !== 0) return { status: r.status, text: r.text, entries: null };
      return { status: 0, entries: decodeResult(r.reply, records.length) };
    },
  };
}

// ---------------------------------------------------------------------------
// JSON-lines records (record/doc.go), for conformance fixtures.

const b64 = (s) => new Uint8Array(Buffer.from(s, "base64"));
const validUTF8 = (b) => {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(b);
    return true;
  } catch {
    return false;
  }
};

/**
 * Parses one JSON-lines record of record/doc.go into harness form, with the
 * defaults streamd's reader gives (record.DecodeJSON): a missing or null key
 * or value is null, partition 0, offset -1, timestamp -1 (none, as the host
 * sends it); timestamp is an RFC 3339 string or Unix milliseconds. An error
 * line's kind defaults to "rejected". A field of the wrong type is an error
 * naming it.
 */
export function recordFromJSONL(line) {
  const j = JSON.parse(line);
  const bytes = (text, b64text, what) => {
    if (text !== undefined && text !== null) {
      if (typeof text !== "string") throw new TypeError(`${what}: want a string or null, got ${JSON.stringify(text)}`);
      return enc.encode(text);
    }
    if (b64text !== undefined && b64text !== null) {
      if (typeof b64text !== "string") throw new TypeError(`${what}_b64: want a base64 string, got ${JSON.stringify(b64text)}`);
      return b64(b64text);
    }
    return null;
  };
  const r = {
    key: bytes(j.key, j.key_b64, "key"),
    value: bytes(j.value, j.value_b64, "value"),
    headers: [],
    partition: j.partition ?? 0,
    offset: BigInt(j.offset ?? -1),
    timestamp: timestampMs(j.timestamp),
    error: j.error,
    kind: j.error !== undefined ? (j.kind ?? "rejected") : undefined,
    inputOffset: j.input_offset,
  };
  if (Array.isArray(j.headers)) {
    // The list form keeps order and repeated names (README, "JSON-lines records").
    for (const [i, h] of j.headers.entries()) {
      r.headers.push([enc.encode(h.key), bytes(h.value, h.value_b64, `headers[${i}].value`)]);
    }
    return r;
  }
  // JSON.parse loses repeated names of the object form; the writer uses the list then.
  for (const [n, v] of Object.entries(j.headers ?? {})) r.headers.push([enc.encode(n), bytes(v, undefined, `headers.${n}`)]);
  for (const [n, v] of Object.entries(j.headers_b64 ?? {})) r.headers.push([enc.encode(n), bytes(undefined, v, `headers_b64.${n}`)]);
  return r;
}

// timestampMs reads a JSON-lines timestamp as the ABI's timestamp_ms.
function timestampMs(ts) {
  if (ts === undefined || ts === null) return -1n;
  if (typeof ts === "number") {
    if (!Number.isInteger(ts)) throw new TypeError(`timestamp: want whole Unix milliseconds, got ${ts}`);
    return BigInt(ts);
  }
  if (typeof ts !== "string") throw new TypeError(`timestamp: want an RFC 3339 string or Unix milliseconds, got ${JSON.stringify(ts)}`);
  const ms = Date.parse(ts);
  if (Number.isNaN(ms)) throw new TypeError(`timestamp: ${JSON.stringify(ts)} is not RFC 3339`);
  return BigInt(ms);
}

/** Renders an output record's bytes fields comparably with recordFromJSONL. */
export function recordKey(r) {
  const show = (b) => (b === null ? "null" : validUTF8(b) ? JSON.stringify(dec.decode(b)) : `b64:${Buffer.from(b).toString("base64")}`);
  const hs = r.headers.map(([n, v]) => `${typeof n === "string" ? n : dec.decode(n)}=${show(v)}`).join(",");
  return `key=${show(r.key)} value=${show(r.value)} ts=${r.timestamp} headers=[${hs}]`;
}
