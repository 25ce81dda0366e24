// app.js: the streamd console. Plain DOM, no framework; data from /ui/api/.
(function () {
"use strict";

const {drawPlot, recent, fmtNum, windowFor} = window.streamdPlot;

const store = {
  info: null,         // /ui/api/info
  samples: {},        // pipeline -> [Sample], oldest first
  status: {},         // pipeline -> status of the last tick
  t: 0,               // last tick, ms
  interval: 1000,
  history: 15 * 60000,
};
const AVG_MS = 10000; // the "now" figures are the mean of the last 10 s

// ---- DOM helpers (data is always set as text, never parsed as HTML)

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) {
    const v = attrs[k];
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    e.append(kid instanceof Node ? kid : String(kid));
  }
  return e;
}
const $ = sel => document.querySelector(sel);
const sleep = ms => new Promise(r => setTimeout(r, ms));
const enc = encodeURIComponent;

// ---- API with the bearer token of this tab

const TOKEN_KEY = "streamd-token";
const token = () => sessionStorage.getItem(TOKEN_KEY) || "";
let asking = null;

function askToken(why) {
  if (asking) return asking;
  const dlg = $("#login");
  $("#login-why").textContent = why || "This admin server requires a bearer token (from [admin.auth] tokens_file). It is kept in this tab only.";
  asking = new Promise(resolve => {
    $("#login-form").onsubmit = () => {
      sessionStorage.setItem(TOKEN_KEY, $("#login-token").value.trim());
      $("#login-token").value = "";
      asking = null;
      resolve();
    };
  });
  if (!dlg.open) dlg.showModal();
  return asking;
}

function authHeaders(extra) {
  const h = Object.assign({}, extra || {});
  if (token()) h["Authorization"] = "Bearer " + token();
  return h;
}

async function api(path, opts) {
  opts = opts || {};
  for (;;) {
    const res = await fetch(path, Object.assign({cache: "no-store"}, opts, {headers: authHeaders(opts.headers)}));
    let body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (res.status === 401) {
      await askToken((body && (body.detail || body.error)) || "token needed");
      continue;
    }
    if (!res.ok) {
      const msg = body && (body.error || "") + (body && body.detail ? ": " + body.detail : "");
      throw new Error(msg || res.status + " " + res.statusText);
    }
    return body;
  }
}

// ---- the event stream (server-sent events read with fetch, so the token goes along)

let lastEventId = "";

function setConn(s, title) {
  const c = $("#conn");
  c.className = "conn " + s;
  c.textContent = s === "live" ? "live" : s === "down" ? "reconnecting" : "connecting";
  c.title = title || "";
}

async function stream() {
  for (;;) {
    try {
      const headers = authHeaders(lastEventId ? {"Last-Event-ID": lastEventId} : {});
      const res = await fetch("/ui/api/events", {headers, cache: "no-store"});
      if (res.status === 401) { await askToken("token needed"); continue; }
      if (!res.ok) throw new Error("events: " + res.status);
      setConn("live");
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buf += dec.decode(value, {stream: true});
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          onBlock(block);
        }
      }
      setConn("down", "stream ended");
    } catch (e) {
      setConn("down", String(e));
    }
    await sleep(2000);
  }
}

function onBlock(block) {
  let event = "message", data = "", id = null;
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const k = i < 0 ? line : line.slice(0, i);
    let v = i < 0 ? "" : line.slice(i + 1);
    if (v.startsWith(" ")) v = v.slice(1);
    if (k === "event") event = v;
    else if (k === "data") data += (data ? "\n" : "") + v;
    else if (k === "id") id = v;
  }
  if (!data) return;
  if (id !== null) lastEventId = id;
  const ev = JSON.parse(data);
  if (event === "hello") store.samples = {};
  store.interval = ev.interval_ms || store.interval;
  store.history = ev.history_ms || store.history;
  for (const name in ev.samples || {}) {
    const have = store.samples[name] || (store.samples[name] = []);
    const lastT = have.length ? have[have.length - 1].t : 0;
    for (const s of ev.samples[name]) if (s.t > lastT) have.push(s);
  }
  store.t = ev.t;
  for (const name in store.samples) {
    const a = store.samples[name];
    let k = 0;
    while (k < a.length && a[k].t <= ev.t - store.history) k++;
    if (k) a.splice(0, k);
  }
  store.status = ev.status || {};
  if (page && page.update) page.update();
}

