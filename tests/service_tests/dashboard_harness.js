/* Renders one page of the dashboard (service/ui/app.js, curve.js) in node, over a minimal DOM and a
   fetch that answers from recorded API responses, and prints the rendered page as JSON:
   {"text": all text, "ids": {id: text}, "rows": [{table id, data-*, cells: {data-col: text}}],
    "badges": [...], "details": [{summary, body}]}.
   Usage: node dashboard_harness.js UI_DIR FIXTURE.json   (fixture: {"hash": "#/...", "responses": {path: body}}) */
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");

const [uiDir, fixtureFile] = process.argv.slice(2);
const fixture = JSON.parse(fs.readFileSync(fixtureFile, "utf8"));

class Node_ {
  constructor() { this.childNodes = []; this.parent = null; }
  get textContent() { return this.childNodes.map((c) => c.textContent).join(""); }
  set textContent(v) { this.childNodes = [new Text_(String(v))]; }
}
class Text_ extends Node_ {
  constructor(text) { super(); this.text = text; }
  get textContent() { return this.text; }
}
class Element_ extends Node_ {
  constructor(tag) {
    super();
    this.tagName = tag.toUpperCase(); this.attributes = {}; this.dataset = {}; this.className = ""; this.hidden = false;
    this.classList = { toggle: () => {}, add: () => {}, remove: () => {} }; this.style = {};
  }
  get id() { return this.attributes.id; }
  setAttribute(k, v) { this.attributes[k] = String(v); }
  getAttribute(k) { return this.attributes[k]; }
  addEventListener() {}
  append(...nodes) { for (const n of nodes) { n.parent = this; this.childNodes.push(n); } }
  appendChild(n) { this.append(n); return n; }
  replaceChildren(...nodes) { this.childNodes = []; this.append(...nodes); }
  showModal() { this.open = true; }
  walk(visit) { visit(this); for (const c of this.childNodes) if (c instanceof Element_) c.walk(visit); }
}

const fixed = {};
for (const id of ["view", "status", "token-dialog", "token-error", "token-form", "token-input", "signout"]) {
  fixed[id] = new Element_("div");
  fixed[id].setAttribute("id", id);
}
const document = {
  hidden: false,
  createElement: (tag) => new Element_(tag),
  createElementNS: (_ns, tag) => new Element_(tag),
  createTextNode: (text) => new Text_(text),
  getElementById: (id) => fixed[id] || null,
  querySelectorAll: () => [],
  addEventListener: () => {},
};
const store = {};
const context = {
  document, console, JSON, Promise, Object, Array, String, Number, Math, Date, Set, Map, Error, URL, URLSearchParams,
  Node: Node_, setTimeout: () => 0, clearTimeout: () => {},
  location: { hash: fixture.hash, origin: "http://dashboard.test" },
  sessionStorage: { getItem: (k) => store[k] || null, setItem: (k, v) => { store[k] = v; }, removeItem: (k) => { delete store[k]; } },
  fetch: async (url) => {
    const { pathname } = new URL(url);
    const body = fixture.responses[pathname];
    if (body === undefined) return { ok: false, status: 404, statusText: "no fixture", json: async () => ({ detail: `no fixture for ${pathname}` }) };
    return { ok: true, status: 200, json: async () => body };
  },
};
context.window = context;
context.addEventListener = () => {};
vm.createContext(context);
for (const file of ["curve.js", "app.js"]) {
  vm.runInContext(fs.readFileSync(path.join(uiDir, file), "utf8"), context, { filename: file });
}

setImmediate(async () => {
  for (let i = 0; i < 50; i += 1) await new Promise((r) => setImmediate(r)); // let the page's awaits settle
  const view = fixed.view;
  const out = { status: fixed.status.textContent, text: view.textContent, ids: {}, rows: [], badges: [], details: [] };
  view.walk((el) => {
    if (el.id) out.ids[el.id] = el.textContent;
    if (el.className && el.className.split(" ").includes("badge")) out.badges.push({ text: el.textContent, title: el.attributes.title || null });
    if (el.tagName === "DETAILS") {
      const [summary, ...body] = el.childNodes;
      out.details.push({ id: el.id || null, summary: summary.textContent, body: body.map((b) => b.textContent).join("") });
    }
    if (el.tagName === "TABLE" && el.id) {
      el.walk((tr) => {
        if (tr.tagName !== "TR" || !Object.keys(tr.dataset).length) return;
        const cells = {};
        for (const td of tr.childNodes) if (td.dataset && td.dataset.col) cells[td.dataset.col] = td.textContent;
        out.rows.push({ table: el.id, data: { ...tr.dataset }, cells });
      });
    }
  });
  process.stdout.write(JSON.stringify(out));
  process.exit(0);
});
