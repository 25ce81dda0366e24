// Tests of the SDK: compiles the plugins in test/plugins with asc (same flags
// as examples/wasm/assemblyscript/build-plugin.sh) and drives them through the
// harness, checking every byte of the ABI the SDK produces.
//
//   npm test     (from sdk/assemblyscript, after npm ci)
import { test, before } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import asc from "assemblyscript/asc";
import { load, OP, STATUS, encodeRequest, decodeResult, recordFromJSONL } from "../harness/index.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, "..");
const out = path.join(here, "build");
const dec = new TextDecoder();
const wasm = {};

before(async () => {
  fs.mkdirSync(out, { recursive: true });
  for (const name of ["transform", "codec", "sink", "empty", "badname", "json"]) {
    const file = path.join(out, `${name}.wasm`);
    const { error, stderr } = await asc.main(
      [
        path.relative(root, path.join(here, "plugins", `${name}.ts`)),
        "--outFile", file,
        "-O3",
        "--runtime", "incremental",
        "--exportStart", "_initialize",
        "--use", "abort=assembly/index/streamdAbort",
      ],
      { stdout: process.stdout, stderr: process.stderr, baseDir: root },
    );
    if (error) throw new Error(`asc ${name}: ${error.message}\n${stderr.toString()}`);
    wasm[name] = fs.readFileSync(file);
  }
  // The transform again with SIMD, which putBytes then uses.
  const file = path.join(out, "transform-simd.wasm");
  const { error, stderr } = await asc.main(
    [
      path.relative(root, path.join(here, "plugins", "transform.ts")),
      "--outFile", file,
      "-O3",
      "--enable", "simd",
      "--runtime", "incremental",
      "--exportStart", "_initialize",
      "--use", "abort=assembly/index/streamdAbort",
    ],
    { stdout: process.stdout, stderr: process.stderr, baseDir: root },
  );
  if (error) throw new Error(`asc transform-simd: ${error.message}\n${stderr.toString()}`);
  wasm["transform-simd"] = fs.readFileSync(file);
});

const str = (b) => (b === null ? null : dec.decode(b));
const rec = (value, extra = {}) => ({ key: "k", value, timestamp: 1000n, offset: 5n, partition: 2, headers: [], ...extra });

async function transform(config = {}) {
  const p = await load(wasm.transform);
  const r = p.init(config);
  assert.equal(r.status, STATUS.OK, r.text);
  return p;
}

test("every module imports only streamd functions", async () => {
  for (const [name, bytes] of Object.entries(wasm)) {
    const mod = await WebAssembly.compile(bytes);
    for (const im of WebAssembly.Module.imports(mod)) {
      assert.equal(im.module, "streamd", `${name} imports ${im.module}.${im.name}`);
      assert.ok(["reply", "log"].includes(im.name), `${name} imports ${im.name}`);
    }
    const ex = WebAssembly.Module.exports(mod).map((e) => e.name).sort();
    assert.deepEqual(ex, ["_initialize", "memory", "streamd_abi_v1", "streamd_buffer", "streamd_init", "streamd_manifest", "streamd_process"], name);
  }
});

test("manifests: kind per registration, version JSON-escaped", async () => {
  const want = {
    transform: '{"name":"test-transform","kind":"transform","version":"0.1.0-\\"q\\"","abi":1}',
    codec: '{"name":"case","kind":"codec","version":"1.0.0","abi":1}',
    sink: '{"name":"counter","kind":"sink","version":"1.0.0","abi":1}',
  };
  for (const [name, text] of Object.entries(want)) {
    const p = await load(wasm[name]);
    const m = p.manifest();
    assert.equal(m.status, STATUS.OK);
    assert.equal(m.text, text);
  }
  const empty = await load(wasm.empty);
  const m = empty.manifest();
  assert.equal(m.status, STATUS.ERR_INTERNAL);
  assert.match(m.text, /no plugin registered/);
});

