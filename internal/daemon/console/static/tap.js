// tap.js: the tap view of the streamd console: a sample of the records
// going into and out of a stage, side by side.
(function () {
"use strict";

const C = window.streamdConsole;
const {el, enc, dataText, pipeInfo} = C;
const KEEP = 200; // rows kept on the page

// readSSE reads a server-sent event stream from a fetch response.
async function readSSE(res, onEvent) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buf += dec.decode(value, {stream: true});
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let event = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data) onEvent(event, JSON.parse(data));
    }
  }
}

function recText(r) {
  const head = (r.topic ? r.topic + "/" + r.partition + "@" + r.offset + "  " : "") + "key " + dataText(r.key);
  const hs = (r.headers || []).map(h => h.key + ": " + dataText(h.value)).join("\n");
  return head + (hs ? "\n" + hs : "") + "\n" + dataText(r.value);
}

C.setTapPage(function (name, stage) {
  const p = pipeInfo(name);
  if (!p || !p.stages.length) {
    return {node: el("div", {}, el("h1", {}, "Tap"), el("p", {class: "error"}, "No pipeline " + name + " with a transform stage."))};
  }
  const lim = C.store.info.tap_limits || {rate: 10, value_bytes: 1024};
  const stageSel = el("select", {name: "stage"}, el("option", {value: ""}, "every stage"),
    p.stages.map(s => el("option", {value: s.name, selected: s.name === stage}, s.name)));
  const rate = el("input", {name: "rate", type: "number", min: 0.1, step: "any", max: lim.rate, value: Math.min(10, lim.rate)});
  const bytes = el("input", {name: "bytes", type: "number", min: 1, max: lim.value_bytes, value: lim.value_bytes});
  const btn = el("button", {type: "submit"}, "Open tap");
  const status = el("span", {class: "muted", "data-tap-status": ""}, "closed");
  const body = el("tbody", {});
  let abort = null;
  function row(ev) {
    const out = ev.call_error ? el("pre", {class: "rec"}, "the whole call failed: " + ev.call_error) :
      ev.error ? el("pre", {class: "rec"}, el("span", {class: "tag err"}, "rejected"), " " + ev.error) :
      ev.out.length === 0 ? el("pre", {class: "rec muted"}, "(no output: the stage dropped it)") :
      ev.out.map(r => el("pre", {class: "rec"}, recText(r)));
    return el("tr", {"data-tap-row": ev.stage},
      el("td", {}, el("div", {class: "muted"}, ev.stage + " · " + new Date(ev.time).toLocaleTimeString("en-GB") + " · call of " + ev.batch + " in " + ev.took_ms + " ms"),
        el("pre", {class: "rec", "data-tap-in": ""}, recText(ev.in))),
      el("td", {"data-tap-out": ""}, out));
  }
  async function open() {
    stop();
    abort = new AbortController();
    const q = new URLSearchParams({rate: rate.value, bytes: bytes.value});
    const path = "/ui/api/tap/" + enc(name) + (stageSel.value ? "/" + enc(stageSel.value) : "") + "?" + q;
    btn.textContent = "Close tap";
    status.textContent = "opening…";
    try {
      const res = await fetch(path, {headers: C.authHeaders(), signal: abort.signal, cache: "no-store"});
      if (!res.ok) {
        let msg = res.status + " " + res.statusText;
        try { const b = await res.json(); msg = b.error || b.detail || msg; } catch (e) { /* not JSON */ }
        throw new Error(msg);
      }
      status.textContent = "open";
      await readSSE(res, (event, data) => {
        if (event === "status") {
          status.textContent = `open: ${data.sent} sampled at most ${data.rate}/s, values cut at ${data.bytes} bytes` +
            (data.skipped ? `, ${data.skipped} not sampled` : "") + (data.dropped ? `, ${data.dropped} dropped (this page was slow)` : "");
        } else if (event === "record") {
          body.prepend(row(data));
          while (body.children.length > KEEP) body.lastChild.remove();
        }
      });
      status.textContent = "closed by the daemon";
    } catch (e) {
      if (e.name !== "AbortError") {
        status.textContent = "";
        status.append(el("span", {class: "error"}, String(e.message || e)));
      }
    }
    btn.textContent = "Open tap";
    abort = null;
  }
  function stop() {
    if (abort) { abort.abort(); abort = null; status.textContent = "closed"; btn.textContent = "Open tap"; }
  }
  const form = el("form", {class: "filters", onsubmit: ev => { ev.preventDefault(); if (abort) stop(); else open(); }},
    el("label", {}, "stage", stageSel), el("label", {}, "records/s (at most " + lim.rate + ")", rate),
    el("label", {}, "cut values at bytes", bytes), btn, status);
  const root = el("div", {},
    el("h1", {}, "Tap on ", el("a", {href: "#/p/" + enc(name)}, name)),
    el("p", {class: "muted"}, "A sample of what each stage receives and returns, while the tap is open. Nothing is sampled when no tap is open."),
    form,
    el("table", {class: "tap", "data-tap": ""}, el("thead", {}, el("tr", {}, el("th", {}, "into the stage"), el("th", {}, "out of the stage"))), body));
  if (stage) setTimeout(open, 0);
  return {node: root, unmount: stop};
});
})();
