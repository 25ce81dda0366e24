// Tests plugin.wasm (build it first: bash build.sh) under Node with the
// @streamd/sdk harness: the ABI surface, the conformance fixture of
// examples/wasm/testdata, and edge cases of the downgrade rules.
//
//   node --test            (from this directory)
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { load, OP, STATUS, encodeRequest, recordFromJSONL, recordKey } from "@streamd/sdk/harness";

const here = path.dirname(fileURLToPath(import.meta.url));
const testdata = path.join(here, "../../testdata");
const wasm = fs.readFileSync(path.join(here, "plugin.wasm"));
const enc = new TextEncoder();
const dec = new TextDecoder();

async function plugin() {
  const p = await load(wasm);
  assert.equal(p.init({}).status, STATUS.OK);
  return p;
}

function order(fields) {
  return { key: "k", value: fields, timestamp: 1700000000123n, headers: [] };
}

// run downgrades one value (string or bytes) and returns the entry.
async function run(p, value, headers = []) {
  const r = p.process(OP.TRANSFORM, [{ key: "k", value, timestamp: 5n, headers }]);
  assert.equal(r.status, STATUS.OK, r.text);
  return r.entries[0];
}

function okValue(e) {
  assert.equal(e.status, 0, e.error);
  assert.equal(e.records.length, 1);
  return dec.decode(e.records[0].value);
}

const base = (extra = "") => `{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"EUR"${extra}}`;

test("imports only streamd.reply and streamd.log", async () => {
  const mod = await WebAssembly.compile(wasm);
  const imports = WebAssembly.Module.imports(mod).map((i) => `${i.module}.${i.name}`).sort();
  assert.deepEqual(imports, ["streamd.log", "streamd.reply"]);
  assert.ok(WebAssembly.Module.exports(mod).some((e) => e.name === "_initialize"));
});

test("manifest", async () => {
  const p = await load(wasm);
  const m = p.manifest();
  assert.equal(m.status, STATUS.OK);
  assert.equal(m.text, '{"name":"orders-downgrade","kind":"transform","version":"1.0.0","abi":1}');
});

test("unsupported op", async () => {
  const p = await plugin();
  const r = p.process(OP.ENCODE, [order(base())]);
  assert.equal(r.status, STATUS.ERR_UNSUPPORTED);
  assert.match(r.text, /ENCODE/);
});

test("conformance fixture, one batch and one record per batch", async () => {
  const inputs = fs.readFileSync(path.join(testdata, "orders-v2.jsonl"), "utf8").split("\n").filter(Boolean).map(recordFromJSONL);
  const expected = fs.readFileSync(path.join(testdata, "orders-v1.expected.jsonl"), "utf8").split("\n").filter(Boolean).map(recordFromJSONL);
  assert.equal(inputs.length, expected.length);
  assert.ok(inputs.length > 40);
  const p = await plugin();
  const check = (entries, offset0) => {
    entries.forEach((e, k) => {
      const i = offset0 + k;
      const want = expected[i];
      const where = `input line ${i + 1} (offset ${inputs[i].offset})`;
      if (want.error !== undefined) {
        assert.equal(e.status, 1, `${where}: want error ${JSON.stringify(want.error)}, got ${JSON.stringify(e)}`);
        assert.equal(BigInt(want.inputOffset), inputs[i].offset);
        assert.ok(e.error.length > 0);
        return;
      }
      assert.equal(e.status, 0, `${where}: unexpected error ${e.error}`);
      assert.equal(e.records.length, 1, where);
      const got = e.records[0];
      assert.equal(got.offset, -1n, where);
      assert.equal(got.partition, -1, where);
      assert.equal(recordKey(got), recordKey(want), where);
    });
  };
  const all = p.process(OP.TRANSFORM, inputs);
  assert.equal(all.status, STATUS.OK, all.text);
  check(all.entries, 0);
  for (let i = 0; i < inputs.length; i++) {
    const one = p.process(OP.TRANSFORM, [inputs[i]]);
    assert.equal(one.status, STATUS.OK, one.text);
    check(one.entries, i);
  }
});