test("an invalid plugin name traps in _initialize and logs why", async () => {
  const logs = [];
  await assert.rejects(load(wasm.badname, { onLog: (l, m) => logs.push([l, m]) }), WebAssembly.RuntimeError);
  assert.equal(logs.length, 1);
  assert.equal(logs[0][0], 3);
  assert.match(logs[0][1], /^abort: streamd sdk: plugin name must match .* at assembly\/index\.ts:\d+:\d+$/);
});

test("init: config passed, refusal is ERR_CONFIG with the reason", async () => {
  const p = await load(wasm.transform);
  const r = p.init({ refuse: true });
  assert.equal(r.status, STATUS.ERR_CONFIG);
  assert.equal(r.text, 'config refused: {"refuse":true}');
  const q = await load(wasm.transform);
  assert.equal(q.init({ a: 1 }).status, STATUS.OK);
  assert.deepEqual(q.logs.at(-1), { level: 1, msg: 'init {"a":1}' });
  const e = await load(wasm.codec); // no init function: any config is fine
  assert.equal(e.init("{}").status, STATUS.OK);
});

test("transform outcomes: keep, drop, reject, many records", async () => {
  const p = await transform({ prefix: true });
  const r = p.process(OP.TRANSFORM, [
    rec("keep"),
    rec("drop"),
    rec("reject"),
    rec("two", { key: new Uint8Array([0, 255]), headers: [["a", "1"], ["a", null]] }),
    rec("nulls"),
    rec("emit-then-keep"),
    rec("reject-then-emit"),
    rec("emit-then-drop"),
  ]);
  assert.equal(r.status, STATUS.OK, r.text);
  const [keep, drop, reject, two, nulls, ek, re, ed] = r.entries;
  assert.deepEqual(keep, { status: 0, keep: true });
  assert.deepEqual(drop, { status: 0, records: [] });
  assert.deepEqual(reject, { status: 1, error: "rejected: é" });
  assert.equal(two.records.length, 2);
  const [a, b] = two.records;
  assert.equal(a.offset, -1n);
  assert.equal(a.partition, -1);
  assert.equal(a.timestamp, 1001n);
  assert.equal(str(a.key), "p:k2");
  assert.equal(str(a.value), "second");
  assert.deepEqual(a.headers.map(([n, v]) => [n, v && [...v]]), [["h", [0x78]], ["n", null], ["b", [0, 255]]]);
  assert.deepEqual([...b.key], [0, 255]);
  assert.equal(str(b.value), "two");
  assert.equal(b.timestamp, 1000n);
  assert.equal(b.offset, -1n);
  assert.deepEqual(b.headers.map(([n, v]) => [n, str(v)]), [["a", "1"], ["a", null]]);
  assert.deepEqual(nulls.records, [{ offset: -1n, timestamp: 42n, partition: -1, key: null, value: null, headers: [] }]);
  assert.deepEqual(ek, { status: 0, keep: true });
  assert.equal(re.status, 0);
  assert.equal(str(re.records[0].value), "reject-then-emit");
  assert.deepEqual(ed, { status: 0, records: [] });
});

test("streamed values, header lookup and filtering", async () => {
  const p = await transform();
  const r = p.process(OP.TRANSFORM, [
    rec("stream", { headers: [["x", "1"], ["drop-me", "2"], ["y", null]] }),
    rec("header", { headers: [["want", "first"], ["other", "o"], ["want", "last"]] }),
    rec("header", { headers: [] }),
  ]);
  assert.equal(r.status, STATUS.OK, r.text);
  const s = r.entries[0].records[0];
  assert.equal(str(s.value), "n=-9223372036854775808,ab");
  assert.equal(s.timestamp, 7n);
  assert.equal(str(s.key), "k");
  assert.deepEqual(s.headers.map(([n, v]) => [n, str(v)]), [["x", "1"], ["y", null]]);
  assert.equal(str(r.entries[1].records[0].value), "last");
  assert.equal(r.entries[2].records[0].value, null);
});

test("the output buffer grows for big answers and is reused", async () => {
  const p = await transform();
  for (let i = 0; i < 3; i++) {
    const r = p.process(OP.TRANSFORM, [rec("big"), rec("keep")]);
    assert.equal(r.status, STATUS.OK, r.text);
    assert.equal(r.entries[0].records[0].value.length, 3000000);
    assert.deepEqual(r.entries[1], { status: 0, keep: true });
  }
});

