#!/usr/bin/env node
// streamd-check PLUGIN.wasm...: checks that each module is a streamd ABI v1
// plugin (docs/abi.md sections 1-3): one streamd_abi_v1 export, the required
// exports, imports only streamd.reply/streamd.log and WASI; then instantiates
// it and checks that streamd_manifest answers valid JSON with abi 1.
import fs from "node:fs";
import { load } from "../harness/index.mjs";

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: streamd-check PLUGIN.wasm...");
  process.exit(2);
}
let failed = false;
for (const f of files) {
  try {
    const p = await load(fs.readFileSync(f));
    const m = p.manifest();
    if (m.status !== 0) throw new Error(`streamd_manifest returned status ${m.status}: ${m.text}`);
    if (m.json.abi !== 1) throw new Error(`manifest abi is ${m.json.abi}, want 1`);
    if (!/^[a-z0-9._-]{1,64}$/.test(m.json.name)) throw new Error(`manifest name ${JSON.stringify(m.json.name)} does not match [a-z0-9._-]{1,64}`);
    if (!["transform", "codec", "sink"].includes(m.json.kind)) throw new Error(`manifest kind ${JSON.stringify(m.json.kind)}`);
    console.log(`${f}: ok: ${m.text} (${fs.statSync(f).size} bytes)`);
  } catch (e) {
    console.error(`${f}: ${e.message}`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