test("output escaping and decoding", async () => {
  const p = await plugin();
  const cases = [
    [String.raw`"a\/b"`, `"a/b"`],
    [String.raw`"\u0022\u005c"`, String.raw`"\"\\"`],
    [String.raw`"\u0008\u000c\u000a\u000d\u0009"`, String.raw`"\b\f\n\r\t"`],
    [String.raw`"\u000b\u001F\u0000"`, String.raw`"\u000b\u001f\u0000"`],
    [String.raw`"\u007f\u2028\u2029"`, '"\u007f\u2028\u2029"'],
    [String.raw`"\ud83d\ude00\uD834\uDD1E"`, '"\u{1F600}\u{1D11E}"'],
    ['"\u{10FFFF}\uFFFD\u0080"', '"\u{10FFFF}\uFFFD\u0080"'],
    [String.raw`"\u00e9\u00E9"`, '"éé"'],
    ['"<>&\'"', '"<>&\'"'],
  ];
  for (const [inp, out] of cases) {
    const v = `{"order_id":${inp},"customer":{"id":${inp}},"amount_cents":1,"currency":${inp}}`;
    assert.equal(okValue(await run(p, v)), `{"order_id":${out},"customer_id":${out},"amount_cents":1,"currency":${out}}`, inp);
  }
});

test("amount_cents", async () => {
  const p = await plugin();
  const ok = [["0", "0"], ["-0", "0"], ["7", "7"], ["-12", "-12"], ["9223372036854775807", "9223372036854775807"], ["-9223372036854775808", "-9223372036854775808"], ["1000000000000000000", "1000000000000000000"]];
  for (const [lit, want] of ok) {
    const v = `{"order_id":"o","customer":{"id":"c"},"amount_cents":${lit},"currency":"E"}`;
    assert.equal(okValue(await run(p, v)), `{"order_id":"o","customer_id":"c","amount_cents":${want},"currency":"E"}`, lit);
  }
  const bad = ["9223372036854775808", "-9223372036854775809", "18446744073709551616", "99999999999999999999999", "1.0", "1e2", "1E2", "-", "--1", "01", "-01", "+1", '"1"', "true", "null", "[1]", "0x10", "1.", ".5"];
  for (const lit of bad) {
    const e = await run(p, `{"order_id":"o","customer":{"id":"c"},"amount_cents":${lit},"currency":"E"}`);
    assert.equal(e.status, 1, `amount_cents ${lit} accepted`);
  }
});

test("invalid inputs are per-record errors", async () => {
  const p = await plugin();
  const bad = {
    "null value": null,
    "empty": "",
    "spaces only": " \n",
    "array": "[]",
    "string": '"x"',
    "BOM": "\uFEFF" + base(),
    "trailing comma": base(","),
    "trailing garbage": base() + "x",
    "second object": base() + "{}",
    "missing customer": `{"order_id":"o","amount_cents":1,"currency":"E"}`,
    "customer null": `{"order_id":"o","customer":null,"amount_cents":1,"currency":"E"}`,
    "customer.id null": `{"order_id":"o","customer":{"id":null},"amount_cents":1,"currency":"E"}`,
    "order_id array": `{"order_id":["o"],"customer":{"id":"c"},"amount_cents":1,"currency":"E"}`,
    "dup order_id": base(',"order_id":"o"'),
    "dup escaped key": base(',"order\\u005fid":"p"'),
    "dup other key": base(',"x":1,"x":2'),
    "dup in customer": `{"order_id":"o","customer":{"id":"c","n":1,"n":1},"amount_cents":1,"currency":"E"}`,
    "bad escape": base(',"x":"\\x"'),
    "short unicode escape": base(',"x":"\\u12"'),
    "lone high surrogate": base(',"x":"\\ud800"'),
    "high then non-low": base(',"x":"\\ud800\\u0041"'),
    "high then high": base(',"x":"\\ud800\\ud800"'),
    "lone low surrogate": base(',"x":"\\udfff"'),
    "raw newline in string": base(',"x":"a\nb"'),
    "unterminated string": `{"order_id":"o`,
    "unterminated object": `{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E"`,
    "single quotes": `{'order_id':"o"}`,
    "bare word": base(',"x":nul'),
    "True": base(',"x":True'),
    "leading zero": base(',"x":00'),
    "dangling exponent": base(',"x":1e'),
    "missing colon": base(',"x" 1'),
    "unquoted key": base(",x:1"),
    "comment": base(",/*c*/\"x\":1"),
    "NaN": base(',"x":NaN'),
    "vertical tab whitespace": base(',\u000b"x":1'),
  };
  for (const [name, v] of Object.entries(bad)) {
    const e = await run(p, v);
    assert.equal(e.status, 1, `${name}: accepted ${JSON.stringify(v)}`);
    assert.ok(e.error.length > 0, name);
  }
});

