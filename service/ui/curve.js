/* The tuning curve as inline SVG: best-so-far GFLOPS against trials (a step line), every measurement
   as a dot, failed trials as red crosses on the bottom band. Pure function of the trials list. */
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

/* Round steps for axis ticks: 1, 2, 5 x 10^k. */
function niceTicks(max, count) {
  if (!(max > 0)) return [0];
  const raw = max / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const ticks = [];
  for (let v = 0; v <= max + step * 1e-9; v += step) ticks.push(v);
  return ticks;
}

function fmtTick(v) {
  return Number.isInteger(v) || v >= 100 ? v.toFixed(0) : String(Number(v.toPrecision(3)));
}

/**
 * trials: [{trial, status, gflops, worker, error}] in completion order; budget: the trial budget.
 * Returns an <svg> element with data-points (dots drawn) and data-failures for tests.
 */
function drawCurve(trials, budget) {
  const W = 880, H = 350, m = { l: 58, r: 18, t: 36, b: 62 };
  const failBand = 18; // failures are drawn in a band under the x axis
  const pw = W - m.l - m.r, ph = H - m.t - m.b - failBand;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, class: "curve", role: "img",
    "aria-label": "tuning curve: best-so-far GFLOPS against trials" });

  const ok = trials.filter((t) => t.status === "ok" && t.gflops);
  const failed = trials.filter((t) => !(t.status === "ok" && t.gflops));
  const xMax = Math.max(budget || 0, trials.length, 1);
  const yTop = Math.max(...ok.map((t) => t.gflops), 1) * 1.08;
  const ticksY = niceTicks(yTop, 5);
  const yMax = Math.max(ticksY[ticksY.length - 1], yTop);
  const x = (n) => m.l + (n / xMax) * pw;
  const y = (g) => m.t + ph - (g / yMax) * ph;

  // grid and axes
  for (const v of ticksY) {
    svg.append(svgEl("line", { x1: m.l, x2: m.l + pw, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(svgEl("text", { x: m.l - 8, y: y(v) + 4, class: "tick", "text-anchor": "end" }, fmtTick(v)));
  }
  for (const v of niceTicks(xMax, 8)) {
    svg.append(svgEl("text", { x: x(v), y: m.t + ph + failBand + 18, class: "tick", "text-anchor": "middle" },
      fmtTick(v)));
    svg.append(svgEl("line", { x1: x(v), x2: x(v), y1: m.t + ph, y2: m.t + ph + 4, class: "axis" }));
  }
  svg.append(svgEl("rect", { x: m.l, y: m.t + ph + 2, width: pw, height: failBand - 4, class: "failband" }));
  svg.append(svgEl("line", { x1: m.l, x2: m.l + pw, y1: m.t + ph, y2: m.t + ph, class: "axis" }));
  svg.append(svgEl("line", { x1: m.l, x2: m.l, y1: m.t, y2: m.t + ph, class: "axis" }));
  svg.append(svgEl("text", { x: m.l + pw / 2, y: H - 14, class: "label", "text-anchor": "middle" }, "trials"));
  svg.append(svgEl("text", { x: 14, y: m.t + ph / 2, class: "label", "text-anchor": "middle",
    transform: `rotate(-90 14 ${m.t + ph / 2})` }, "GFLOPS"));
  svg.append(svgEl("text", { x: m.l - 8, y: m.t + ph + failBand - 5, class: "tick fail-label", "text-anchor": "end" },
    "failed"));

  // every measurement
  const dots = svgEl("g", { class: "dots" });
  for (const t of ok) {
    const c = svgEl("circle", { cx: x(t.trial), cy: y(t.gflops), r: 2.6, class: "dot" });
    c.append(svgEl("title", {}, `trial ${t.trial}: ${t.gflops.toFixed(1)} GFLOPS (${t.worker})`));
    dots.append(c);
  }
  svg.append(dots);
  const crosses = svgEl("g", { class: "failures" });
  const fy = m.t + ph + failBand / 2;
  for (const t of failed) {
    const g = svgEl("g", { class: "fail" });
    const cx = x(t.trial), s = 3.2;
    g.append(svgEl("line", { x1: cx - s, y1: fy - s, x2: cx + s, y2: fy + s }));
    g.append(svgEl("line", { x1: cx - s, y1: fy + s, x2: cx + s, y2: fy - s }));
    g.append(svgEl("title", {}, `trial ${t.trial}: ${t.status}${t.error ? " - " + t.error : ""}`));
    crosses.append(g);
  }
  svg.append(crosses);

  // best so far, as a step line from the first success to the last trial
  let best = 0, d = "";
  for (const t of trials) {
    if (t.status === "ok" && t.gflops > best) {
      d += d ? ` H${x(t.trial).toFixed(1)} V${y(t.gflops).toFixed(1)}` : `M${x(t.trial).toFixed(1)} ${y(t.gflops).toFixed(1)}`;
      best = t.gflops;
    }
  }
  if (d) {
    d += ` H${x(trials[trials.length - 1].trial).toFixed(1)}`;
    svg.append(svgEl("path", { d, class: "best" }));
  }

  // legend
  const lg = svgEl("g", { class: "legend", transform: `translate(${m.l + pw - 320}, 6)` });
  lg.append(svgEl("rect", { x: -6, y: -4, width: 330, height: 22, rx: 4, class: "legend-bg" }));
  lg.append(svgEl("line", { x1: 0, x2: 18, y1: 7, y2: 7, class: "best" }));
  lg.append(svgEl("text", { x: 24, y: 11, class: "tick" }, "best so far"));
  lg.append(svgEl("circle", { cx: 112, cy: 7, r: 3, class: "dot" }));
  lg.append(svgEl("text", { x: 120, y: 11, class: "tick" }, "measurement"));
  const f = svgEl("g", { class: "fail" });
  f.append(svgEl("line", { x1: 216, y1: 4, x2: 222, y2: 10 }));
  f.append(svgEl("line", { x1: 216, y1: 10, x2: 222, y2: 4 }));
  lg.append(f);
  lg.append(svgEl("text", { x: 228, y: 11, class: "tick" }, "failed trial"));
  svg.append(lg);

  svg.dataset.points = String(trials.length);
  svg.dataset.ok = String(ok.length);
  svg.dataset.failures = String(failed.length);
  return svg;
}

window.drawCurve = drawCurve;
