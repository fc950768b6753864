// modelgraph HTML view: pan/zoom over a Graphviz SVG, search, a layer panel, nested models that open
// in place. Written for this page; no libraries. Strings from the model file reach the page only as
// text nodes (textContent), never as markup.
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("modelgraph-data").textContent);
  const LAYERS = DATA.layers;
  const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

  // --- small helpers ---------------------------------------------------------------------------
  function visible(s) {
    return String(s).replace(INVISIBLE, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  }
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = visible(v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const kid of kids) if (kid != null && kid !== false) e.append(kid instanceof Node ? kid : visible(kid));
    return e;
  }
  function fmtInt(n) { return n == null ? "?" : Number(n).toLocaleString("en-US"); }
  function human(n) {
    if (n == null) return "?";
    for (const [u, s] of [["G", 1e9], ["M", 1e6], ["K", 1e3]]) if (n >= s) return (n / s).toFixed(2) + u;
    return Number.isInteger(n) ? String(n) : fmtNum(n);
  }
  function fmtNum(x) {
    if (x == null) return "";
    if (typeof x === "string") return x;
    const a = Math.abs(x);
    return a !== 0 && (a < 1e-3 || a >= 1e5) ? x.toExponential(3) : x.toPrecision(4).replace(/\.?0+$/, "");
  }
  function shapeText(s) {
    if (s == null) return "?";
    if (!Array.isArray(s)) return String(s);
    const inner = s.map((d) => (d == null ? "None" : String(d))).join(", ");
    return s.length === 1 ? "(" + inner + ",)" : "(" + inner + ")";
  }
  function pathText(i) { return LAYERS[i].path.join("/"); }

  // --- page skeleton ---------------------------------------------------------------------------
  const q = el("input", { id: "q", type: "search", placeholder: "Find a layer by name or class…", autocomplete: "off", spellcheck: "false" });
  const qcount = el("span", { id: "qcount" });
  const results = el("ul", { id: "results" });
  const stage = el("div", { id: "stage" });
  const canvas = el("div", { id: "canvas" }, stage);
  const panel = el("aside", { id: "panel" });
  const foot = el("div", { id: "foot" });
  const titleBox = el("div", { class: "title" });
  titleBox.append(el("b", { text: DATA.title }));
  if (DATA.kind === "model") {
    titleBox.append(" ", el("small", { text: "(" + DATA["class"] + ") · " + fmtInt(LAYERS.length) + " layers" + (DATA.params != null ? " · " + fmtInt(DATA.params) + " params" : "") }));
  } else {
    titleBox.append(" ", el("small", { text: DATA.verdict || "" }));
  }
  const tools = el("div", { class: "tools" },
    el("button", { id: "fit", title: "Fit the whole graph (0)", onclick: () => fit() }, "Fit"),
    " ",
    el("button", { id: "zin", title: "Zoom in (+)", onclick: () => zoomBy(1.25) }, "+"),
    " ",
    el("button", { id: "zout", title: "Zoom out (-)", onclick: () => zoomBy(0.8) }, "−"));
  const bar = el("header", { id: "bar" }, titleBox, el("div", { class: "search" }, q, qcount, results), tools);
  const app = el("div", { id: "app" }, bar, el("div", { id: "main" }, canvas, panel), foot);
  document.body.append(app);

  // --- view states (which nested models are expanded, repeats folded) ------------------------------
  const state = { expanded: new Set(), folded: false, unfolded: null, view: null, selected: -1, hits: [], hitPos: -1 };
  const initial = DATA.views.find((v) => v.initial) || DATA.views[0];
  initial.expanded.forEach((i) => state.expanded.add(i));
  state.folded = initial.folded;
  const nestedSet = new Set(DATA.nested);

  function canonical(set) {
    // a nested model is only shown expanded when every enclosing nested model is
    const out = [];
    for (const i of set) {
      let p = LAYERS[i].parent, ok = true;
      while (p >= 0) { if (nestedSet.has(p) && !set.has(p)) { ok = false; break; } p = LAYERS[p].parent; }
      if (ok) out.push(i);
    }
    return out.sort((a, b) => a - b);
  }
  function pickView() {
    const want = canonical(state.expanded).join(",");
    let note = "";
    const runOf = (x) => (x.unfolded && x.unfolded.length ? x.unfolded[0] : null);
    let same = DATA.views.filter((v) => v.folded === state.folded && runOf(v) === (state.folded ? state.unfolded : null));
    if (!same.length && state.folded && state.unfolded) {
      // this block has no drawing of its own (past the cap): unfold every block
      same = DATA.views.filter((v) => !v.folded);
      note = "Each of the first repeated blocks unfolds on its own; this one unfolds with all the others.";
    }
    let v = same.find((x) => x.expanded.join(",") === want);
    if (!v) {
      const wanted = new Set(canonical(state.expanded));
      const supers = same.filter((x) => [...wanted].every((i) => x.expanded.includes(i)));
      supers.sort((a, b) => a.expanded.length - b.expanded.length);
      v = supers[0] || same[same.length - 1] || DATA.views[0];
      note = "This combination of open nested models was not laid out; showing the nearest one.";
    }
    return [v, note];
  }

  if (DATA.nested.length) {
    const list = el("div", { id: "nestedlist", hidden: "" });
    for (const i of DATA.nested) {
      const box = el("input", { type: "checkbox", "data-layer": String(i) });
      box.addEventListener("change", () => { toggleNested(i, box.checked); });
      list.append(el("label", {}, box, " " + visible(pathText(i)) + " (" + visible(LAYERS[i]["class"]) + ")"));
    }
    const btn = el("button", { id: "nestedbtn", title: "Open or close nested models", onclick: () => { list.hidden = !list.hidden; } }, "Nested models ▾");
    tools.append(" ", el("span", { id: "nestedmenu" }, btn, list),
      " ", el("button", { id: "expandall", onclick: () => { DATA.nested.forEach((i) => state.expanded.add(i)); show(); } }, "Expand all"),
      " ", el("button", { id: "collapseall", onclick: () => { state.expanded.clear(); show(); } }, "Collapse all"));
  }
  if (DATA.views.some((v) => v.folded) && DATA.views.some((v) => !v.folded)) {
    const box = el("input", { type: "checkbox", id: "foldbox" });
    box.checked = state.folded;
    box.addEventListener("change", () => { state.folded = box.checked; state.unfolded = null; show(); });
    tools.append(" ", el("label", { title: "Fold consecutive repeated blocks into one, marked × N" }, box, " fold repeats"),
      " ", el("button", { id: "refold", hidden: "", title: "Fold the unfolded repeated block again", onclick: () => { state.unfolded = null; show(); } }, "Fold block again"));
  }
  function unfoldRun(id) {
    // unfold one repeated block, the others stay folded
    state.pendingNote = state.unfolded && state.unfolded !== id ? "One repeated block is unfolded at a time: " + state.unfolded + " is folded again." : "";
    state.unfolded = id; state.folded = true; show();
  }

  function toggleNested(i, open) {
    if (open) {
      state.expanded.add(i);
      let p = LAYERS[i].parent;
      while (p >= 0) { if (nestedSet.has(p)) state.expanded.add(p); p = LAYERS[p].parent; }
    } else {
      state.expanded.delete(i);
    }
    show();
    if (state.selected >= 0) select(state.selected, { focus: true, keepView: true });
  }

  // --- drawing ---------------------------------------------------------------------------------
  let svg = null;
  let nodeIndex = new Map(); // layer index -> [g.node...]
  let clusterIndex = new Map(); // layer index -> [g.cluster...]
  function show() {
    const [v, note] = pickView();
    if (v !== state.view) {
      const keep = svg ? { ...view } : null;
      stage.innerHTML = v.svg; // Graphviz's SVG (escaped by Graphviz; embedded as a JSON string)
      svg = stage.querySelector("svg");
      const vb = svg.viewBox.baseVal;
      if (vb && vb.width) { svg.setAttribute("width", vb.width); svg.setAttribute("height", vb.height); }
      for (const g of svg.querySelectorAll("g.edge")) {
        const t = g.querySelector("title");
        if (t) g.dataset.ends = t.textContent.replace("->", ">");
      }
      svg.querySelectorAll("title").forEach((t) => t.remove()); // the panel replaces the hover titles
      nodeIndex = new Map(); clusterIndex = new Map();
      for (const g of svg.querySelectorAll("g.node[data-layer]")) {
        const i = +g.dataset.layer; if (!nodeIndex.has(i)) nodeIndex.set(i, []); nodeIndex.get(i).push(g);
      }
      for (const g of svg.querySelectorAll("g.cluster[data-layer]")) {
        const i = +g.dataset.layer; if (!clusterIndex.has(i)) clusterIndex.set(i, []); clusterIndex.get(i).push(g);
      }
      state.view = v;
      miniBoxes = null;
      tidyLabels();
      document.body.dataset.view = DATA.views.indexOf(v) + ":" + v.expanded.join(",") + (v.folded ? ":folded" : "");
      if (keep) apply(); else home();
    }
    for (const box of document.querySelectorAll("#nestedlist input")) box.checked = v.expanded.includes(+box.dataset.layer);
    const fb = document.getElementById("foldbox"); if (fb) fb.checked = v.folded;
    const rf = document.getElementById("refold"); if (rf) rf.hidden = !(v.unfolded && v.unfolded.length);
    document.body.dataset.unfolded = v.unfolded && v.unfolded.length ? v.unfolded[0] : "";
    paintHits(); paintSelection(); paintOverlay(); scheduleMini();
    status(note || state.pendingNote);
    state.pendingNote = "";
  }
  function status(note) {
    foot.textContent = "";
    foot.append(
      (DATA.source ? visible(DATA.source) + " · " : "") + "drag to pan · wheel to zoom · click a layer for details · double-click a nested model to open/close it · modelgraph " + DATA.version);
    if (note) foot.append(" · ", el("span", { class: "note" }, note));
    if (DATA.notes && DATA.notes.length) foot.append(" · " + DATA.notes.map(visible).join(" · "));
  }

  // --- pan and zoom ----------------------------------------------------------------------------
  const view = { x: 0, y: 0, k: 1 };
  function apply() {
    stage.style.transform = `translate(${view.x}px, ${view.y}px) scale(${view.k})`;
    if (typeof applyPanes === "function" && panes.length) applyPanes();
    if (typeof scheduleMini === "function") scheduleMini();
  }
  function size() { return [svg ? +svg.getAttribute("width") : 1, svg ? +svg.getAttribute("height") : 1]; }
  function fit() {
    const [w, h] = size(); const cw = canvas.clientWidth, ch = canvas.clientHeight;
    view.k = Math.min(cw / w, ch / h, 2) * 0.96;
    view.x = (cw - w * view.k) / 2; view.y = (ch - h * view.k) / 2; apply();
  }
  function home() {
    // fit when that stays readable; otherwise the top of the graph at a readable scale
    const [w, h] = size(); const cw = canvas.clientWidth, ch = canvas.clientHeight;
    const k = Math.min(cw / w, ch / h) * 0.96;
    if (k >= 0.45) { fit(); return; }
    view.k = Math.max(Math.min(cw / w, 1.2), 0.8);
    view.x = (cw - w * view.k) / 2; view.y = 10; apply();
    const first = svg.querySelector("g.node");
    if (first && w * view.k > cw) {
      // wider than the window: start at the first input, at the top
      const c = canvas.getBoundingClientRect(), r = first.getBoundingClientRect();
      view.x += cw / 2 - (r.left + r.width / 2 - c.left); apply();
    }
  }
  function tidyLabels() {
    // Graphviz places each run of a label (bold name, " : Class") at its own x from its font
    // estimate; the browser's font can be narrower, leaving gaps. Re-flow each line, keep it centred.
    // (All measurements first, then all writes: one layout pass.)
    const plans = [];
    for (const g of svg.querySelectorAll("g.node, g.cluster")) {
      const lines = new Map();
      for (const t of g.querySelectorAll("text[text-anchor='start']")) {
        const y = t.getAttribute("y");
        if (!lines.has(y)) lines.set(y, []);
        lines.get(y).push(t);
      }
      const centred = !g.classList.contains("cluster");
      for (const runs of lines.values()) {
        if (runs.length < 2) continue;
        plans.push([runs, runs.map((t) => t.getComputedTextLength()), centred]);
      }
    }
    for (const [runs, widths, centred] of plans) {
      const x0 = +runs[0].getAttribute("x");
      const oldEnd = +runs[runs.length - 1].getAttribute("x") + widths[widths.length - 1];
      const newEnd = x0 + widths.reduce((a, b) => a + b, 0);
      const shift = centred ? (oldEnd - newEnd) / 2 : 0;
      let x = x0 + shift;
      runs.forEach((t, j) => { t.setAttribute("x", x.toFixed(2)); x += widths[j]; });
    }
  }
  function zoomAt(factor, cx, cy) {
    const k = Math.min(Math.max(view.k * factor, 0.02), 8);
    view.x = cx - (cx - view.x) * (k / view.k); view.y = cy - (cy - view.y) * (k / view.k); view.k = k; apply();
  }
  function zoomBy(f) { zoomAt(f, canvas.clientWidth / 2, canvas.clientHeight / 2); }
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = canvas.getBoundingClientRect();
    zoomAt(Math.exp(-e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015)), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag = null;
  canvas.addEventListener("mousedown", (e) => { if (e.button === 0) drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, moved: false }; });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; canvas.classList.add("dragging"); }
    view.x = drag.vx + dx; view.y = drag.vy + dy; apply();
  });
  window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); canvas.classList.remove("dragging"); });
  function focusOn(elements) {
    if (!elements || !elements.length) return;
    if (sideBySide) {
      // centre the layer in the first pane that draws it; the other pane follows
      const i = +elements[0].dataset.layer;
      for (const p of panes) {
        const g = p.svg.querySelector(`g.node[data-layer="${i}"]`);
        if (!g) continue;
        const c = p.pane.getBoundingClientRect(), r = g.getBoundingClientRect();
        const k = Math.max(view.k, 1.1);
        const sx = (r.left + r.width / 2 - c.left - view.x) / view.k, sy = (r.top + r.height / 2 - c.top - view.y) / view.k;
        view.k = k; view.x = p.pane.clientWidth / 2 - sx * k; view.y = p.pane.clientHeight / 2 - sy * k; apply();
        const r2 = g.getBoundingClientRect();
        document.body.dataset.focusOffset = Math.hypot(r2.left + r2.width / 2 - c.left - p.pane.clientWidth / 2, r2.top + r2.height / 2 - c.top - p.pane.clientHeight / 2).toFixed(1);
        return;
      }
    }
    const c = canvas.getBoundingClientRect();
    const r = elements[0].getBoundingClientRect();
    const k = Math.max(view.k, 1.1);
    const sx = (r.left + r.width / 2 - c.left - view.x) / view.k, sy = (r.top + r.height / 2 - c.top - view.y) / view.k;
    view.k = k; view.x = canvas.clientWidth / 2 - sx * k; view.y = canvas.clientHeight / 2 - sy * k; apply();
    const r2 = elements[0].getBoundingClientRect();
    document.body.dataset.focusOffset = Math.hypot(r2.left + r2.width / 2 - c.left - canvas.clientWidth / 2, r2.top + r2.height / 2 - c.top - canvas.clientHeight / 2).toFixed(1);
  }

  // --- selection and the panel -----------------------------------------------------------------
  function drawnFor(i) {
    // the drawn elements of layer i, or of its nearest drawn enclosing nested model
    let j = i;
    while (j >= 0) {
      if (nodeIndex.has(j)) return nodeIndex.get(j);
      if (clusterIndex.has(j)) return clusterIndex.get(j);
      j = LAYERS[j].parent;
    }
    return [];
  }
  function reveal(i) {
    // open the nested models that enclose layer i; unfold repeats when it is folded away
    let p = LAYERS[i].parent, changed = false;
    while (p >= 0) { if (nestedSet.has(p) && !state.expanded.has(p)) { state.expanded.add(p); changed = true; } p = LAYERS[p].parent; }
    if (changed) show();
    if (!nodeIndex.has(i) && !clusterIndex.has(i) && state.folded) { state.folded = false; state.unfolded = null; show(); }
  }
  function select(i, opts) {
    opts = opts || {};
    state.selected = i;
    if (i < 0) { paintSelection(); renderPanel(); return; }
    if (!opts.keepView) reveal(i);
    paintSelection();
    renderPanel();
    if (opts.focus !== false) focusOn(drawnFor(i));
    document.body.dataset.selected = String(i);
  }
  function paintSelection() {
    if (!svg) return;
    for (const p of panes) {
      p.svg.querySelectorAll(".sel").forEach((g) => g.classList.remove("sel"));
      if (state.selected >= 0) p.svg.querySelectorAll(`g.node[data-layer="${state.selected}"]`).forEach((g) => g.classList.add("sel"));
    }
    svg.querySelectorAll(".sel").forEach((g) => g.classList.remove("sel"));
    if (state.selected < 0) return;
    const mine = drawnFor(state.selected);
    const ids = new Set();
    for (const g of mine) { g.classList.add("sel"); ids.add(g.id); }
    for (const g of svg.querySelectorAll("g.edge")) {
      const t = g.dataset.ends || "";
      const [a, b] = t.split(">");
      if (ids.has(a) || ids.has(b)) g.classList.add("sel");
    }
  }

  function section(title, ...kids) { return [el("h3", {}, title), ...kids]; }
  function layerLink(i) {
    const a = el("a", { class: "layer", href: "#", title: pathText(i) + " (" + LAYERS[i]["class"] + ")" }, LAYERS[i].name);
    a.addEventListener("click", (e) => { e.preventDefault(); select(i); });
    return a;
  }
  function configTree(value, depth) {
    if (value === null) return el("span", { class: "z" }, "null");
    if (Array.isArray(value)) {
      if (value.every((v) => v === null || typeof v !== "object")) {
        return el("span", { class: "n" }, "[" + value.map((v) => (v === null ? "null" : typeof v === "string" ? JSON.stringify(v) : String(v))).join(", ") + "]");
      }
      const ul = el("ul");
      value.forEach((v, j) => ul.append(el("li", {}, el("span", { class: "k" }, String(j) + ": "), configTree(v, depth + 1))));
      return ul;
    }
    if (typeof value === "object") {
      const keys = Object.keys(value);
      if (!keys.length) return el("span", { class: "z" }, "{}");
      const ul = el("ul");
      for (const key of keys) {
        const v = value[key];
        const complex = v !== null && typeof v === "object" && Object.keys(v).length > 0 && !(Array.isArray(v) && v.every((x) => x === null || typeof x !== "object"));
        if (complex && depth >= 1) {
          const d = el("details", {}, el("summary", {}, el("span", { class: "k" }, key), Array.isArray(v) ? " [" + v.length + "]" : " {" + Object.keys(v).length + "}"), configTree(v, depth + 1));
          if (depth < 2 || Object.keys(v).length <= 4) d.open = true;
          ul.append(el("li", {}, d));
        } else {
          ul.append(el("li", {}, el("span", { class: "k" }, key), ": ", configTree(v, depth + 1)));
        }
      }
      return ul;
    }
    if (typeof value === "string") return el("span", { class: "s" }, JSON.stringify(value).replace(INVISIBLE, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")));
    if (typeof value === "boolean") return el("span", { class: "z" }, String(value));
    return el("span", { class: "n" }, String(value));
  }
  function table(head, rows) {
    const t = el("table");
    if (head) t.append(el("tr", {}, ...head.map((h) => el("th", {}, h))));
    for (const r of rows) t.append(el("tr", {}, ...r.map((c) => (c instanceof Node ? el("td", {}, c) : el("td", typeof c === "number" ? { class: "num" } : {}, c == null ? "" : String(c))))));
    return t;
  }

  function renderPanel() {
    panel.textContent = "";
    const i = state.selected;
    if (i < 0) {
      if (DATA.kind === "diff") { renderDiffSummary(); return; }
      renderModelSummary();
      return;
    }
    const L = LAYERS[i];
    panel.append(el("h2", { id: "panel-name" }, L.name));
    if (L.path.length > 1) {
      const crumbs = el("div", { class: "crumbs" }, "in ");
      let p = L.parent; const chain = [];
      while (p >= 0) { chain.unshift(p); p = LAYERS[p].parent; }
      chain.forEach((j, k) => { if (k) crumbs.append(" / "); crumbs.append(layerLink(j)); });
      panel.append(crumbs);
    }
    panel.append(el("span", { class: "cls", id: "panel-class" }, L["class"]));
    if (L.kind !== "layer") panel.append(el("span", { class: "cls" }, L.kind));
    if (nestedSet.has(i)) {
      const open = state.expanded.has(i);
      panel.append(" ", el("button", { id: "panel-toggle", onclick: () => toggleNested(i, !open) }, open ? "Collapse in place" : "Expand in place"));
    }
    if (DATA.kind === "diff") { renderDiffPanel(L); return; }
    if (L.findings.length) panel.append(...section("Findings", ...L.findings.map((f) => el("div", { class: "finding " + f.severity }, el("b", {}, f.severity + " " + f.rule), " ", f.message))));
    const facts = [
      ["params", L.params == null ? "?" : fmtInt(L.params) + (L.trainable_params != null && L.trainable_params !== L.params ? " (" + fmtInt(L.trainable_params) + " trainable)" : "")],
      ["MACs", L.macs == null ? "?" : human(L.macs) + (L.macs >= 1000 ? " (" + fmtInt(L.macs) + ")" : "")],
      ["trainable", L.trainable ? "yes" : "no"],
    ];
    if (L.nested_layers != null) facts.push(["nested layers", fmtInt(L.nested_layers)]);
    if (L.calls.length !== 1) facts.push(["calls", String(L.calls.length)]);
    panel.append(...section("Summary", table(null, facts)));
    renderOverlayValues(i);
    L.calls.forEach((c, k) => {
      const rows = [];
      if (L.kind !== "input") rows.push(["inputs", c.input_shapes.length ? c.input_shapes.map(shapeText).join(", ") : "?"]);
      rows.push(["outputs", c.output_shapes.length ? c.output_shapes.map(shapeText).join(", ") : "?"]);
      rows.push(["dtypes", c.output_dtypes.length ? c.output_dtypes.map((d) => d || "?").join(", ") : "?"]);
      if (c.inputs.length) rows.push(["tensors in", c.inputs.join(", ")]);
      panel.append(...section(L.calls.length > 1 ? "Call " + (k + 1) + " of " + L.calls.length : "Tensors", table(null, rows)));
    });
    const links = (list) => (list.length ? el("div", {}, ...list.map(layerLink)) : el("span", { class: "hint" }, "none"));
    panel.append(...section("Inbound layers", links(L.inbound)), ...section("Outbound layers", links(L.outbound)));
    if (L.weights.length) {
      const box = el("div", { id: "panel-weights" });
      for (const w of L.weights) {
        const head = el("div", { class: "whead" }, el("span", { class: "mono wname" }, w.name), " ", shapeText(w.shape), " ", el("span", { class: "hint" }, w.dtype + " · " + fmtInt(w.size) + " values"));
        box.append(head);
        if (w.note) box.append(el("div", { class: "hint wnote" }, w.note));
        else box.append(table(["min", "max", "mean", "std"], [[fmtNum(w.min), fmtNum(w.max), fmtNum(w.mean), fmtNum(w.std)]]));
        if (w.nonfinite) box.append(el("div", { class: "hint" }, fmtInt(w.nonfinite) + " NaN/Inf values left out of the statistics"));
      }
      panel.append(...section("Weights (" + L.weights.length + ")", box));
    } else if (L.kind === "layer") {
      panel.append(...section("Weights", el("span", { class: "hint" }, L.params ? "stored in the nested layers" : "none stored")));
    }
    panel.append(...section("Config", el("div", { class: "cfg", id: "panel-config" }, configTree(L.config, 0))));
  }
  function renderModelSummary() {
    panel.append(el("h2", { id: "panel-name" }, DATA.title));
    panel.append(el("span", { class: "cls", id: "panel-class" }, DATA["class"]));
    const count = (kind) => LAYERS.filter((L) => L.kind === kind).length;
    const macs = LAYERS.reduce((a, L) => a + (L.nested_layers == null && L.macs != null ? L.macs : 0), 0);
    const ioLinks = (names) => el("div", {}, ...names.map((n) => { const j = LAYERS.findIndex((L) => L.parent < 0 && L.name === n); return j >= 0 ? layerLink(j) : el("span", {}, n); }));
    const rows = [
      ["inputs", ioLinks(DATA.inputs || [])],
      ["outputs", ioLinks(DATA.outputs || [])],
      ["Keras version", DATA.keras_version || "not recorded"],
      ["layers", fmtInt(LAYERS.length) + " (" + count("input") + " input" + (count("input") === 1 ? "" : "s") + ")" + (DATA.nested.length ? " (" + DATA.nested.length + " nested model" + (DATA.nested.length > 1 ? "s" : "") + ")" : "")],
      ["params", DATA.params == null ? "? (no weights)" : fmtInt(DATA.params)],
      ["MACs per sample", human(macs) + (macs >= 1000 ? " (" + fmtInt(macs) + ")" : "")],
    ];
    if (DATA.source) rows.push(["file", DATA.source]);
    panel.append(...section("Model", el("div", { id: "panel-summary" }, table(null, rows))));
    const sev = { error: 0, warning: 0, info: 0 };
    for (const f of DATA.findings) sev[f.severity] = (sev[f.severity] || 0) + 1;
    const head = "Findings (" + DATA.findings.length + (DATA.findings.length ? ": " + Object.entries(sev).filter(([, n]) => n).map(([k, n]) => n + " " + k).join(", ") : "") + ")";
    const box = el("div", { id: "panel-findings" });
    if (!DATA.findings.length) box.append(el("span", { class: "hint" }, "none"));
    const order = { error: 0, warning: 1, info: 2 };
    for (const f of [...DATA.findings].sort((a, b) => (order[a.severity] ?? 3) - (order[b.severity] ?? 3))) {
      box.append(el("div", { class: "finding " + f.severity }, el("b", {}, f.severity + " " + f.rule), " ", f.message, f.where ? el("div", { class: "hint mono" }, f.where) : null));
    }
    panel.append(...section(head, box));
    if (OVERLAYS.length) panel.append(...section("Overlays", el("div", {}, ...OVERLAYS.map((o) => el("div", {}, el("b", {}, o.title), o.note ? " · " + o.note : "")))));
    panel.append(el("p", { class: "hint" }, "Click a layer in the graph, or search for one by name or class (Enter moves to the next match)."));
  }
  function renderDiffSummary() {
    panel.append(el("h2", {}, "Diff"));
    panel.append(el("p", { id: "panel-verdict" }, DATA.verdict || ""));
    const changes = DATA.changes || [];
    const list = el("ol", { id: "changes" });
    changes.forEach((c, k) => {
      const a = el("a", { href: "#", class: "layer", "data-change": String(k) }, c.path.join("/"));
      a.addEventListener("click", (e) => { e.preventDefault(); select(c.layer); document.body.dataset.change = String(k); });
      list.append(el("li", { class: "st-" + c.status }, el("span", { class: "marker" }, c.marker || ""), " ", a, " ", el("span", { class: "hint" }, c.status), el("div", { class: "what" }, c.what)));
    });
    panel.append(...section("Changes (" + changes.length + ")", changes.length ? list : el("span", { class: "hint" }, "none: the models are the same")));
    panel.append(el("p", { class: "hint" }, "Click a change to go to its layer; click a layer in the graph, or search for one by name or class."));
  }
  function renderOverlayValues(i) {
    const box = el("div", { id: "panel-overlay" });
    let any = false;
    const list = overlay ? [overlay, ...OVERLAYS.filter((o) => o !== overlay)] : OVERLAYS;
    for (const o of list) {
      const d = o.details[String(i)];
      if (!d) continue;
      any = true;
      const rows = Object.entries(d).map(([k, v]) => [k, typeof v === "number" ? (Number.isInteger(v) ? fmtInt(v) : fmtNum(v)) : String(v)]);
      box.append(el("div", { class: "whead" }, el("b", {}, o.title), o === overlay ? el("span", { class: "hint" }, " (colouring)") : null), table(null, rows));
    }
    if (any) panel.append(...section("Overlay values", box));
  }
  function valueText(v) {
    if (v === undefined) return "(absent)";
    if (v !== null && typeof v === "object" && JSON.stringify(v).length > 80) {
      // a long list or mapping (a nested model's layers): folded, opened on demand
      return el("details", {}, el("summary", {}, Array.isArray(v) ? "[" + v.length + " items]" : "{" + Object.keys(v).length + " keys}"), el("div", { class: "cfg" }, configTree(v, 1)));
    }
    return JSON.stringify(v);
  }
  function renderDiffPanel(L) {
    panel.append(" ", el("span", { class: "status", id: "panel-status" }, L.status));
    if (L.name_a && L.name_a !== L.name) panel.append(el("div", { class: "hint" }, "in A: " + visible(L.name_a)));
    const own = L.changes.filter((c) => !c.path || c.path.length <= 1);
    const nested = L.changes.filter((c) => c.path && c.path.length > 1);
    const box = el("div", { id: "panel-changes" });
    for (const c of own) box.append(changeBlock(c));
    if (nested.length) {
      // changes inside a nested model: one expandable entry per nested layer
      const tree = el("div", { id: "panel-nested" });
      for (const c of nested) {
        const d = el("details", { class: "nested" }, el("summary", {}, el("span", { class: "mono" }, c.path.join("/")), " ", el("span", { class: "hint" }, c.status)), changeBlock(c));
        tree.append(d);
      }
      box.append(...section("Inside the nested model (" + nested.length + ")", tree));
    }
    panel.append(box);
    const links = (list) => (list.length ? el("div", {}, ...list.map(layerLink)) : el("span", { class: "hint" }, "none"));
    panel.append(...section("Inbound layers", links(L.inbound)), ...section("Outbound layers", links(L.outbound)));
    if (L.config_a || L.config_b) {
      // both configs key by key, changed keys first and marked
      const a = L.config_a || {}, b = L.config_b || {};
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
      // a key is marked when the diff (on normalised configs) found it changed, not when only the
      // file formats spell it differently
      const changedKeys = new Set(own.flatMap((c) => (c.config || []).map((k) => k.key.split(".")[0])));
      const differs = (k) => changedKeys.has(k);
      keys.sort((x, y) => differs(y) - differs(x));
      const t = el("table", { id: "panel-config-diff", class: "kv" }, el("tr", {}, el("th", {}, "key"), el("th", {}, "A"), el("th", {}, "B")));
      for (const k of keys) {
        const changed = differs(k);
        t.append(el("tr", changed ? { class: "changed" } : {}, el("td", { class: "mono k" }, k),
          el("td", { class: "mono" + (changed ? " old" : "") }, L.config_a ? valueText(a[k]) : ""),
          el("td", { class: "mono" + (changed ? " new" : "") }, L.config_b ? valueText(b[k]) : "")));
      }
      panel.append(...section("Config, key by key", t));
    }
  }
  function changeBlock(c) {
    const box = el("div", { class: "chg" });
    if (c.config && c.config.length) {
      const t = el("table", { class: "kv cfgdiff" }, el("tr", {}, el("th", {}, "config key"), el("th", {}, "A"), el("th", {}, "B")));
      for (const k of c.config) t.append(el("tr", {}, el("td", { class: "mono" }, k.key), el("td", { class: "mono old" }, k.only_in === "b" ? "(absent)" : JSON.stringify(k.old)), el("td", { class: "mono new" }, k.only_in === "a" ? "(absent)" : JSON.stringify(k.new))));
      box.append(t);
    }
    for (const w of c.wiring || []) box.append(el("div", { class: "mono" }, "call " + w.node + " inputs: " + (w.old || []).join(", ") + " → " + (w.new || []).join(", ")));
    if (c.weights && c.weights.length) {
      const t = el("table", { class: "kv wdiff" }, el("tr", {}, el("th", {}, "weight"), el("th", {}, "change"), el("th", {}, "max |Δ|"), el("th", {}, "relative"), el("th", {}, "values differ")));
      for (const w of c.weights) {
        const what = w.status === "shape" ? shapeText(w.old_shape) + " → " + shapeText(w.new_shape) : w.status === "dtype" ? w.old_dtype + " → " + w.new_dtype : w.status;
        t.append(el("tr", {}, el("td", { class: "mono" }, w.name), el("td", {}, what), el("td", { class: "num" }, w.max_abs == null ? "" : fmtNum(w.max_abs)), el("td", { class: "num" }, w.rel == null ? "" : fmtNum(w.rel)), el("td", { class: "num" }, w.mismatched == null ? "" : fmtInt(w.mismatched) + " / " + fmtInt(w.size))));
      }
      box.append(t);
    }
    return box;
  }

  // --- clicks on the drawing ---------------------------------------------------------------------
  stage.addEventListener("click", (e) => {
    if (drag && drag.moved) return;
    const g = e.target.closest("g.node[data-layer], g.cluster[data-layer]");
    if (!g) return;
    e.preventDefault();
    const i = +g.dataset.layer;
    if (i >= 0) select(i, { focus: false });
  });
  stage.addEventListener("dblclick", (e) => {
    const g = e.target.closest("g.node[data-layer], g.cluster[data-layer]");
    if (!g) return;
    const i = +g.dataset.layer;
    const run = e.target.closest("[data-run-id]");
    if (run && state.folded) { unfoldRun(run.dataset.runId); select(i, { focus: false }); return; }
    if (nestedSet.has(i)) toggleNested(i, !state.expanded.has(i));
  });

  // --- search ----------------------------------------------------------------------------------
  function search(text) {
    const needle = text.trim().toLowerCase();
    state.hits = [];
    state.hitPos = -1;
    results.textContent = "";
    if (needle) {
      LAYERS.forEach((L, i) => {
        if (L.path.join("/").toLowerCase().includes(needle) || L["class"].toLowerCase().includes(needle)) state.hits.push(i);
      });
      for (const i of state.hits.slice(0, 300)) {
        const li = el("li", { "data-layer": String(i) }, pathText(i), el("span", { class: "cls" }, LAYERS[i]["class"]));
        li.addEventListener("mousedown", (e) => { e.preventDefault(); state.hitPos = state.hits.indexOf(i); pick(); });
        results.append(li);
      }
    }
    qcount.textContent = needle ? state.hits.length + " match" + (state.hits.length === 1 ? "" : "es") + (state.hits.length > 300 ? " (first 300 listed)" : "") : "";
    paintHits();
  }
  function paintHits() {
    if (!svg) return;
    svg.querySelectorAll("g.hit").forEach((g) => g.classList.remove("hit"));
    for (const i of state.hits) for (const g of nodeIndex.get(i) || []) g.classList.add("hit");
  }
  function pick() {
    if (!state.hits.length) return;
    const i = state.hits[state.hitPos];
    results.querySelectorAll("li.cur").forEach((li) => li.classList.remove("cur"));
    const li = results.querySelector(`li[data-layer="${i}"]`);
    if (li) { li.classList.add("cur"); li.scrollIntoView({ block: "nearest" }); }
    select(i);
  }
  q.addEventListener("input", () => search(q.value));
  q.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === "ArrowDown") { e.preventDefault(); if (state.hits.length) { state.hitPos = (state.hitPos + (e.shiftKey ? -1 : 1) + state.hits.length) % state.hits.length; pick(); } }
    else if (e.key === "ArrowUp") { e.preventDefault(); if (state.hits.length) { state.hitPos = (state.hitPos - 1 + state.hits.length) % state.hits.length; pick(); } }
    else if (e.key === "Escape") { q.value = ""; search(""); q.blur(); }
  });
  q.addEventListener("blur", () => setTimeout(() => { results.hidden = true; }, 150));
  q.addEventListener("focus", () => { results.hidden = false; });
  window.addEventListener("keydown", (e) => {
    if (e.target === q) return;
    if (e.key === "/") { e.preventDefault(); q.focus(); q.select(); }
    else if (e.key === "0") fit();
    else if (e.key === "+" || e.key === "=") zoomBy(1.25);
    else if (e.key === "-") zoomBy(0.8);
    else if (e.key === "Escape") select(-1);
  });

  // --- URL fragment actions: #select=NAME, #click=NAME, #search=TEXT, #expand=NAME, #collapse=NAME, #fold=0|1, #fit
  function find(name) {
    let i = LAYERS.findIndex((L) => L.path.join("/") === name);
    if (i < 0) i = LAYERS.findIndex((L) => L.name === name);
    return i;
  }
  function runFragment() {
    const hash = location.hash.replace(/^#/, "");
    if (!hash) return;
    for (const part of hash.split("&")) {
      const eq = part.indexOf("=");
      const key = eq < 0 ? part : part.slice(0, eq);
      const value = eq < 0 ? "" : decodeURIComponent(part.slice(eq + 1));
      if (key === "search") { q.value = value; search(value); if (state.hits.length) { state.hitPos = 0; pick(); } }
      else if (key === "select") { const i = find(value); if (i >= 0) select(i); }
      else if (key === "click") {
        const i = find(value);
        if (i >= 0) {
          reveal(i);
          const g = drawnFor(i)[0];
          if (g) { g.querySelector("polygon, path, ellipse, text").dispatchEvent(new MouseEvent("click", { bubbles: true })); focusOn([g]); }
        }
      }
      else if (key === "expand" || key === "collapse") { const i = find(value); if (i >= 0 && nestedSet.has(i)) toggleNested(i, key === "expand"); }
      else if (key === "fold") { state.folded = value !== "0"; state.unfolded = null; show(); }
      else if (key === "unfold") unfoldRun(value);
      else if (key === "panes") setPanes(value !== "0");
      else if (key === "fit") fit();
      else if (key === "overlay") setOverlay(value);
      else if (key === "export") exportAs(value, true);
      else if (key === "change") { const a = document.querySelector(`#changes a[data-change="${+value}"]`); if (a) a.dispatchEvent(new MouseEvent("click", { bubbles: true, cancelable: true })); }
    }
  }

  // --- overlays: colour the nodes by one number per layer, with a legend -------------------------
  const OVERLAYS = DATA.overlays || [];
  const SCALE = [[255, 255, 212], [254, 227, 145], [254, 196, 79], [254, 153, 41], [236, 112, 20], [204, 76, 2]];
  let overlay = null;
  const overlayLegend = el("div", { id: "overlay-legend", hidden: "" });
  canvas.append(overlayLegend);
  function scaleColour(t) {
    const x = Math.min(Math.max(t, 0), 1) * (SCALE.length - 1);
    const k = Math.min(Math.floor(x), SCALE.length - 2), f = x - k;
    const c = SCALE[k].map((v, j) => Math.round(v + (SCALE[k + 1][j] - v) * f));
    return "rgb(" + c.join(",") + ")";
  }
  function overlayRange(o) {
    const vals = Object.values(o.values).filter((v) => (o.log ? v > 0 : Number.isFinite(v)));
    if (!vals.length) return [0, 1];
    let lo = Math.min(...vals), hi = Math.max(...vals);
    if (o.log) { lo = Math.log10(lo); hi = Math.log10(hi); }
    return [lo, hi];
  }
  function overlayT(o, v, range) {
    const [lo, hi] = range;
    const x = o.log ? (v > 0 ? Math.log10(v) : lo) : v;
    return hi > lo ? (x - lo) / (hi - lo) : 1;
  }
  function fmtValue(o, v) { return (o.unit === "ms" || o.unit === "abs err" || o.unit === "|x|") ? fmtNum(v) : human(v); }
  function paintOverlay() {
    if (!svg) return;
    for (const g of svg.querySelectorAll("g.node[data-layer]")) {
      g.classList.remove("nov", "mark");
      for (const s of g.querySelectorAll(":scope > path, :scope > ellipse, :scope > polygon")) s.style.fill = "";
    }
    overlayLegend.hidden = !overlay;
    document.body.dataset.overlay = overlay ? overlay.name : "";
    if (!overlay) return;
    const range = overlayRange(overlay);
    const marked = new Set(overlay.marked);
    let painted = 0;
    for (const g of svg.querySelectorAll("g.node[data-layer]")) {
      const i = g.dataset.layer, v = overlay.values[i];
      const shapes = [...g.querySelectorAll(":scope > path, :scope > ellipse, :scope > polygon")].filter((s) => s.getAttribute("fill") !== "none");
      if (v == null) { g.classList.add("nov"); continue; }
      const colour = scaleColour(overlayT(overlay, v, range));
      for (const s of shapes) s.style.fill = colour;
      g.dataset.overlayColour = colour;
      painted++;
      if (marked.has(+i)) g.classList.add("mark");
    }
    document.body.dataset.overlayPainted = String(painted);
    overlayLegend.textContent = "";
    const [lo, hi] = range;
    const un = (x) => (overlay.log ? Math.pow(10, x) : x);
    const stops = SCALE.map((c, k) => "rgb(" + c.join(",") + ") " + (100 * k / (SCALE.length - 1)).toFixed(0) + "%").join(",");
    overlayLegend.append(
      el("div", { class: "otitle" }, overlay.title + (overlay.log ? " (log scale)" : "")),
      el("div", { class: "ramp", style: "background:linear-gradient(to right," + stops + ")" }),
      el("div", { class: "ends" }, el("span", { id: "overlay-min" }, fmtValue(overlay, un(lo)) + " " + overlay.unit), el("span", { id: "overlay-max" }, fmtValue(overlay, un(hi)) + " " + overlay.unit)),
      el("div", {}, el("span", { class: "sw nov" }), " no value"));
    if (overlay.marked.length) overlayLegend.append(el("div", {}, el("span", { class: "sw markd" }), " marked: " + overlay.marked.map((j) => LAYERS[j].name).join(", ")));
    if (overlay.note) overlayLegend.append(el("div", { class: "hint", id: "overlay-note" }, overlay.note));
  }
  function setOverlay(name) {
    overlay = OVERLAYS.find((o) => o.name === name) || null;
    const sel = document.getElementById("overlay-select");
    if (sel) sel.value = overlay ? overlay.name : "";
    paintOverlay();
    renderPanel();
  }
  if (OVERLAYS.length) {
    const sel = el("select", { id: "overlay-select", title: "Colour the layers by" }, el("option", { value: "" }, "no overlay"), ...OVERLAYS.map((o) => el("option", { value: o.name }, o.title)));
    sel.addEventListener("change", () => setOverlay(sel.value));
    tools.append(" ", el("label", {}, "Overlay ", sel));
    overlay = OVERLAYS[0];
    sel.value = overlay.name;
  }

  // --- minimap: every node as a small box, the visible part framed; click or drag to move there ------
  const mini = el("canvas", { id: "minimap", width: "180", height: "140", title: "Overview: click or drag to move" });
  canvas.append(mini);
  let miniBoxes = null; // [[x, y, w, h, fill]] in SVG units, per drawing
  function miniScale() {
    const [w, h] = size();
    return Math.min((mini.width - 8) / w, (mini.height - 8) / h);
  }
  function miniMeasure() {
    miniBoxes = [];
    for (const g of svg.querySelectorAll("g.node")) {
      const b = g.getBBox();
      const shape = g.querySelector("path, ellipse, polygon");
      miniBoxes.push([b.x, b.y, b.width, b.height, shape]);
    }
    const graph0 = svg.querySelector("g.graph");
    const t = graph0 && graph0.transform.baseVal.consolidate();
    miniBoxes.dy = t ? t.matrix.f : 0;
  }
  function drawMini() {
    if (!svg) return;
    if (sideBySide) { mini.hidden = true; return; }
    if (!miniBoxes) miniMeasure();
    const ctx = mini.getContext("2d");
    const k = miniScale();
    const [w, h] = size();
    const ox = (mini.width - w * k) / 2, oy = (mini.height - h * k) / 2;
    ctx.clearRect(0, 0, mini.width, mini.height);
    for (const [x, y, bw, bh, shape] of miniBoxes) {
      ctx.fillStyle = shape ? (shape.style.fill || shape.getAttribute("fill") || "#ccc") : "#ccc";
      ctx.strokeStyle = "#7a8494";
      ctx.fillRect(ox + x * k, oy + (y + miniBoxes.dy) * k, Math.max(bw * k, 1.5), Math.max(bh * k, 1.5));
    }
    // the part of the drawing the canvas shows
    const vx = -view.x / view.k, vy = -view.y / view.k, vw = canvas.clientWidth / view.k, vh = canvas.clientHeight / view.k;
    // shown only while part of the drawing is out of sight
    const seen = (Math.max(0, Math.min(vx + vw, w) - Math.max(vx, 0)) * Math.max(0, Math.min(vy + vh, h) - Math.max(vy, 0))) / (w * h);
    mini.hidden = seen > 0.95;
    ctx.strokeStyle = "#d81b60"; ctx.lineWidth = 1.5;
    ctx.strokeRect(ox + vx * k, oy + vy * k, vw * k, vh * k);
    mini.dataset.view = [vx, vy, vw, vh].map((v) => v.toFixed(1)).join(",");
  }
  function miniMove(e) {
    const r = mini.getBoundingClientRect();
    const k = miniScale(); const [w, h] = size();
    const ox = (mini.width - w * k) / 2, oy = (mini.height - h * k) / 2;
    const sx = (e.clientX - r.left - ox) / k, sy = (e.clientY - r.top - oy) / k;
    view.x = canvas.clientWidth / 2 - sx * view.k; view.y = canvas.clientHeight / 2 - sy * view.k; apply();
  }
  let miniDrag = false;
  mini.addEventListener("mousedown", (e) => { e.stopPropagation(); miniDrag = true; miniMove(e); });
  window.addEventListener("mousemove", (e) => { if (miniDrag) miniMove(e); });
  window.addEventListener("mouseup", () => { miniDrag = false; });
  let miniPending = false;
  function scheduleMini() {
    if (miniPending) return;
    miniPending = true;
    requestAnimationFrame(() => { miniPending = false; drawMini(); });
  }

  // --- export what is shown: SVG (the drawing with its current colours) and PNG --------------------
  const PNG_SCALE = 2;
  const PNG_MAX_SIDE = 16384, PNG_MAX_AREA = 16384 * 8192;
  function exportSvgText() {
    const copy = svg.cloneNode(true);
    copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
    copy.querySelectorAll(".sel, .hit").forEach((g) => g.classList.remove("sel", "hit"));
    // the page's stylesheet does not travel with the file: inline what changes the look
    for (const g of copy.querySelectorAll("g.node.nov")) for (const s of g.querySelectorAll(":scope > path, :scope > ellipse, :scope > polygon")) if (s.getAttribute("fill") !== "none") s.style.fill = "#eeeeee";
    for (const g of copy.querySelectorAll("g.node.mark")) for (const s of g.querySelectorAll(":scope > path, :scope > ellipse, :scope > polygon")) { s.style.stroke = "#c00000"; s.style.strokeWidth = "4px"; s.style.strokeDasharray = "6 3"; }
    const vb = svg.viewBox.baseVal;
    copy.setAttribute("width", String(vb.width)); copy.setAttribute("height", String(vb.height));
    copy.insertBefore(document.createElementNS("http://www.w3.org/2000/svg", "rect"), copy.firstChild);
    const bg = copy.firstChild; bg.setAttribute("width", "100%"); bg.setAttribute("height", "100%"); bg.setAttribute("fill", "#ffffff");
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(copy);
  }
  function pngSize() {
    const vb = svg.viewBox.baseVal;
    let k = PNG_SCALE;
    k = Math.min(k, PNG_MAX_SIDE / vb.width, PNG_MAX_SIDE / vb.height, Math.sqrt(PNG_MAX_AREA / (vb.width * vb.height)));
    return [Math.max(1, Math.round(vb.width * k)), Math.max(1, Math.round(vb.height * k))];
  }
  function exportPng(done) {
    const [w, h] = pngSize();
    const img = new Image();
    img.onload = () => {
      const c = document.createElement("canvas"); c.width = w; c.height = h;
      const ctx = c.getContext("2d"); ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, h); ctx.drawImage(img, 0, 0, w, h);
      done(c.toDataURL("image/png"));
    };
    img.onerror = () => done(null);
    img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(exportSvgText());
  }
  function fileBase() { return String(DATA.title || "model").replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 80) || "model"; }
  function download(url, name) {
    const a = el("a", { href: url, download: name }); document.body.append(a); a.click(); a.remove();
  }
  function exportAs(kind, keep) {
    // keep: leave the result in the page (#export=svg|png) instead of downloading it
    if (kind === "svg") {
      const text = exportSvgText();
      if (keep) { exportOut("svg", text); return; }
      download("data:image/svg+xml;charset=utf-8," + encodeURIComponent(text), fileBase() + ".svg");
    } else {
      exportPng((url) => {
        if (!url) { status("PNG export failed"); return; }
        if (keep) { exportOut("png", url); return; }
        download(url, fileBase() + ".png");
      });
    }
  }
  function exportOut(kind, text) {
    let box = document.getElementById("export-" + kind);
    if (!box) { box = el("textarea", { id: "export-" + kind, hidden: "" }); document.body.append(box); }
    box.value = text; box.textContent = text;
    document.body.dataset.exported = kind;
  }
  tools.append(" ", el("button", { id: "export-svg-btn", title: "Download the drawing as shown (SVG)", onclick: () => exportAs("svg") }, "SVG"),
    " ", el("button", { id: "export-png-btn", title: "Download the drawing as shown (PNG, 2x)", onclick: () => exportAs("png") }, "PNG"));

  // --- diff: the two models side by side, panned and zoomed together ---------------------------
  const panes = [];
  let sideBySide = false;
  if (DATA.panes && DATA.panes.length) {
    const box = el("div", { id: "panes", hidden: "" });
    for (const p of DATA.panes) {
      const st = el("div", { class: "pstage" });
      st.innerHTML = p.svg; // drawn by modelgraph (text escaped), embedded as a JSON string
      const sv = st.querySelector("svg");
      const vb = sv.viewBox.baseVal;
      if (vb && vb.width) { sv.setAttribute("width", vb.width); sv.setAttribute("height", vb.height); }
      sv.querySelectorAll("title").forEach((t) => t.remove());
      for (const g of sv.querySelectorAll("g.node[data-layer]")) {
        const L = LAYERS[+g.dataset.layer];
        if (L && L.status) g.classList.add("st-" + L.status);
      }
      const pane = el("div", { class: "pane", id: "pane-" + p.side }, el("div", { class: "plabel" }, p.side + ": " + visible(p.name)), st);
      box.append(pane);
      panes.push({ pane, stage: st, svg: sv });
    }
    canvas.append(box);
    box.addEventListener("click", (e) => {
      if (drag && drag.moved) return;
      const g = e.target.closest("g.node[data-layer]");
      if (g && +g.dataset.layer >= 0) { e.preventDefault(); select(+g.dataset.layer, { focus: false }); }
    });
    tools.append(" ", el("button", { id: "panesbtn", title: "Show A and B side by side, moving together", onclick: () => setPanes(!sideBySide) }, "Side by side"));
  }
  function setPanes(on) {
    sideBySide = on && panes.length > 0;
    const box = document.getElementById("panes");
    if (!box) return;
    box.hidden = !sideBySide;
    stage.hidden = sideBySide;
    const lg = document.getElementById("legend"); if (lg) lg.hidden = false;
    document.body.dataset.panes = sideBySide ? "1" : "";
    const btn = document.getElementById("panesbtn"); if (btn) btn.textContent = sideBySide ? "One graph" : "Side by side";
    if (sideBySide) {
      const p = panes[0].pane, [w, h] = [+panes[0].svg.getAttribute("width"), +panes[0].svg.getAttribute("height")];
      view.k = Math.min(p.clientWidth / w, p.clientHeight / h, 1.5) * 0.96; view.x = (p.clientWidth - w * view.k) / 2; view.y = 30;
    }
    apply(); paintSelection();
    if (sideBySide && state.selected >= 0) focusOn(drawnFor(state.selected));
  }
  function applyPanes() {
    // one transform for both panes: what is at a point of A's pane is at the same point of B's
    for (const p of panes) p.stage.style.transform = stage.style.transform;
  }

  // --- legend (diff) and start -------------------------------------------------------------------
  if (DATA.legend) {
    const legend = el("div", { id: "legend" });
    for (const item of DATA.legend) {
      const sw = item.edge
        ? el("span", { class: "ln", style: `border-color:${item.edge};${item.dashed ? "border-top-style:dashed" : ""}` })
        : el("span", { class: "sw", style: `background:${item.fill};border-color:${item.color}` });
      legend.append(el("div", {}, sw, item.label));
    }
    canvas.append(legend);
  }
  show();
  renderPanel();
  runFragment();
  // The minimap's first drawing now, not in a later animation frame: a page read right after it
  // loads (headless Chromium's --dump-dom on a busy machine) showed it undrawn.
  drawMini();
  window.addEventListener("hashchange", runFragment);
  document.body.dataset.readyMs = performance.now().toFixed(0);
  document.body.dataset.ready = "1";
})();
