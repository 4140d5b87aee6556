/* The swtune dashboard: hash-routed pages over the JSON API, refreshed by polling. DOM is built with
   textContent only (labels and errors come from users and workers: never parsed as HTML). */
"use strict";

const API = "/api/v1";
const POLL_MS = 2000;
const TOKEN_KEY = "swtune.token";

// ---- DOM and formatting helpers ----------------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const fmt = {
  ms: (s) => (s === null || s === undefined ? "-" : (s * 1e3).toFixed(s * 1e3 >= 100 ? 1 : 3)),
  gflops: (g) => (g === null || g === undefined ? "-" : g.toFixed(1)),
  // a memory-bound task's rate is GB/s (it moves, it hardly computes); the others' GFLOPS
  rate: (gflops, gbps) => (gbps === null || gbps === undefined ? fmt.gflops(gflops) : `${gbps.toFixed(1)} GB/s`),
  speedup: (x) => (x === null || x === undefined ? "-" : x.toFixed(2) + "x"),
  ago(iso, now) {
    if (!iso) return "-";
    const s = Math.max(0, ((now ? Date.parse(now) : Date.now()) - Date.parse(iso)) / 1000);
    if (s < 90) return `${s.toFixed(0)} s ago`;
    if (s < 5400) return `${(s / 60).toFixed(0)} min ago`;
    return `${(s / 3600).toFixed(1)} h ago`;
  },
  time: (iso) => (iso ? new Date(iso).toLocaleString() : "-"),
};

function workloadText(w) {
  if (!w) return "";
  const skip = new Set(["op", "dtype", "dil_h", "dil_w", "groups", "stride_h", "stride_w", "pad_h", "pad_w"]);
  const dims = Object.entries(w).filter(([k]) => !skip.has(k)).map(([k, v]) => `${k}${v}`).join(" ");
  const extra = w.op === "conv2d" ? ` stride${w.stride_h} pad${w.pad_h}${w.groups > 1 ? " groups" + w.groups : ""}` : "";
  return `${w.op} ${dims}${extra} ${w.dtype}`;
}

// A task's workload in a table cell: the short name (op, shapes, dtype). Kinds whose spec carries a
// script (CPE kernels, expressions) show the server's workload_label; the script is on the task's page.
function workloadCell(t) {
  const w = t.workload || {};
  const text = w.script ? t.workload_label || `${w.op} ${w.name || ""}` : workloadText(w);
  return h("span", { class: "mono workload", title: t.workload_key }, text);
}

function badge(state) {
  return h("span", { class: `badge state-${state}` }, state);
}

// A task's state, and "untuned" beside it when it ended without any successful measurement.
function stateBadges(t) {
  const untuned = t.untuned_reason ? [" ", h("span", { class: "badge state-untuned", title: t.untuned_reason }, "untuned")] : [];
  return [badge(t.state), ...untuned]; // flat: h() flattens its children one level only
}

function progress(done, total) {
  const pct = total ? Math.min(100, (100 * done) / total) : 0;
  return h("div", { class: "progress", title: `${done} / ${total}` },
    h("div", { class: "bar", style: `width:${pct.toFixed(1)}%` }),
    h("span", {}, `${done} / ${total}`));
}

function table(columns, rows, attrs) {
  return h("table", attrs || {},
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : "" }, c.title)))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: columns.length, class: "empty" }, "nothing yet"))));
}

function row(attrs, cells) {
  return h("tr", attrs, cells.map(([col, value, num]) => h("td", { dataset: { col }, class: num ? "num" : "" }, value)));
}

function configTable(config) {
  if (!config) return h("p", { class: "muted" }, "no successful measurement yet");
  return h("table", { class: "kv" }, h("tbody", {}, Object.entries(config).map(([k, v]) =>
    h("tr", {}, h("th", {}, k), h("td", {}, typeof v === "object" ? JSON.stringify(v) : String(v))))));
}

function card(title, value, sub) {
  return h("div", { class: "card" }, h("div", { class: "card-title" }, title), h("div", { class: "card-value" }, value),
    sub ? h("div", { class: "card-sub" }, sub) : null);
}