// ---- plots

const COLORS = {in: "#2f6fdb", out: "#1a9c5b", lag: "#8a55d7", errors: "#d64545", dlq: "#e08a1e", inflight: "#5a6270"};

function points(name, f) {
  return (store.samples[name] || []).map(s => [s.t, f(s)]);
}

// plotBox is a plot with a title and the current values of its series.
function plotBox(title, series) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  const vals = series.map(s => el("span", {class: "v", "data-metric": s.key}, ""));
  const box = el("div", {class: "plot", "data-plot": title},
    el("div", {class: "ptitle"}, el("span", {}, title),
      el("span", {class: "legend"}, series.map((s, i) => [el("i", {class: s.cls}), s.label + " ", vals[i]]))),
    svg);
  return {
    node: box,
    update(name) {
      const now = store.t || Date.now();
      const drawn = series.map(s => ({name: s.key, color: s.color, points: points(name, s.f)}));
      const a = store.samples[name] || [];
      drawPlot(svg, drawn, now, windowFor(a.length ? a[0].t : 0, now, store.history));
      drawn.forEach((d, i) => {
        const v = recent(d.points, now, AVG_MS);
        vals[i].textContent = v === null ? "–" : fmtNum(v) + (series[i].unit || "");
        vals[i].setAttribute("data-value", v === null ? "" : String(v));
      });
    },
  };
}

const ratePlot = () => plotBox("records/s", [
  {key: "in", label: "in", cls: "in", color: COLORS.in, f: s => s.in, unit: "/s"},
  {key: "out", label: "out", cls: "out", color: COLORS.out, f: s => s.out, unit: "/s"}]);
const lagPlot = () => plotBox("consumer lag", [
  {key: "lag", label: "lag", cls: "lag", color: COLORS.lag, f: s => (s.lag < 0 ? null : s.lag)}]);
const errPlot = () => plotBox("errors & dead letters /s", [
  {key: "errors", label: "errors", cls: "err", color: COLORS.errors, f: s => s.errors, unit: "/s"},
  {key: "dlq", label: "DLQ", cls: "dlq", color: COLORS.dlq, f: s => s.dlq, unit: "/s"}]);
const inflightPlot = () => plotBox("records in flight", [
  {key: "in_flight", label: "in flight", cls: "", color: COLORS.inflight, f: s => s.in_flight}]);

// ---- status pieces

function stateBadge(st) {
  if (!st) return el("span", {class: "state"}, "unknown");
  const s = st.stalled && st.state === "running" ? "stalled" : st.state;
  return el("span", {class: "state " + s, "data-state": st.state}, s);
}

function statusLines(st) {
  if (!st) return [];
  const out = [];
  if (st.error) out.push(el("div", {class: "error", "data-error": ""}, st.error));
  else if (st.reason && st.state !== "done" && st.state !== "stopped") out.push(el("div", {class: "reason"}, st.reason));
  for (const r of st.reload_refused || [])
    out.push(el("div", {class: "error", "data-reload-refused": r.stage}, "hot reload of stage " + r.stage +
      (r.plugin ? " (" + r.plugin + ")" : "") + " refused; the running version stays: " + r.error));
  if (st.state === "failed" && st.error && (st.reason || "").startsWith("failed to load")) out.push(el("div", {class: "reason"},
    "Its plugins did not load. Fix the plugin or the config, then reload: streamd ctl reload"));
  else if (st.state === "failed" && st.error) out.push(el("div", {class: "reason"},
    "A new version of a hot-reloaded plugin of this pipeline starts it again by itself; else: streamd ctl restart " + st.name));
  return out;
}

function lagText(st) {
  if (!st || !st.lag || Object.keys(st.lag).length === 0) return "–";
  let sum = 0;
  for (const k in st.lag) {
    if (st.lag[k] === "unknown") return "unknown";
    sum += st.lag[k];
  }
  return sum.toLocaleString("en-US");
}

