// broker.js: the embedded broker's page of the streamd console: its disk
// against its budget, the memory of its index, and what each topic retains
// (the figures of its last retention check, /ui/api/broker).
(function () {
"use strict";

const C = window.streamdConsole;
const {el, api} = C;

function bytes(n) {
  if (n < 0) return "no bound";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + u[i];
}

function dur(ms) {
  if (ms < 0) return "forever";
  if (ms < 1000) return Math.round(ms) + " ms";
  const s = ms / 1000;
  if (s < 120) return Math.round(s) + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  if (s < 172800) return (s / 3600).toFixed(1).replace(/\.0$/, "") + " h";
  return (s / 86400).toFixed(1).replace(/\.0$/, "") + " d";
}

function when(ms) {
  if (!ms) return "–";
  return new Date(ms).toLocaleString("en-GB") + " (" + dur(Date.now() - ms) + " ago)";
}

function counts(m) {
  const ks = Object.keys(m || {}).sort();
  return ks.length ? ks.map(k => k + ": " + m[k]).join(", ") : "none";
}

function page() {
  const root = el("div", {}, el("h1", {}, "Embedded broker"));
  const box = el("div", {});
  root.append(box);
  async function load() {
    let s;
    try { s = await api("/ui/api/broker"); } catch (e) { box.replaceChildren(el("p", {class: "error"}, String(e.message || e))); return; }
    if (!s.at || s.at.startsWith("0001-")) { box.replaceChildren(el("p", {class: "muted"}, "Its first retention check has not run yet.")); return; }
    const used = s.disk_budget_bytes > 0 ? s.disk_bytes / s.disk_budget_bytes : null;
    const badge = used === null ? null : used >= 1 ? el("span", {class: "state failed"}, "over budget") :
      used >= 0.8 ? el("span", {class: "state stalled"}, "near budget") : el("span", {class: "state running"}, "within budget");
    box.replaceChildren(
      el("table", {"data-broker": ""}, el("tbody", {},
        el("tr", {}, el("th", {}, "disk"), el("td", {"data-disk": String(s.disk_bytes)}, badge, " ",
          bytes(s.disk_bytes) + (used === null ? " (no budget)" : " of a " + bytes(s.disk_budget_bytes) + " budget (" + Math.round(used * 100) + "%)") +
          (used !== null && used >= 0.8 ? ": past 80% it warns, past 100% the largest partitions lose their oldest records" : ""))),
        el("tr", {}, el("th", {}, "file system free"), el("td", {}, bytes(s.filesystem_free_bytes))),
        el("tr", {}, el("th", {}, "index in memory (estimate)"), el("td", {"data-index": String(s.index_memory_bytes)}, bytes(s.index_memory_bytes))),
        el("tr", {}, el("th", {}, "segment files"), el("td", {}, String(s.segments) + " of up to " + bytes(s.segment_bytes))),
        el("tr", {}, el("th", {}, "retention (topics without their own)"), el("td", {}, dur(s.retention_ms) + ", " + bytes(s.retention_bytes) + " a partition")),
        el("tr", {}, el("th", {}, "last check"), el("td", {}, when(Date.parse(s.at)) + ", every " + dur(s.check_interval_ms))),
        s.last_error ? el("tr", {}, el("th", {}, "last error"), el("td", {}, el("span", {class: "state failed"}, "failed"), " ", s.last_error)) : null,
        el("tr", {}, el("th", {}, "data directory"), el("td", {class: "mono"}, s.data_dir)))),
      el("h2", {}, "Topics: what they retain"),
      s.topics.length ? el("table", {"data-topics": ""},
        el("thead", {}, el("tr", {}, ["topic", "retention", "records", "bytes", "oldest record", "newest record", "deleted by retention", "deleted unread (by group)", "partitions (log start..end)"].map(h => el("th", {}, h)))),
        el("tbody", {}, s.topics.map(t => {
          const unread = Object.values(t.skipped_records || {}).reduce((a, b) => a + b, 0);
          return el("tr", {"data-topic": t.topic},
            el("td", {class: "mono"}, t.topic),
            el("td", {}, t.compacted ? "compacted" : dur(t.retention_ms) + ", " + bytes(t.retention_bytes)),
            el("td", {class: "num"}, String(t.records)),
            el("td", {class: "num"}, bytes(t.bytes)),
            el("td", {}, when(t.oldest_timestamp_ms)),
            el("td", {}, when(t.newest_timestamp_ms)),
            el("td", {}, counts(t.deleted_records)),
            el("td", {"data-unread": String(unread)}, unread ? el("span", {class: "state failed"}, String(unread)) : null, " ", counts(t.skipped_records)),
            el("td", {class: "mono"}, t.partitions.map(p => p.partition + ": " + p.log_start_offset + ".." + p.log_end_offset).join("  ")));
        }))) :
        el("p", {class: "muted"}, "No topics yet."));
  }
  load();
  const timer = setInterval(load, 5000);
  return {node: root, unmount() { clearInterval(timer); }};
}

// The nav link shows where the daemon runs an embedded broker (app.js, from
// /ui/api/info).
C.addPage("broker", page);
})();