test("memory stays bounded when plugins allocate per record (GC runs)", async () => {
  const p = await transform();
  const batch = Array.from({ length: 200 }, () => rec("alloc"));
  let pages = 0;
  for (let i = 0; i < 150; i++) {
    const r = p.process(OP.TRANSFORM, batch);
    assert.equal(r.status, STATUS.OK);
    assert.equal(r.entries[199].records[0].value.length, 1003);
    if (i === 10) pages = p.exports.memory.buffer.byteLength;
  }
  // 150 batches * 200 records * ~4 KiB of garbage (UTF-16 string, concat,
  // UTF-8 copy) = ~120 MB allocated in all.
  assert.ok(p.exports.memory.buffer.byteLength <= pages * 2, `memory grew from ${pages} to ${p.exports.memory.buffer.byteLength}`);
});

test("fail() fails the whole batch with ERR_BATCH", async () => {
  const p = await transform();
  const r = p.process(OP.TRANSFORM, [rec("keep"), rec("fail")]);
  assert.equal(r.status, STATUS.ERR_BATCH);
  assert.equal(r.text, "destination down");
  assert.equal(p.process(OP.TRANSFORM, [rec("keep")]).status, STATUS.OK);
});

test("assert and records left open trap, with the reason logged", async () => {
  for (const [v, re] of [["assert", /^abort: boom at test\/plugins\/transform\.ts:\d+:\d+$/], ["open", /^abort: streamd sdk: record begun but not ended/], ["raw-over", /^abort: streamd sdk: commitRecord past reserveRecord's bytes/]]) {
    const p = await transform();
    assert.throws(() => p.process(OP.TRANSFORM, [rec(v)]), WebAssembly.RuntimeError);
    assert.match(p.logs.at(-1).msg, re);
    assert.equal(p.logs.at(-1).level, 3);
  }
});

test("copies of every length: raw records (reserveRecord, putBytes, headersPtr) and emitCopy, with and without SIMD", async () => {
  // Lengths 0-300 cross putBytes' 1-, 2-, 4-, 8-byte cases, its 16-32 bytes
  // without a loop, its 16-byte steps and its memory.copy from 256 on; the
  // bytes differ, so a misplaced or missing byte shows.
  const bytes = (n, seed) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 0xff);
  for (const name of ["transform", "transform-simd"]) {
    const p = await load(wasm[name]);
    assert.equal(p.init({}).status, STATUS.OK);
    for (let n = 0; n <= 300; n++) {
      const key = n === 0 ? null : bytes(n, 1);
      const headers = [["a".repeat(n % 40), bytes(n, 3)], ["n", null], ["e", new Uint8Array(0)]];
      for (const v of ["raw", "two"]) {
        const r = p.process(OP.TRANSFORM, [rec(v, { key, headers: n % 2 ? headers : [] })]);
        assert.equal(r.status, STATUS.OK, r.text);
        const out = v === "raw" ? r.entries[0].records[0] : r.entries[0].records[1];
        const at = `${name} ${v} n=${n}`;
        assert.deepEqual(out.key && [...out.key], key && [...key], at);
        assert.equal(str(out.value), v, at);
        assert.equal(out.offset, -1n, at);
        assert.equal(out.partition, -1, at);
        assert.equal(out.timestamp, v === "raw" ? 1005n : 1000n, at);
        const want = (n % 2 ? headers : []).map(([h, b]) => [h, b && [...b]]);
        if (v === "raw") want.push(["h", [...new TextEncoder().encode("raw")]]);
        assert.deepEqual(out.headers.map(([h, b]) => [h, b && [...b]]), want, at);
      }
    }
  }
});

test("unsupported ops answer ERR_UNSUPPORTED", async () => {
  const t = await transform();
  for (const op of [OP.ENCODE, OP.DECODE, OP.WRITE, 9]) {
    const r = t.process(op, [rec("keep")]);
    assert.equal(r.status, STATUS.ERR_UNSUPPORTED, `op ${op}`);
  }
  const c = await load(wasm.codec);
  assert.equal(c.process(OP.TRANSFORM, [rec("a")]).status, STATUS.ERR_UNSUPPORTED);
  assert.equal(c.process(OP.WRITE, [rec("a")]).status, STATUS.ERR_UNSUPPORTED);
  const s = await load(wasm.sink);
  assert.equal(s.process(OP.TRANSFORM, [rec("a")]).status, STATUS.ERR_UNSUPPORTED);
});

test("codec: one record per input, enforced", async () => {
  const c = await load(wasm.codec);
  assert.equal(c.init({}).status, 0);
  const e = c.process(OP.ENCODE, [rec("abC"), rec(null), rec("2xx"), rec("none"), rec("")]);
  assert.equal(e.status, STATUS.OK);
  assert.equal(str(e.entries[0].records[0].value), "ABC");
  assert.deepEqual(e.entries[1], { status: 0, keep: true }); // a tombstone stays null: the codec is not called
  assert.equal(e.entries[2].status, 1);
  assert.match(e.entries[2].error, /exactly one record, got 2/);
  assert.match(e.entries[3].error, /exactly one record, got 0/);
  assert.equal(str(e.entries[4].records[0].value), "");
  const d = c.process(OP.DECODE, [rec("AbC")]);
  assert.equal(str(d.entries[0].records[0].value), "abc");
});

test("sink: written (nothing or keep), refused, emitting is an error, fail is ERR_BATCH", async () => {
  const s = await load(wasm.sink);
  const r = s.process(OP.WRITE, [rec("a"), rec("x"), rec("emit"), rec("b"), rec("keep")]);
  assert.equal(r.status, STATUS.OK);
  assert.deepEqual(r.entries[0], { status: 0, records: [] });
  assert.deepEqual(r.entries[1], { status: 1, error: "refused x" });
  assert.equal(r.entries[2].status, 1);
  assert.match(r.entries[2].error, /not records/);
  assert.deepEqual(r.entries[3], { status: 0, records: [] });
  assert.deepEqual(r.entries[4], { status: 0, keep: true }); // KEEP = written (docs/abi.md section 8)
  const f = s.process(OP.WRITE, [rec("down")]);
  assert.equal(f.status, STATUS.ERR_BATCH);
  assert.equal(f.text, "sink down after 3");
});

test("streamd_buffer: grows, keeps its address while big enough, refuses impossible sizes", async () => {
  const p = await transform();
  const ex = p.exports;
  const a = ex.streamd_buffer(0);
  assert.notEqual(a, 0);
  assert.equal(ex.streamd_buffer(100), a);
  assert.equal(ex.streamd_buffer(65536), a);
  const b = ex.streamd_buffer(65537);
  assert.notEqual(b, 0);
  assert.ok(new Uint8Array(ex.memory.buffer).length >= b + 65537);
  assert.equal(ex.streamd_buffer(1000), b);
  assert.equal(ex.streamd_buffer(-1), 0);
  assert.equal(ex.streamd_buffer(0x7fffffff), 0);
  // A batch bigger than the current buffer goes through after growth.
  const big = "x".repeat(1 << 20);
  const r = p.process(OP.TRANSFORM, [rec(big)]);
  assert.deepEqual(r.entries[0], { status: 0, keep: true });
});

test("empty batch and record-level byte exactness", async () => {
  const p = await transform();
  const r = p.processRaw(encodeRequest(OP.TRANSFORM, []));
  assert.equal(r.status, STATUS.OK);
  assert.deepEqual([...r.reply], [0, 0, 0, 0]);
  // keep then drop, checked byte by byte against section 8.
  const k = p.processRaw(encodeRequest(OP.TRANSFORM, [rec("keep"), rec("drop"), rec("reject")]));
  const want = [3, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 12, 0, 0, 0, ...new TextEncoder().encode("rejected: é")];
  assert.deepEqual([...k.reply], want);
  assert.equal(decodeResult(k.reply, 3).length, 3);
});

test("malformed batches: ERR_BATCH naming record and byte", async () => {
  const p = await transform();
  const good = encodeRequest(OP.TRANSFORM, [rec("keep", { headers: [["h", "v"]] })]);
  const dv = (b) => new DataView(b.buffer);
  const mut = (f) => {
    const b = good.slice();
    f(dv(b));
    return b;
  };
  const cases = [
    [good.slice(0, 4), /header needs 8 bytes/],
    [mut((d) => d.setUint32(4, 2, true)), /count 2 records cannot fit/],
    [mut((d) => d.setUint32(8, 1000, true)), /record 0 at byte 8: size 1000 past end/],
    [mut((d) => d.setInt32(8 + 4 + 20, 100, true)), /key past end of body/],
    [mut((d) => d.setInt32(8 + 4 + 20, -7, true)), /negative length/],
    [mut((d) => d.setUint32(8 + 4 + 20 + 4 + 1 + 4 + 4, 9, true)), /header count exceeds body/],
    [mut((d) => d.setUint32(8 + 4 + 20 + 4 + 1 + 4 + 4 + 4, 50, true)), /header name past end of body/],
    [(() => {
      const b = new Uint8Array(good.length + 2);
      b.set(good);
      const d = dv(b);
      d.setUint32(8, d.getUint32(8, true) + 2, true);
      return b;
    })(), /bytes left over in body/],
    [new Uint8Array([...good, 1]), /1 trailing bytes after record 1/],
  ];
  // The whole message, for a record past the first too.
  const two = encodeRequest(OP.TRANSFORM, [rec("keep"), rec("keep", { headers: [["h", "v"]] })]);
  const at1 = 12 + dv(two).getUint32(8, true);
  const mut2 = (f) => {
    const b = two.slice();
    f(dv(b));
    return b;
  };
  cases.push(
    [mut((d) => d.setUint32(8, 1000, true)), new RegExp(`^streamd sdk: bad request batch: record 0 at byte 8: size 1000 past end of batch \\(${good.length} bytes\\)$`)],
    [mut2((d) => d.setUint32(at1, 1000, true)), new RegExp(`^streamd sdk: bad request batch: record 1 at byte ${at1}: size 1000 past end of batch \\(${two.length} bytes\\)$`)],
    [mut2((d) => d.setInt32(at1 + 4 + 20, 100, true)), new RegExp(`^streamd sdk: bad request batch: record 1 at byte ${at1}: key past end of body at byte ${at1 + 4 + 24}$`)],
    [mut2((d) => d.setInt32(at1 + 4 + 20, -7, true)), new RegExp(`^streamd sdk: bad request batch: record 1 at byte ${at1}: negative length other than -1 at byte ${at1 + 4 + 20}$`)],
  );
  for (const [bytes, re] of cases) {
    const r = p.processRaw(bytes);
    assert.equal(r.status, STATUS.ERR_BATCH, `${re}: status ${r.status}`);
    assert.match(r.text, re);
  }
});

test("JSON helpers", async () => {
  const p = await load(wasm.json);
  assert.equal(p.init({ limite: 3 }).status, STATUS.ERR_CONFIG);
  assert.equal(p.init({ limite: 3 }).text, 'unknown key "limite"');
  assert.equal(p.init({ limit: "3" }).text, "limit: want an integer");
  const r = p.init({ limit: 3 });
  assert.equal(r.status, STATUS.OK, r.text);
  const cases = [
    [' {"a":"x\\u00e9\\ud83d\\ude00\\n","n":-9223372036854775808,"f":1.5e3,"b":true,"z":null,"l":[1,{}],"a":"last"} ',
      "valid=1 object=1 a=s:last n=i:-9223372036854775808 f=f:1500.0 b=true z=null l=raw:[1,{}] unknown=- limit=3"],
    ['{"a":"x\\u00e9\\ud83d\\ude00\\n","q\\u0021":1}', "valid=1 object=1 a=s:x\u00e9\u{1F600}\n n=- f=- b=- z=- l=- unknown=\"q\\u0021\" limit=3"],
    ['{"n":9223372036854775808,"f":-0.5,"b":false}', "valid=1 object=1 a=- n=f:9223372036854776000.0 f=f:-0.5 b=false z=- l=- unknown=- limit=3"],
    ["[1,2]", "valid=1 object=0 a=- n=- f=- b=- z=- l=- unknown=(not a JSON object) limit=3"],
    ['{"a":1,}', "valid=0 object=0 a=- n=- f=- b=- z=- l=- unknown=(not a JSON object) limit=3"],
    ['"\\ud800"', "valid=0 object=0 a=- n=- f=- b=- z=- l=- unknown=(not a JSON object) limit=3"],
    ["[".repeat(65) + "]".repeat(65), "valid=0 object=0 a=- n=- f=- b=- z=- l=- unknown=(not a JSON object) limit=3"],
    ["[".repeat(64) + "]".repeat(64), "valid=1 object=0 a=- n=- f=- b=- z=- l=- unknown=(not a JSON object) limit=3"],
    ["01", "valid=0 object=0 a=- n=- f=- b=- z=- l=- unknown=(not a JSON object) limit=3"],
  ];
  const res = p.process(OP.TRANSFORM, cases.map(([v]) => rec(new TextEncoder().encode(v))));
  assert.equal(res.status, STATUS.OK, res.text);
  res.entries.forEach((e, i) => assert.equal(str(e.records[0].value), cases[i][1], cases[i][0]));
  const bad = p.process(OP.TRANSFORM, [rec(new Uint8Array([0x22, 0xff, 0x22]))]);
  assert.equal(str(bad.entries[0].records[0].value).slice(0, 7), "valid=0");
});

test("recordFromJSONL: the defaults and forms of streamd's JSON lines (record.DecodeJSON)", () => {
  const r = recordFromJSONL('{"value":"v"}');
  assert.equal(r.key, null);
  assert.equal(str(r.value), "v");
  assert.equal(r.partition, 0);
  assert.equal(r.offset, -1n);
  assert.equal(r.timestamp, -1n, "no timestamp is -1, as the host sends it");
  // A tombstone: a null value is null, not the text "null".
  const t = recordFromJSONL('{"key":"k","value":null,"timestamp":null}');
  assert.equal(t.value, null);
  assert.equal(t.timestamp, -1n);
  assert.equal(recordFromJSONL('{"value":"v","timestamp":1767225600123}').timestamp, 1767225600123n);
  assert.equal(recordFromJSONL('{"value":"v","timestamp":-1}').timestamp, -1n);
  assert.equal(recordFromJSONL('{"value":"v","timestamp":"2026-01-01T00:00:00.5Z"}').timestamp, 1767225600500n);
  assert.deepEqual([...recordFromJSONL('{"value_b64":"/wA="}').value], [255, 0]);
  // The list form keeps order, repeated names and null values.
  const h = recordFromJSONL('{"value":"v","headers":[{"key":"a","value":"1"},{"key":"b","value_b64":"/w=="},{"key":"a","value":null}]}');
  assert.deepEqual(h.headers.map(([n, v]) => [str(n), v === null ? null : [...v]]), [["a", [49]], ["b", [255]], ["a", null]]);
  const o = recordFromJSONL('{"value":"v","headers":{"a":"1","n":null},"headers_b64":{"b":"/w=="}}');
  assert.deepEqual(o.headers.map(([n, v]) => [str(n), v === null ? null : [...v]]), [["a", [49]], ["n", null], ["b", [255]]]);
  // Error lines: kind defaults to rejected, as plugin test reads them.
  assert.equal(recordFromJSONL('{"error":"bad","input_offset":3}').kind, "rejected");
  assert.equal(recordFromJSONL('{"error":"x","kind":"trap"}').kind, "trap");
  assert.throws(() => recordFromJSONL('{"value":"v","timestamp":"yesterday"}'), /timestamp: "yesterday" is not RFC 3339/);
  assert.throws(() => recordFromJSONL('{"value":7}'), /value: want a string or null, got 7/);
  // A record encoded without a timestamp carries -1 (docs/abi.md section 7).
  const req = encodeRequest(OP.TRANSFORM, [{ value: "v" }]);
  assert.equal(new DataView(req.buffer).getBigInt64(8 + 4 + 8, true), -1n);
});