function numbers(name) {
  const st = store.status[name] || {};
  const a = store.samples[name] || [];
  const now = store.t;
  const r = f => fmtNum(recent(a.map(s => [s.t, f(s)]), now, AVG_MS));
  const box = (v, l, key) => el("div", {"data-num": key}, el("b", {}, v), el("span", {}, l));
  return el("div", {class: "nums"},
    box(r(s => s.in), "in /s", "in"), box(r(s => s.out), "out /s", "out"), box(lagText(st), "lag", "lag"),
    box((st.errors || 0).toLocaleString("en-US"), "errors", "errors"), box((st.dlq || 0).toLocaleString("en-US"), "dead letters", "dlq"),
    box((st.records_out || 0).toLocaleString("en-US"), "written", "written"), box((st.in_flight || 0).toLocaleString("en-US"), "in flight", "in_flight"));
}

function pipeInfo(name) {
  return ((store.info && store.info.pipelines) || []).find(p => p.name === name);
}

// ---- pages

let page = null;

const pages = {
  overview() {
    const cards = {};
    const grid = el("div", {class: "grid"});
    const root = el("div", {}, el("h1", {}, "Pipelines"), grid);
    for (const p of store.info.pipelines) {
      const plots = [ratePlot(), lagPlot(), errPlot()];
      const head = el("h3", {});
      const status = el("div", {});
      const nums = el("div", {});
      const card = el("section", {class: "card", id: "card-" + p.name, "data-pipeline": p.name}, head, status, nums,
        el("div", {class: "plots"}, plots.map(x => x.node)));
      cards[p.name] = {head, status, nums, plots, name: p.name, info: p};
      grid.append(card);
    }
    if (!store.info.pipelines.length) grid.append(el("p", {class: "muted"}, "No pipelines in this daemon's config."));
    return {
      node: root,
      update() {
        for (const name in cards) {
          const c = cards[name], st = store.status[name];
          c.head.replaceChildren(el("a", {href: "#/p/" + enc(name)}, name), stateBadge(st),
            el("span", {class: "muted"}, describeFlow(c.info)));
          c.status.replaceChildren(...statusLines(st));
          c.nums.replaceChildren(numbers(name));
          for (const pl of c.plots) pl.update(name);
        }
      },
    };
  },

  pipeline(name) {
    const p = pipeInfo(name);
    if (!p) return notFound("pipeline " + name);
    const plots = [ratePlot(), lagPlot(), errPlot(), inflightPlot()];
    const head = el("h1", {});
    const status = el("div", {});
    const nums = el("div", {});
    const stages = el("div", {});
    const parts = el("div", {});
    const errs = el("div", {});
    let detail = null, timer = null;
    const links = el("div", {class: "links"},
      p.dlq_topic ? el("a", {href: "#/dlq/" + enc(name)}, "Dead letters (" + p.dlq_topic + ")") : null,
      p.stages.length && store.info.tap ? el("a", {href: "#/tap/" + enc(name)}, "Tap a stage") : null);
    const root = el("div", {"data-pipeline": name}, head, links, status, nums,
      el("div", {class: "plots wide"}, plots.map(x => x.node)),
      el("h2", {}, "Stages"), stages, el("h2", {}, "Source partitions"), parts, el("h2", {}, "Last errors"), errs);
    async function load() {
      try { detail = await api("/ui/api/pipelines/" + enc(name)); } catch (e) { detail = {fetchError: String(e.message || e)}; }
      render();
    }
    function render() {
      if (!detail) return;
      if (detail.fetchError) { parts.replaceChildren(el("p", {class: "error"}, detail.fetchError)); return; }
      const last = (store.samples[name] || []);
      const stageRows = (detail.stage_parts || []).map((s, i) => {
        const r = f => fmtNum(recent(last.map(x => [x.t, x.stages && x.stages[i] ? f(x.stages[i]) : null]), store.t, AVG_MS));
        return el("tr", {"data-stage": s.name},
          el("td", {}, s.name), el("td", {}, s.type), el("td", {}, s.plugin || "–"), el("td", {}, s.version || "–"),
          el("td", {}, s.health ? el("span", {class: "tag err"}, s.health) : el("span", {class: "tag"}, "ok")),
          el("td", {class: "num"}, s.reloads < 0 ? "–" : s.reloads),
          el("td", {class: "num"}, r(x => x.in)), el("td", {class: "num"}, r(x => x.out)), el("td", {class: "num"}, r(x => x.errors)),
          el("td", {class: "num"}, r(x => x.calls ? x.p50 : null)), el("td", {class: "num"}, r(x => x.calls ? x.p90 : null)),
          el("td", {class: "num"}, r(x => x.calls ? x.p99 : null)));
      });
      stages.replaceChildren(stageRows.length ? el("table", {},
        el("thead", {}, el("tr", {}, ["stage", "type", "plugin", "version", "health", "reloads", "in /s", "out /s", "errors /s", "p50 ms", "p90 ms", "p99 ms"].map(h => el("th", {}, h)))),
        el("tbody", {}, stageRows)) : el("p", {class: "muted"}, "No transform stages: the source writes to the sink directly."));
      const prow = (detail.partitions || []).map(x => el("tr", {},
        el("td", {}, x.topic), el("td", {class: "num"}, x.partition), el("td", {class: "num"}, x.lag < 0 ? "unknown" : x.lag.toLocaleString("en-US")),
        el("td", {class: "mono"}, x.owner || "–")));
      parts.replaceChildren(prow.length ? el("table", {},
        el("thead", {}, el("tr", {}, ["topic", "partition", "lag", "owner"].map(h => el("th", {}, h)))), el("tbody", {}, prow)) :
        el("p", {class: "muted"}, "No partitions assigned (or the source is not Kafka)."),
        ...(detail.owners_error ? [el("p", {class: "reason"}, "owners: " + detail.owners_error)] : []));
      const erows = (detail.errors || []).slice().reverse().map(x => el("tr", {},
        el("td", {class: "mono", title: x.time}, shortTime(x.time)), el("td", {}, x.stage),
        el("td", {class: "mono"}, x.topic ? x.topic + "/" + x.partition + "@" + x.offset : "–"), el("td", {class: "mono"}, x.error)));
      errs.replaceChildren(detail.errors === undefined ? el("p", {class: "muted"}, "Rejections are not reported by this daemon.") :
        erows.length ? el("table", {}, el("thead", {}, el("tr", {}, ["time", "stage", "record", "error"].map(h => el("th", {}, h)))), el("tbody", {}, erows)) :
        el("p", {class: "muted"}, "No record rejected since the daemon started."));
    }
    load();
    timer = setInterval(load, 5000);
    return {
      node: root,
      update() {
        const st = store.status[name];
        head.replaceChildren(name + " ", stateBadge(st), el("span", {class: "muted"}, " " + describeFlow(p)));
        status.replaceChildren(...statusLines(st));
        nums.replaceChildren(numbers(name));
        for (const pl of plots) pl.update(name);
        render();
      },
      unmount() { clearInterval(timer); },
    };
  },

  dlq(name) {
    const p = pipeInfo(name);
    if (!p) return notFound("pipeline " + name);
    if (!p.dlq_topic) return notFound("a dead-letter topic of pipeline " + name + " (errors.policy = " + p.policy + ")");
    const f = {
      partition: el("input", {name: "partition", type: "number", min: 0, size: 4}),
      from: el("input", {name: "from", type: "number", min: 0, placeholder: "first"}),
      to: el("input", {name: "to", type: "number", min: 0, placeholder: "last"}),
      stage: el("select", {name: "stage"}, el("option", {value: ""}, "any"), p.stages.map(s => el("option", {value: s.name}, s.name)), el("option", {value: "sink"}, "sink")),
      error: el("input", {name: "error", placeholder: "error contains"}),
      limit: el("input", {name: "limit", type: "number", min: 1, max: 5000, value: 100}),
    };
    const summary = el("p", {class: "muted"});
    const list = el("div", {});
    const view = el("div", {});
    const jobs = el("div", {});
    const to = el("select", {name: "to"}, (p.replay || []).map(t => el("option", {value: t}, t === "source" ? "back to the source topic" : "through the pipeline again")));
    const topic = el("input", {name: "topic", placeholder: "(each record's source topic)"});
    const force = el("input", {type: "checkbox", name: "force"});
    const replayMsg = el("span", {class: "muted"});
    let timer = null;
    function filter() {
      const v = x => x.value.trim();
      const out = {};
      if (v(f.partition) !== "") out.partitions = [Number(v(f.partition))];
      if (v(f.from) !== "") out.from = Number(v(f.from));
      if (v(f.to) !== "") out.until = Number(v(f.to)) + 1;
      if (v(f.stage)) out.stage = v(f.stage);
      if (v(f.error)) out.error = v(f.error);
      return out;
    }
    async function load() {
      const flt = filter();
      const q = new URLSearchParams();
      if (flt.partitions) q.set("partition", flt.partitions[0]);
      if (flt.from !== undefined) q.set("from", flt.from);
      if (flt.until !== undefined) q.set("until", flt.until);
      if (flt.stage) q.set("stage", flt.stage);
      if (flt.error) q.set("error", flt.error);
      q.set("limit", f.limit.value || 100);
      summary.textContent = "Reading " + p.dlq_topic + "…";
      try {
        const r = await api("/ui/api/dlq/" + enc(name) + "?" + q);
        const total = r.ranges.reduce((n, x) => n + Math.max(0, x.end - x.start), 0);
        summary.textContent = `${r.entries.length}${r.more ? "+" : ""} dead letters selected of ${total.toLocaleString("en-US")} read in ${r.topic} (` +
          r.ranges.map(x => `partition ${x.partition}: ${x.start}–${x.end - 1}`).join(", ") + ")";
        list.replaceChildren(el("table", {"data-dlq": ""},
          el("thead", {}, el("tr", {}, ["partition@offset", "time", "stage", "source", "key", "error"].map(h => el("th", {}, h)))),
          el("tbody", {}, r.entries.map(e => el("tr", {class: "click", "data-offset": e.offset, onclick: ev => show(e, ev.currentTarget)},
            el("td", {class: "mono"}, e.partition + "@" + e.offset), el("td", {class: "mono", title: e.time}, shortTime(e.time)),
            el("td", {}, e.stage), el("td", {class: "mono"}, e.source.topic + "/" + e.source.partition + "@" + e.source.offset),
            el("td", {class: "mono"}, dataText(e.key)),
            el("td", {class: "mono"}, e.truncated ? el("span", {class: "tag err"}, "truncated") : null, e.error))))));
      } catch (e) {
        summary.textContent = "";
        list.replaceChildren(el("p", {class: "error"}, String(e.message || e)));
      }
    }
    async function show(e, row) {
      for (const r of list.querySelectorAll("tr.sel")) r.classList.remove("sel");
      row.classList.add("sel");
      try {
        const d = await api(`/ui/api/dlq/${enc(name)}/${e.partition}/${e.offset}`);
        view.replaceChildren(el("div", {class: "card", "data-entry": d.offset},
          el("h3", {}, `Dead letter ${d.partition}@${d.offset}`),
          el("p", {}, el("b", {}, "error: "), el("span", {class: "mono"}, d.error)),
          el("p", {}, `stage ${d.stage}` + (d.plugin ? `, plugin ${d.plugin}` : "") + `, read from ${d.source.topic}/${d.source.partition}@${d.source.offset}`),
          d.truncated ? el("p", {class: "reason"}, "The dead-letter topic's size limit left out: " + d.truncated + ". This one cannot be replayed.") : null,
          el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "header"), el("th", {}, "value"))),
            el("tbody", {}, (d.headers || []).map(h => el("tr", {}, el("td", {class: "mono"}, h.key), el("td", {class: "mono"}, dataText(h.value)))))),
          el("h2", {}, "key"), el("pre", {class: "rec"}, dataText(d.key)),
          el("h2", {}, "value"), el("pre", {class: "rec"}, dataText(d.value))));
      } catch (err) {
        view.replaceChildren(el("p", {class: "error"}, String(err.message || err)));
      }
    }
    async function replay(ev) {
      ev.preventDefault();
      const body = {filter: filter(), to: to.value};
      if (to.value === "source" && topic.value.trim()) body.topic = topic.value.trim();
      if (force.checked) body.force = true;
      replayMsg.textContent = "starting…";
      try {
        const job = await api("/ui/api/dlq/" + enc(name) + "/replay", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
        replayMsg.textContent = "replay " + job.id + " started";
        loadJobs();
      } catch (e) {
        replayMsg.textContent = "";
        replayMsg.append(el("span", {class: "error"}, String(e.message || e)));
      }
    }
    async function loadJobs() {
      let js;
      try { js = await api("/ui/api/replays"); } catch (e) { return; }
      js = js.filter(j => j.pipeline === name);
      jobs.replaceChildren(js.length ? el("table", {"data-replays": ""},
        el("thead", {}, el("tr", {}, ["replay", "to", "progress", "selected", "replayed", "rejected again", "skipped", "state"].map(h => el("th", {}, h)))),
        el("tbody", {}, js.map(j => {
          const bar = el("i", {});
          bar.style.width = (j.total ? Math.round(100 * j.scanned / j.total) : (j.done ? 100 : 0)) + "%";
          return el("tr", {"data-replay": j.id, "data-done": j.done ? "1" : "0"},
            el("td", {}, j.id), el("td", {}, j.request.to + (j.request.topic ? " → " + j.request.topic : "")),
            el("td", {}, el("div", {class: "bar"}, bar), `${j.scanned} of ${j.total} read`),
            el("td", {class: "num"}, j.matched), el("td", {class: "num", "data-replayed": j.replayed}, j.replayed),
            el("td", {class: "num"}, j.request.to === "pipeline" ? j.rejected : "–"), el("td", {class: "num"}, j.skipped),
            el("td", {}, j.error ? el("span", {class: "error"}, j.error) : j.stopped ? j.stopped : j.done ? "done" : "running"));
        }))) : el("p", {class: "muted"}, "No replay yet."));
    }
    const form = el("form", {class: "filters", onsubmit: ev => { ev.preventDefault(); load(); }},
      el("label", {}, "partition", f.partition), el("label", {}, "from offset", f.from), el("label", {}, "to offset", f.to),
      el("label", {}, "stage", f.stage), el("label", {}, "error text", f.error), el("label", {}, "show at most", f.limit),
      el("button", {type: "submit"}, "List"));
    const rform = el("form", {class: "filters", onsubmit: replay},
      el("label", {}, "replay what the filter above selects", to),
      el("label", {}, "to topic (source only)", topic),
      el("label", {title: "A replayed record the pipeline rejects again is not dead-lettered again (its dead letter is still here), unless this is checked."}, force, " dead-letter again what is rejected again"),
      el("button", {type: "submit", "data-replay-button": "", disabled: !(p.replay || []).length}, "Replay"), replayMsg);
    const root = el("div", {},
      el("h1", {}, "Dead letters of ", el("a", {href: "#/p/" + enc(name)}, name)),
      el("p", {class: "muted"}, `Topic ${p.dlq_topic}. Listing and replaying change nothing in it; a replay is at-least-once and its progress is kept below.`),
      form, summary, el("div", {class: "split"}, list, view),
      el("h2", {}, "Replay"), rform, jobs);
    load();
    loadJobs();
    timer = setInterval(loadJobs, 1000);
    return {node: root, unmount() { clearInterval(timer); }};
  },

  tap(name, stage) {
    return tapPage(name, stage);
  },

  journal() {
    const root = el("div", {}, el("h1", {}, "Journal"));
    const statsBox = el("div", {}), lagBox = el("div", {}), quarBox = el("div", {});
    root.append(el("h2", {}, "Replicators"), statsBox, el("h2", {}, "Replicator lag per partition"), lagBox, el("h2", {}, "Quarantined records"), quarBox);
    let info = null, timer = null;
    const plots = {};
    async function load() {
      try { info = await api("/ui/api/journal"); } catch (e) { statsBox.replaceChildren(el("p", {class: "error"}, String(e.message || e))); return; }
      const names = Object.keys(info.pipelines).sort();
      statsBox.replaceChildren(names.length ? el("table", {"data-journal": ""},
        el("thead", {}, el("tr", {}, ["pipeline", "state", "action records", "applied", "events written", "skipped", "ignored", "conflicts", "quarantined"].map(h => el("th", {}, h)))),
        el("tbody", {}, names.map(n => {
          const s = info.pipelines[n];
          const applied = s.Records - s.Skipped - s.Ignored - s.Quarantined - s.Conflicts;
          return el("tr", {}, el("td", {}, el("a", {href: "#/p/" + enc(n)}, n)), el("td", {}, stateBadge(store.status[n])),
            [s.Records, applied, s.Events, s.Skipped, s.Ignored, s.Conflicts, s.Quarantined].map(v => el("td", {class: "num"}, (v || 0).toLocaleString("en-US"))));
        }))) : el("p", {class: "muted"}, "No journal replicator pipeline (a pipeline with sink type = \"journal\") in this daemon."));
      for (const n of names) if (!plots[n]) plots[n] = lagPlot();
      if (info.quarantine_topic) {
        try {
          const q = await api("/ui/api/journal/quarantine?limit=50");
          quarBox.replaceChildren(el("p", {class: "muted"}, `${q.records.length}${q.more ? "+" : ""} in ${q.topic}`),
            q.records.length ? el("table", {"data-quarantine": ""},
              el("thead", {}, el("tr", {}, ["partition@offset", "time", "reason", "from", "key"].map(h => el("th", {}, h)))),
              el("tbody", {}, q.records.map(r => {
                const h = k => { const x = (r.headers || []).find(y => y.key === k); return x ? dataText(x.value) : ""; };
                return el("tr", {}, el("td", {class: "mono"}, r.partition + "@" + r.offset), el("td", {class: "mono", title: r.time}, shortTime(r.time)),
                  el("td", {class: "mono"}, h("journal.quarantine.reason")),
                  el("td", {class: "mono"}, h("journal.quarantine.topic") + "/" + h("journal.quarantine.partition") + "@" + h("journal.quarantine.offset")),
                  el("td", {class: "mono"}, dataText(r.key)));
              }))) : null);
        } catch (e) {
          quarBox.replaceChildren(el("p", {class: "error"}, String(e.message || e)));
        }
      } else {
        quarBox.replaceChildren(el("p", {class: "muted"}, "No quarantine_topic in [journal]: malformed records are counted, not kept."));
      }
      update();
    }
    function update() {
      if (!info) return;
      const names = Object.keys(info.pipelines).sort();
      lagBox.replaceChildren(...names.map(n => {
        const st = store.status[n] || {};
        const lag = st.lag || {};
        const keys = Object.keys(lag).sort();
        plots[n].update(n);
        return el("div", {class: "card"}, el("h3", {}, n), el("div", {class: "plots wide"}, plots[n].node),
          keys.length ? el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "topic/partition"), el("th", {}, "lag"))),
            el("tbody", {}, keys.map(k => el("tr", {}, el("td", {class: "mono"}, k), el("td", {class: "num"}, String(lag[k])))))) :
            el("p", {class: "muted"}, "No partition assigned yet."));
      }));
    }
    load();
    timer = setInterval(load, 5000);
    return {node: root, update, unmount() { clearInterval(timer); }};
  },

  fluid() {
    const root = el("div", {}, el("h1", {}, "Fluid"));
    const box = el("div", {});
    root.append(box);
    let timer = null;
    async function load() {
      let f;
      try { f = await api("/ui/api/fluid"); } catch (e) { box.replaceChildren(el("p", {class: "error"}, String(e.message || e))); return; }
      const b = f.bridge || {};
      const groups = [];
      for (const t of Object.keys(b.groups || {}).sort()) for (const g of Object.keys(b.groups[t]).sort()) groups.push([t, g, b.groups[t][g]]);
      const rep = b.republishing || [];
      const cons = Object.keys(f.consumers || {}).sort();
      box.replaceChildren(
        el("p", {}, "This instance is ", el("b", {"data-leader": b.leader ? "1" : "0"}, b.leader ? "the leader" : "not the leader"),
          " of the bridge" + (b.leader ? ": it republishes." : ": the leader republishes.")),
        el("h2", {}, "Consumer groups and their schema versions"),
        groups.length ? el("table", {"data-groups": ""}, el("thead", {}, el("tr", {}, ["topic", "group", "schema version"].map(h => el("th", {}, h)))),
          el("tbody", {}, groups.map(g => el("tr", {}, el("td", {}, g[0]), el("td", {}, g[1]), el("td", {class: "num"}, g[2]))))) :
          el("p", {class: "muted"}, "No group has registered a version."),
        el("h2", {}, "Being republished"),
        rep.length ? el("table", {"data-republishing": ""}, el("thead", {}, el("tr", {}, ["topic", "version", "downgrade topic", "observed", "running here", "records", "next (per partition)", "error"].map(h => el("th", {}, h)))),
          el("tbody", {}, rep.map(r => el("tr", {}, el("td", {}, r.topic), el("td", {class: "num"}, r.version), el("td", {class: "mono"}, r.downgrade_topic),
            el("td", {class: "num"}, r.observed), el("td", {}, r.running ? "yes" : "no"), el("td", {class: "num"}, r.records),
            el("td", {class: "mono"}, Object.keys(r.next || {}).map(k => k + ":" + r.next[k]).join(" ")), el("td", {class: "mono"}, r.error || ""))))) :
          el("p", {class: "muted"}, "Nothing is being republished: every group reads the topic itself."),
        el("h2", {}, "Fluid consumers in this daemon"),
        cons.length ? el("table", {}, el("thead", {}, el("tr", {}, ["pipeline", "topics", "group", "compatible version"].map(h => el("th", {}, h)))),
          el("tbody", {}, cons.map(n => { const c = f.consumers[n]; return el("tr", {}, el("td", {}, el("a", {href: "#/p/" + enc(n)}, n)), el("td", {}, (c.topics || []).join(", ")), el("td", {}, c.group), el("td", {class: "num"}, c.fluid_compatible_version)); }))) :
          el("p", {class: "muted"}, "None."));
    }
    load();
    timer = setInterval(load, 3000);
    return {node: root, unmount() { clearInterval(timer); }};
  },
};