test("invalid UTF-8 is an error anywhere, valid UTF-8 is kept", async () => {
  const p = await plugin();
  const wrap = (bytes) => {
    const pre = enc.encode('{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"E","x":"');
    const post = enc.encode('"}');
    const b = new Uint8Array(pre.length + bytes.length + post.length);
    b.set(pre);
    b.set(bytes, pre.length);
    b.set(post, pre.length + bytes.length);
    return b;
  };
  const bad = [[0x80], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF0, 0x80, 0x80, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0xC3], [0xE2, 0x82], [0xC3, 0x28]];
  for (const b of bad) {
    const e = await run(p, wrap(new Uint8Array(b)));
    assert.equal(e.status, 1, `bytes ${b.map((x) => x.toString(16))} accepted`);
  }
  const good = [[0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xEE, 0x80, 0x80], [0xEF, 0xBF, 0xBD], [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF], [0x7F]];
  for (const b of good) {
    assert.equal((await run(p, wrap(new Uint8Array(b)))).status, 0, `bytes ${b.map((x) => x.toString(16))} rejected`);
  }
  // Also in keys, in customer, and in the kept strings (copied raw).
  const inKey = enc.encode('{"order_id":"o","customer":{"id":"c","\xff":1},"amount_cents":1,"currency":"E"}');
  const raw = new Uint8Array([...enc.encode('{"order_id":"o","customer":{"id":"c","'), 0xFF, ...enc.encode('":1},"amount_cents":1,"currency":"E"}')]);
  assert.equal((await run(p, inKey)).status, 0); // \xff here is U+00FF, valid
  assert.equal((await run(p, raw)).status, 1);
});

test("nesting: level 64 is fine, 65 is not", async () => {
  const p = await plugin();
  const nest = (n, open, close) => open.repeat(n) + "1" + close.repeat(n);
  // tags holds 63 nested arrays: level 64.
  assert.equal((await run(p, base(`,"tags":${nest(63, "[", "]")}`))).status, 0);
  assert.equal((await run(p, base(`,"tags":${nest(64, "[", "]")}`))).status, 1);
  const objs = (n) => '{"a":'.repeat(n) + "1" + "}".repeat(n);
  assert.equal((await run(p, base(`,"tags":${objs(63)}`))).status, 0);
  assert.equal((await run(p, base(`,"tags":${objs(64)}`))).status, 1);
  // Inside customer, the customer object is level 2.
  const cust = (n) => `{"order_id":"o","customer":{"id":"c","x":${nest(n, "[", "]")}},"amount_cents":1,"currency":"E"}`;
  assert.equal((await run(p, cust(62))).status, 0);
  assert.equal((await run(p, cust(63))).status, 1);
  // Very deep input fails cleanly instead of overflowing the stack.
  assert.equal((await run(p, base(`,"tags":${nest(100000, "[", "]")}`))).status, 1);
});

test("many keys: duplicates found past the small-set limit", async () => {
  const p = await plugin();
  const many = (n, dup) => {
    let s = "";
    for (let i = 0; i < n; i++) s += `,"k${i}":${i}`;
    if (dup) s += `,"k${n - 3}":0`;
    return s;
  };
  assert.equal((await run(p, base(many(5000, false)))).status, 0);
  const e = await run(p, base(many(5000, true)));
  assert.equal(e.status, 1);
  assert.match(e.error, /duplicate key "k4997"/);
  const c = `{"order_id":"o","customer":{"id":"c"${many(300, true)}},"amount_cents":1,"currency":"E"}`;
  assert.match((await run(p, c)).error, /duplicate key "k297" in customer/);
  // Duplicates deeper down are allowed.
  assert.equal((await run(p, base(`,"deep":{"a":1,"a":2}`))).status, 0);
});

test("headers: schema version replaced, order and nulls kept", async () => {
  const p = await plugin();
  const e = await run(p, base(), [
    ["fluid-schema-version", "2"],
    ["a", "1"],
    ["fluid-schema-version", null],
    ["b", null],
    ["Fluid-Schema-Version", "9"],
    ["a", ""],
  ]);
  assert.equal(e.status, 0);
  const hs = e.records[0].headers.map(([n, v]) => [n, v === null ? null : dec.decode(v)]);
  assert.deepEqual(hs, [["a", "1"], ["b", null], ["Fluid-Schema-Version", "9"], ["a", ""], ["fluid-schema-version", "1"]]);
  assert.equal(e.records[0].timestamp, 5n);
  assert.equal(dec.decode(e.records[0].key), "k");
});