// ---- API access with the session's token ---------------------------------------------------------
class ApiError extends Error {
  constructor(status, detail) {
    super(`HTTP ${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
  }
}

async function api(path, params) {
  const url = new URL(path.startsWith("/") ? path : `${API}/${path}`, location.origin);
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  const token = sessionStorage.getItem(TOKEN_KEY);
  const response = await fetch(url, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  if (response.ok) return response.json();
  let detail = response.statusText;
  try {
    const body = await response.json();
    // FastAPI answers {"detail": "..."} or {"detail": [{"loc": [...], "msg": "..."}]}
    detail = Array.isArray(body.detail) ? body.detail.map((e) => e.msg || JSON.stringify(e)).join("; ")
      : body.detail || detail;
  } catch (_) { /* not JSON */ }
  if (response.status === 401) askToken(token ? `the token was refused: ${detail}` : "");
  throw new ApiError(response.status, detail);
}

function askToken(error) {
  const dialog = document.getElementById("token-dialog");
  document.getElementById("token-error").textContent = error || "";
  if (!dialog.open) dialog.showModal();
}

function setupToken() {
  const form = document.getElementById("token-form");
  form.addEventListener("submit", () => {
    const value = document.getElementById("token-input").value.trim();
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    document.getElementById("token-input").value = "";
    showSignout();
    route();
  });
  document.getElementById("signout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showSignout();
    route();
  });
  showSignout();
}

function showSignout() {
  document.getElementById("signout").hidden = !sessionStorage.getItem(TOKEN_KEY);
}

// ---- pages: async (view, params, arg) => fill the view ---------------------------------------------
const pages = {};
let lastSignature = null;

/* True when a poll brought the same data as the last render (re-rendered anyway every 10 s for the
   "s ago" columns): the page is then left alone, so hover tooltips and text selection survive. */
function unchanged(data) {
  const signature = JSON.stringify(data) + Math.floor(Date.now() / 10000);
  if (signature === lastSignature) return true;
  lastSignature = signature;
  return false;
}

pages.tasks = async function (view, params) {
  const state = params.get("state") || "";
  const tasks = await api("tasks", { limit: 1000, state });
  if (unchanged(tasks)) return;
  tasks.sort((a, b) => b.id - a.id); // newest first
  const active = tasks.filter((t) => t.state === "active");
  const done = tasks.reduce((n, t) => n + t.trials_done, 0);
  const budget = tasks.reduce((n, t) => n + t.trial_budget, 0);
  const filter = h("select", { id: "state-filter", onchange: (e) => { location.hash = e.target.value ? `#/?state=${e.target.value}` : "#/"; } },
    ["", "active", "done", "cancelled"].map((s) => h("option", { value: s, selected: s === state }, s || "all states")));
  view.replaceChildren(
    h("div", { class: "page-head" }, h("h1", {}, "Tuning tasks"), filter),
    h("div", { class: "cards" }, card("tasks", String(tasks.length), state ? `state ${state}` : "all states"),
      card("active", String(active.length)), card("trials done", `${done}`, `of ${budget} budgeted`)),
    table([{ title: "id" }, { title: "label" }, { title: "workload" }, { title: "target" }, { title: "state" },
      { title: "progress" }, { title: "best ms", num: true }, { title: "GFLOPS | GB/s", num: true }, { title: "failed", num: true }],
      tasks.map((t) => row({ dataset: { taskId: t.id } }, [
        ["id", h("a", { href: `#/task/${t.id}` }, String(t.id))],
        ["label", t.label || "-"],
        ["workload", workloadCell(t)],
        ["target", t.target],
        ["state", stateBadges(t)],
        ["trials", progress(t.trials_done, t.trial_budget)],
        ["best_ms", fmt.ms(t.best_time), true],
        ["gflops", fmt.rate(t.best_gflops, t.best_gbps), true],
        ["failed", String(t.failed), true],
      ])), { id: "tasks-table", class: "data" }));
};

pages.task = async function (view, params, id) {
  const [task, trials] = await Promise.all([api(`tasks/${id}`), api(`tasks/${id}/trials`)]);
  if (unchanged([task, trials])) return;
  const failures = trials.trials.filter((t) => t.status !== "ok").slice(-8).reverse();
  view.replaceChildren(
    h("div", { class: "page-head" },
      h("h1", {}, `Task ${task.id}`, task.label ? ` · ${task.label}` : ""), stateBadges(task)),
    h("p", { class: "mono", id: "task-workload" }, workloadCell(task)),
    h("p", { class: "mono muted" }, `${task.workload_key} on ${task.target} · strategy ${task.strategy} · seed ${task.seed}` +
      (task.batch ? " · " : ""), task.batch ? h("a", { href: `#/submission/${task.batch}` }, "submission") : null),
    task.untuned_reason ? h("p", { class: "warn", id: "untuned-reason" }, `${task.untuned_reason}: its workload runs untuned`) : null,
    h("details", { id: "workload-spec" }, h("summary", {}, task.workload.script ? "script (TVMScript)" : "workload spec (JSON)"),
      h("pre", { class: "mono small" }, task.workload.script || JSON.stringify(task.workload, null, 2))),
    h("div", { class: "cards" },
      card("best time", `${fmt.ms(task.best_time)} ms`),
      task.best_gbps == null ? card("best GFLOPS", fmt.gflops(task.best_gflops)) : card("best GB/s", task.best_gbps.toFixed(1)),
      card("trials", `${task.trials_done} / ${task.trial_budget}`, `${task.pending} pending · ${task.leased} leased`),
      card("failed trials", String(trials.trials.filter((t) => t.status !== "ok").length))),
    h("section", { class: "panel" }, h("h2", {}, "Tuning curve"), h("div", { id: "curve" }, drawCurve(trials.trials, task.trial_budget))),
    h("div", { class: "two" },
      h("section", { class: "panel" }, h("h2", {}, "Best config"), configTable(task.best_config)),
      h("section", { class: "panel" }, h("h2", {}, "Measurements per worker"),
        table([{ title: "worker" }, { title: "trials", num: true }, { title: "ok", num: true }, { title: "failed", num: true },
          { title: "best ms", num: true }, { title: "last" }],
          trials.workers.map((w) => row({ dataset: { worker: w.worker } }, [
            ["worker", h("span", { class: "mono" }, w.worker || "-")], ["trials", String(w.trials), true],
            ["ok", String(w.ok), true], ["failed", String(w.failed), true], ["best_ms", fmt.ms(w.best_time), true],
            ["last", fmt.ago(w.last_at)]])), { id: "worker-table", class: "data" }),
        h("h2", {}, "Latest failures"),
        failures.length ? h("ul", { class: "failures-list" }, failures.map((f) =>
          h("li", {}, h("b", {}, `trial ${f.trial} · ${f.status}`), f.worker ? ` (${f.worker})` : "", f.error ? h("div", { class: "mono muted" }, f.error) : null)))
          : h("p", { class: "muted" }, "none"))));
};

pages.submissions = async function (view) {
  const subs = await api("submissions");
  if (unchanged(subs)) return;
  view.replaceChildren(
    h("div", { class: "page-head" }, h("h1", {}, "Submissions")),
    h("p", { class: "muted" }, "Tasks grouped by the request that created them: a model (one trial budget for all " +
      "its layers), or a list of workloads (a budget each)."),
    table([{ title: "submission" }, { title: "model" }, { title: "layers" }, { title: "target" }, { title: "tasks", num: true },
      { title: "states" }, { title: "progress" }, { title: "submitted" }],
      subs.map((s) => row({ dataset: { batch: s.batch } }, [
        ["batch", h("a", { href: `#/submission/${s.batch}`, class: "mono" }, s.batch)],
        ["model", s.model ? h("span", {}, s.model, " ", badge(s.state)) : h("span", { class: "muted" }, "-")],
        ["labels", h("span", { title: s.labels.join(", ") }, s.labels.filter(Boolean).slice(0, 6).join(", ") + (s.labels.length > 6 ? ", ..." : "") || "-")],
        ["target", s.target], ["tasks", String(s.tasks), true],
        ["states", Object.entries(s.states).map(([k, n]) => h("span", { class: `badge state-${k}` }, `${n} ${k}`))],
        ["progress", progress(s.trials_done, s.trial_budget)], ["submitted", fmt.time(s.created_at)]])),
      { id: "submissions-table", class: "data" }));
};

pages.submission = async function (view, params, batch) {
  const s = await api(`submissions/${encodeURIComponent(batch)}`);
  if (unchanged(s)) return;
  view.replaceChildren(
    h("div", { class: "page-head" }, h("h1", {}, s.model ? `${s.model} ` : "Submission ", h("span", { class: "mono" }, s.batch),
      s.state ? [" ", badge(s.state)] : null)),
    h("p", { class: "muted" }, `${s.tasks} tasks (${s.calls} layer calls per run) on ${s.target}` +
      (s.submitter ? ` · submitted by ${s.submitter}` : "") + ` · ${fmt.time(s.created_at)}`),
    h("div", { class: "cards" },
      card("end-to-end estimate", `${fmt.ms(s.tuned_total)} ms`, `baseline ${fmt.ms(s.baseline_total)} ms`),
      card("speedup vs baseline", fmt.speedup(s.speedup), s.untuned ? `${s.untuned} layer(s) not tuned yet, at baseline` : "every layer tuned"),
      card(s.model ? "budget (whole model)" : "trials", `${s.trials_done} / ${s.trial_budget}`)),
    table([{ title: "layer" }, { title: "workload" }, { title: "calls", num: true }, { title: "state" },
      { title: s.model ? "trials (granted)" : "progress" }, { title: "baseline ms", num: true }, { title: "tuned ms", num: true },
      { title: "speedup", num: true }, { title: "share", num: true }, { title: "GFLOPS | GB/s", num: true }],
      s.layers.map((l) => row({ dataset: { taskId: l.task_id } }, [
        ["label", h("a", { href: `#/task/${l.task_id}`, title: l.layer_names.join(", ") }, l.label || `task ${l.task_id}`)],
        ["workload", workloadCell(l)],
        ["calls", String(l.call_count), true], ["state", stateBadges(l)],
        ["progress", progress(l.trials_done, l.trial_budget)], ["baseline_ms", fmt.ms(l.baseline_time), true],
        ["tuned_ms", fmt.ms(l.tuned_time), true], ["speedup", fmt.speedup(l.speedup), true],
        ["share", l.share === null ? "-" : `${(100 * l.share).toFixed(1)}%`, true],
        ["gflops", fmt.rate(l.gflops, l.gbps), true]])), { id: "layers-table", class: "data" }),
    h("p", { class: "muted note" }, "Baseline: the OpenACC-like schedule (outer loop over the CPEs, fine-grained DMA) on the " +
      "simulator, per call. Tuned: the best of this submission's trials, per call. The end-to-end estimate sums each " +
      "tuned operator times the number of times the model calls it (share: of that sum); untuned operators (pools, " +
      "element-wise) are not included. A model's tasks share one trial budget: the driver grants rounds to the layers " +
      "that weigh most in the end-to-end time."));
};

pages.workers = async function (view) {
  const [workers, leases] = await Promise.all([api("workers"), api("workers/leases")]);
  const held = Object.fromEntries(leases.leases.map((l) => [l.worker, l]));
  const now = leases.database_time;
  view.replaceChildren(
    h("div", { class: "page-head" }, h("h1", {}, "Workers")),
    h("div", { class: "cards" }, card("workers", String(workers.length)),
      card("holding leases", String(leases.leases.length)),
      card("jobs leased now", String(leases.leases.reduce((n, l) => n + l.jobs, 0)))),
    table([{ title: "worker" }, { title: "target" }, { title: "backend" }, { title: "leased now", num: true },
      { title: "tasks" }, { title: "lease expires" }, { title: "last heartbeat" }, { title: "jobs leased (total)", num: true }],
      workers.map((w) => {
        const l = held[w.name];
        const expires = l && l.next_expiry ? Math.round((Date.parse(l.next_expiry) - Date.parse(now)) / 1000) : null;
        return row({ dataset: { worker: w.name } }, [
          ["name", h("span", { class: "mono" }, w.name)], ["target", w.target], ["backend", w.backend || "-"],
          ["leased", String(l ? l.jobs : 0), true],
          ["tasks", l ? l.task_ids.map((id, i) => [i ? ", " : "", h("a", { href: `#/task/${id}` }, String(id))]) : "-"],
          ["expires", expires === null ? "-" : expires >= 0 ? `in ${expires} s` : `${-expires} s overdue`],
          ["seen", fmt.ago(w.last_seen_at, now)], ["total", String(w.jobs_leased), true]]);
      }), { id: "workers-table", class: "data" }));
};

pages.lookup = async function (view, params) {
  const targets = await api("targets");
  const out = h("div", { id: "lookup-result" });
  const text = h("textarea", { id: "lookup-workload", rows: 4, spellcheck: "false",
    placeholder: '{"op": "dense", "m": 1, "n": 4096, "k": 9216} or a workload key' });
  text.value = params.get("w") || "";
  const target = h("select", { id: "lookup-target" },
    targets.map((t) => h("option", { value: t.name, title: t.description, selected: t.name === params.get("target") }, t.name)));
  async function run(event) {
    if (event) event.preventDefault();
    const spec = text.value.trim();
    if (!spec) return;
    out.replaceChildren(h("p", { class: "muted" }, "looking up ..."));
    try {
      const key = spec.startsWith("{") ? (await api("workloads/key", { workload: spec, target: target.value })).key : spec;
      let best;
      try {
        best = await api("schedules/best", { workload_key: key, target: target.value });
      } catch (e) {
        if (e.status !== 404) throw e;
        out.replaceChildren(h("p", { class: "error" }, e.detail));
        return;
      }
      out.replaceChildren(
        h("div", { class: "cards" }, card("best time", `${fmt.ms(best.mean_time)} ms`, `${best.times.length} run(s)`),
          // a simulated time under a fitted profile: the range its parameter uncertainty leaves
          ...(best.interval_s ? [card("95% interval", `${fmt.ms(best.interval_s[0])} - ${fmt.ms(best.interval_s[1])} ms`,
            `simulator profile version ${best.profile_version}`)] : []),
          card("GFLOPS", fmt.gflops(best.gflops)), card("measured by", best.worker || "-", `${best.source} · ${fmt.time(best.measured_at)}`)),
        h("p", { class: "mono small" }, `${best.workload_key} · ${best.target} · config ${best.config_hash}`),
        h("section", { class: "panel" }, h("h2", {}, "Config"), configTable(best.config)));
    } catch (e) {
      out.replaceChildren(h("p", { class: "error" }, e.detail || String(e)));
    }
  }
  view.replaceChildren(
    h("div", { class: "page-head" }, h("h1", {}, "Best schedule lookup")),
    h("p", { class: "muted" }, "What a compiler gets at compile time: the fastest successful config of a workload on a target."),
    h("form", { class: "lookup", onsubmit: run }, h("label", {}, "Workload (JSON spec or key)", text),
      h("label", {}, "Target", target), h("button", { type: "submit", class: "primary" }, "Look up")),
    out);
  if (text.value) run();
};

// ---- router and polling --------------------------------------------------------------------------
const POLLED = new Set(["tasks", "task", "submissions", "submission", "workers"]);
let timer = null;
let generation = 0;

function parseHash() {
  const [path, query] = (location.hash.replace(/^#/, "") || "/").split("?");
  const parts = path.split("/").filter(Boolean);
  return { name: parts[0] || "tasks", arg: parts[1] ? decodeURIComponent(parts[1]) : undefined,
    params: new URLSearchParams(query || "") };
}

async function render(gen, first) {
  const { name, arg, params } = parseHash();
  const page = pages[name] || pages.tasks;
  const view = document.getElementById("view");
  const status = document.getElementById("status");
  try {
    if (first) view.replaceChildren(h("p", { class: "muted" }, "loading ..."));
    await page(view, params, arg);
    if (gen !== generation) return;
    status.textContent = POLLED.has(name) ? `live · updated ${new Date().toLocaleTimeString()}` : "";
    status.className = POLLED.has(name) ? "status ok" : "status";
  } catch (e) {
    if (gen !== generation) return;
    status.textContent = e.status === 401 ? "token needed" : `error: ${e.detail || e.message}`;
    status.className = "status bad";
    if (first && e.status !== 401) view.replaceChildren(h("p", { class: "error" }, e.detail || e.message));
  }
  if (gen === generation && POLLED.has(name)) timer = setTimeout(() => poll(gen), POLL_MS);
}

/* A tab in the background asks nothing of the server; it refreshes as soon as it is shown again. */
function poll(gen) {
  if (document.hidden) {
    document.addEventListener("visibilitychange", () => { if (gen === generation) render(gen, false); }, { once: true });
    return;
  }
  render(gen, false);
}

function route() {
  clearTimeout(timer);
  generation += 1;
  lastSignature = null;
  const { name } = parseHash();
  for (const a of document.querySelectorAll("nav a")) {
    const nav = a.dataset.nav;
    a.classList.toggle("active", nav === name || (nav === "tasks" && name === "task") || (nav === "submissions" && name === "submission"));
  }
  render(generation, true);
}

window.addEventListener("hashchange", route);
setupToken();
route();
