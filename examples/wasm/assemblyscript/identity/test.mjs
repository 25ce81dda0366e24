// Tests identity/plugin.wasm (build it first: bash build.sh): every record is
// answered with KEEP, whatever it holds.
//
//   node --test            (from this directory)
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { load, OP, STATUS } from "@streamd/sdk/harness";

const here = path.dirname(fileURLToPath(import.meta.url));
const wasm = fs.readFileSync(path.join(here, "plugin.wasm"));

test("manifest and imports", async () => {
  const mod = await WebAssembly.compile(wasm);
  assert.deepEqual(WebAssembly.Module.imports(mod).map((i) => `${i.module}.${i.name}`).sort(), ["streamd.log", "streamd.reply"]);
  const p = await load(mod);
  assert.equal(p.manifest().text, '{"name":"identity","kind":"transform","version":"1.0.0","abi":1}');
});

test("every record is kept", async () => {
  const p = await load(wasm);
  assert.equal(p.init({}).status, STATUS.OK);
  for (const n of [0, 1, 1000]) {
    const recs = Array.from({ length: n }, (_, i) => ({ key: i % 2 ? null : `k${i}`, value: i % 3 ? "v".repeat(i) : null, headers: [["h", `${i}`]] }));
    const r = p.process(OP.TRANSFORM, recs);
    assert.equal(r.status, STATUS.OK, r.text);
    assert.equal(r.entries.length, n);
    for (const e of r.entries) assert.deepEqual(e, { status: 0, keep: true });
  }
});