test("null and binary keys are kept", async () => {
  const p = await plugin();
  const r = p.process(OP.TRANSFORM, [
    { key: null, value: base(), timestamp: -1n },
    { key: new Uint8Array([0, 255, 1]), value: base(), timestamp: 0n },
  ]);
  assert.equal(r.status, 0);
  assert.equal(r.entries[0].records[0].key, null);
  assert.equal(r.entries[0].records[0].timestamp, -1n);
  assert.deepEqual([...r.entries[1].records[0].key], [0, 255, 1]);
});

test("large batches grow the buffers and stay correct", async () => {
  const p = await plugin();
  for (const n of [1, 1000, 20000]) {
    const recs = [];
    for (let i = 0; i < n; i++) {
      recs.push(i % 7 === 3 ? { key: `k${i}`, value: "bad" } : { key: `k${i}`, value: `{"order_id":"o-${i}","customer":{"id":"c-${i}"},"amount_cents":${i},"currency":"EUR","pad":"${"x".repeat(i % 50)}"}`, timestamp: BigInt(i) });
    }
    const r = p.process(OP.TRANSFORM, recs);
    assert.equal(r.status, 0, r.text);
    r.entries.forEach((e, i) => {
      if (i % 7 === 3) {
        assert.equal(e.status, 1);
        return;
      }
      assert.equal(dec.decode(e.records[0].value), `{"order_id":"o-${i}","customer_id":"c-${i}","amount_cents":${i},"currency":"EUR"}`);
      assert.equal(e.records[0].timestamp, BigInt(i));
    });
  }
  // One big value (1 MiB string).
  const big = "é".repeat(512 * 1024);
  const e = await run(p, `{"order_id":"${big}","customer":{"id":"c"},"amount_cents":1,"currency":"E"}`);
  assert.equal(okValue(e), `{"order_id":"${big}","customer_id":"c","amount_cents":1,"currency":"E"}`);
});

test("malformed request batches fail with ERR_BATCH naming the byte", async () => {
  const p = await plugin();
  const good = encodeRequest(OP.TRANSFORM, [order(base())]);
  const cases = {
    short: good.slice(0, 5),
    "count too big": (() => {
      const b = good.slice();
      new DataView(b.buffer).setUint32(4, 1000, true);
      return b;
    })(),
    "size past end": good.slice(0, good.length - 1),
    "trailing bytes": new Uint8Array([...good, 0]),
    "key length past body": (() => {
      const b = good.slice();
      new DataView(b.buffer).setInt32(8 + 4 + 20, 1 << 20, true);
      return b;
    })(),
    "negative key length": (() => {
      const b = good.slice();
      new DataView(b.buffer).setInt32(8 + 4 + 20, -2, true);
      return b;
    })(),
  };
  for (const [name, bytes] of Object.entries(cases)) {
    const r = p.processRaw(bytes);
    assert.equal(r.status, STATUS.ERR_BATCH, `${name}: status ${r.status} ${r.text}`);
    assert.match(r.text, /byte|bytes/, name);
  }
  // The instance still works afterwards.
  assert.equal((await run(p, base())).status, 0);
});

test("string scanning at every alignment (word-at-a-time fast path)", async () => {
  const p = await plugin();
  const bytesOf = (s) => enc.encode(s);
  const value = (mid) => {
    const pre = bytesOf('{"order_id":"o","customer":{"id":"c"},"amount_cents":1,"currency":"');
    const post = bytesOf('"}');
    return new Uint8Array([...pre, ...mid, ...post]);
  };
  for (let k = 0; k < 24; k++) {
    for (let tail = 0; tail < 10; tail++) {
      const a = "a".repeat(k);
      const b = "b".repeat(tail);
      // Valid: an escape, a 2-byte and a 4-byte character, DEL.
      for (const [mid, want] of [[String.raw`\n`, String.raw`\n`], ["é", "é"], ["\u{1F600}", "\u{1F600}"], ["\u007f", "\u007f"], [String.raw`\u0001`, String.raw`\u0001`]]) {
        const e = await run(p, value(bytesOf(a + mid + b)));
        assert.equal(okValue(e), `{"order_id":"o","customer_id":"c","amount_cents":1,"currency":"${a}${want}${b}"}`, `k=${k} tail=${tail} ${mid}`);
      }
      // Invalid: raw control byte, bad UTF-8 lead, lone continuation byte.
      for (const bad of [[0x01], [0x1f], [0xff], [0x80], [0xc3]]) {
        const e = await run(p, value(new Uint8Array([...bytesOf(a), ...bad, ...bytesOf(b)])));
        assert.equal(e.status, 1, `k=${k} tail=${tail} byte ${bad[0].toString(16)} accepted`);
      }
    }
  }
});