// extraPages are pages other files add (broker.js): name -> page maker.
const extraPages = {};

// tapPage is replaced by the tap view where the daemon has it.
let tapPage = name => notFound("the tap of " + name);

function notFound(what) {
  return {node: el("div", {}, el("h1", {}, "Not found"), el("p", {class: "error"}, "No " + what + "."))};
}

function describeFlow(p) {
  const src = p.source.type === "kafka" ? (p.source.topics || []).join(",") : p.source.type;
  const sink = p.sink.topic ? p.sink.topic : p.sink.type;
  return [src].concat(p.stages.map(s => s.name)).concat([sink]).join(" → ");
}

// shortTime is a time of today as HH:MM:SS, else with its date.
function shortTime(iso) {
  const d = new Date(iso);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString("en-GB") : d.toLocaleString("en-GB");
}

// dataText shows a recview.Data.
function dataText(d) {
  if (!d) return "";
  if (d.null) return "null";
  let s = d.base64 !== undefined && d.base64 !== "" ? "base64:" + d.base64 : (d.text || "");
  if (d.cut) s += `…(${d.len} bytes)`;
  return s;
}

// ---- router

function route() {
  if (!store.info) return;
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  let next, nav = "overview";
  switch (parts[0]) {
    case "": next = pages.overview(); break;
    case "p": next = pages.pipeline(parts[1]); nav = ""; break;
    case "dlq": next = pages.dlq(parts[1]); nav = ""; break;
    case "tap": next = pages.tap(parts[1], parts[2]); nav = ""; break;
    case "journal": next = pages.journal(); nav = "journal"; break;
    case "fluid": next = pages.fluid(); nav = "fluid"; break;
    default: next = extraPages[parts[0]] ? extraPages[parts[0]]() : notFound("page " + location.hash); nav = parts[0];
  }
  if (page && page.unmount) page.unmount();
  page = next;
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === nav);
  $("#main").replaceChildren(page.node);
  document.body.dataset.page = parts[0] || "overview";
  if (page.update) page.update();
}

async function main() {
  try {
    store.info = await api("/ui/api/info");
  } catch (e) {
    $("#main").replaceChildren(el("p", {class: "error"}, "Cannot read /ui/api/info: " + String(e.message || e)));
    return;
  }
  store.interval = store.info.interval_ms;
  store.history = store.info.history_ms;
  $('#nav a[data-page="journal"]').hidden = !store.info.journal;
  $('#nav a[data-page="fluid"]').hidden = !store.info.fluid;
  $('#nav a[data-page="broker"]').hidden = !store.info.broker;
  window.addEventListener("hashchange", route);
  route();
  stream();
}

window.streamdConsole = {store, el, api, enc, dataText, pipeInfo, stateBadge, authHeaders, setTapPage: f => { tapPage = f; }, addPage: (name, f) => { extraPages[name] = f; }};
// tap.js (deferred after this file) registers its page before
// DOMContentLoaded, which comes after every deferred script.
document.addEventListener("DOMContentLoaded", main);
})();
