// plot.js: small SVG time-series plots for the streamd console (no library).
(function () {
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// fmtNum formats a number for a label: 1234.5 -> "1,235", 12.34 -> "12.3", 0.25 -> "0.25".
function fmtNum(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 1 : 2) + "M";
  if (a >= 100) return Math.round(v).toLocaleString("en-US");
  if (a >= 10) return v.toFixed(1);
  if (a === 0) return "0";
  return v.toFixed(2);
}

// drawPlot draws series into svg: each {name, cls, color, points: [[tMillis, value|null], ...]}
// over the window [now-windowMs, now]. Null values leave gaps.
function drawPlot(svg, series, now, windowMs) {
  // Drawn at the element's size, so that text is not stretched.
  const W = Math.max(120, Math.round(svg.clientWidth || 400)), H = Math.max(60, Math.round(svg.clientHeight || 110));
  const L = 40, R = 8, T = 6, B = 16;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  let max = 0;
  for (const s of series) for (const p of s.points) if (p[1] !== null && p[0] >= now - windowMs && p[1] > max) max = p[1];
  const top = niceMax(max);
  const x = t => L + (W - L - R) * (1 - (now - t) / windowMs);
  const y = v => T + (H - T - B) * (1 - v / top);
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4;
    svg.appendChild(svgEl("line", {class: i ? "grid" : "axis", x1: L, x2: W - R, y1: y(v), y2: y(v)}));
    if (i % 2 === 0) {
      const tx = svgEl("text", {x: L - 4, y: y(v) + 3, "text-anchor": "end"});
      tx.textContent = fmtNum(v);
      svg.appendChild(tx);
    }
  }
  const mins = windowMs / 60000;
  const step = mins > 10 ? 5 : mins > 4 ? 1 : mins > 1 ? 0.5 : 0.25;
  for (let m = 0; m <= mins + 1e-9; m += step) {
    const t = now - m * 60000;
    svg.appendChild(svgEl("line", {class: "grid", x1: x(t), x2: x(t), y1: T, y2: H - B}));
    const tx = svgEl("text", {x: Math.min(Math.max(x(t), L + 10), W - R - 10), y: H - 4, "text-anchor": "middle"});
    tx.textContent = m === 0 ? "now" : m < 1 ? "-" + Math.round(m * 60) + "s" : "-" + m + "m";
    svg.appendChild(tx);
  }
  for (const s of series) {
    let d = "", pen = false;
    for (const p of s.points) {
      if (p[0] < now - windowMs) continue;
      if (p[1] === null) { pen = false; continue; }
      d += (pen ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1);
      pen = true;
    }
    const path = svgEl("path", {d: d, fill: "none", stroke: s.color, "stroke-width": 1.6, "stroke-linejoin": "round", "data-series": s.name});
    svg.appendChild(path);
  }
  svg.setAttribute("data-now", String(now));
  svg.setAttribute("data-max", String(max));
}

// windowFor is the span a plot shows: the history kept so far, at least
// two minutes, at most the whole history.
function windowFor(first, now, historyMs) {
  if (!first) return Math.min(120000, historyMs);
  return Math.min(historyMs, Math.max(120000, Math.ceil((now - first) / 60000) * 60000));
}

// recent returns the mean of the values of points within the last spanMs before now, or null.
function recent(points, now, spanMs) {
  let sum = 0, n = 0;
  for (let i = points.length - 1; i >= 0 && points[i][0] > now - spanMs; i--) {
    if (points[i][1] === null) continue;
    sum += points[i][1]; n++;
  }
  return n ? sum / n : null;
}

window.streamdPlot = {drawPlot, recent, fmtNum, windowFor};
})();
