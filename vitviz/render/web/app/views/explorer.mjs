// The attention explorer on the page at /next: every map, contour and percentage drawn here from the data the
// explorer's answer brings once per picture (answer.data.explorer, vitviz/render/browser.py attention_payload), so
// pointing at a patch or pressing a key asks nothing of the server.
//
// Its layer, head, threshold, opacity, colours and pinned patch are the Attention view's settings, held in the
// page's store under their link keys (the Attention panel's sliders set them; this drawing follows). What the
// explorer itself changes (an arrow key, a click that pins a patch, a head or a layer picked on the maps) is drawn
// at once and written to the store only once the burst ends: `settleWriter` hands the changes over 400 ms after the
// last one, so the panels drawn on the server that share these keys ask once per burst, not once per key press.

import { massMask, queryRows, stepCell, topPatch, classCells } from "../../lib/maps.mjs";
import { bytes, floats, fixed, percent } from "../../lib/numbers.mjs";
import { under } from "../../lib/server.mjs";
import { settingText } from "../store.mjs";
import { cellAt, ensureStyles, fitGrid, heatImage, hiDpiCanvas, loadImage } from "./canvas.mjs";
import { explorerSettings, explorerText, settleWriter } from "./held.mjs";

// server text (model and class names from an operator's files) goes into HTML escaped
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

export const SETTLE_MS = 400;  // how long the explorer waits after its last change before writing the store
const HELD = ["layer", "head", "keep", "alpha", "cmap", "query"];
const mounted = new WeakMap();  // a panel's root -> its explorer (kept while the analysis is the same)
const pct = (x) => percent(x, 1);

// the view's draw function (app/views.mjs BROWSER.explorer): called with each answer of the explorer's panel
export function drawExplorer({ root, figs, answer, store, page }) {
  const p = answer && answer.data && answer.data.explorer;
  if (!p || !p.parts) return;
  ensureStyles(page.version);
  let x = mounted.get(root);
  if (!x || x.token !== p.token) {
    if (x) x.close();
    x = makeExplorer(root, p, store, page);
    mounted.set(root, x);
  }
  figs.prepend(x.el);  // the panel emptied its figures for the answer: the same explorer goes back in
  x.follow(true);
  requestAnimationFrame(() => x.layout());
}

function makeExplorer(root, p, store, page) {
  const [gh, gw] = p.grid, n = gh * gw, H = p.heads;
  const S = { cls: null, roll: null, rollPending: false, classMaps: {}, cmPending: {}, keys: {}, pending: {},
              rowCache: new Map(), luts: {}, img: null, status: "", query: null, pinned: false, layer: 0, head: -1,
              keep: 0.6, alpha: 0.6, cmap: "inferno", timings: [], strip: null, raf: null, seen: null, closed: false };
  for (const [name, b] of Object.entries(p.colormaps)) S.luts[name] = bytes(b);
  const el = document.createElement("div");
  el.className = "vxb-explorer";
  el.tabIndex = 0;
  el.setAttribute("role", "group");
  el.setAttribute("aria-label", "attention explorer: point at a patch or use the arrow keys");
  el.__vx = S;  // for tests and benchmarks: what is drawn
  const $ = (sel) => el.querySelector(sel);
  const link = (name) => p.fields[name].link;
  const text = (name) => settingText(store.get(), page, link(name));

  // ---- the store: read when it changes from elsewhere, written once a burst of the explorer's own changes ends
  const writer = settleWriter((patch) => {
    const settings = { ...store.get().settings };
    for (const [key, t] of Object.entries(patch)) {
      if (t === page.keys[key].default) delete settings[key]; else settings[key] = t;
    }
    S.seen = JSON.stringify(explorerSettings((name) => (link(name) in patch ? patch[link(name)] : text(name)), p, S));
    store.set({ settings });
    el.dataset.written = (Number(el.dataset.written) || 0) + 1;
  }, SETTLE_MS);
  const hold = (...names) => {  // the explorer changed these: the store hears of it when the burst ends
    const patch = {};
    for (const name of names) {
      const v = name === "query" ? (S.pinned ? S.query : null) : S[name];
      patch[link(name)] = explorerText(name, v, p);
    }
    writer.put(patch);
  };
  const follow = (force) => {  // the store's values, where they changed since last read (a slider, a link opened)
    const got = explorerSettings(text, p, S), seen = JSON.stringify(got);
    if (!force && seen === S.seen) return;
    const before = S.seen ? JSON.parse(S.seen) : null;
    S.seen = seen;
    const pendingKeys = Object.keys(writer.pending());
    for (const name of HELD) {
      if (pendingKeys.includes(link(name))) continue;  // the explorer's own change, newer, is on its way
      if (before && JSON.stringify(before[name]) === JSON.stringify(got[name]) && !force) continue;
      if (name === "query") {
        if (got.query || S.pinned || force) { S.query = got.query; S.pinned = !!got.query; }
      } else S[name] = got[name];
    }
    update();
  };
  const unsubscribe = store.subscribe((state, changed) => {
    if ((changed || []).some((c) => c === "link" || c === "settings" || c.startsWith("settings:"))) follow(false);
  });

  // ---- the data: parts in the answer, or fetched once under the analysis's token (the browser caches them)
  const fetchPart = (name) => {
    if (p.data && p.data[name]) {
      const d = p.data[name];
      return Promise.resolve(d.startsWith("data:") ? bytes(d.split(",")[1]).buffer : bytes(d).buffer);
    }
    return fetch(under(p.base + name)).then((r) => {
      if (r.status === 404) throw Object.assign(new Error("gone"), { gone: true });
      if (!r.ok) throw new Error(`the server answered ${r.status}`);
      return r.arrayBuffer();
    });
  };
  const gone = "the server no longer holds this picture's analysis: pick the picture again to have it made";
  const ensureKeys = (layer) => {
    const name = p.parts.keys[layer];
    if (S.keys[layer] || S.pending[layer]) return S.pending[layer];
    S.pending[layer] = fetchPart(name).then((buf) => {
      const all = floats(buf, name.endsWith(".f2") ? "f2" : "f4"), half = all.length / 2;
      S.keys[layer] = { q: all.subarray(0, half), k: all.subarray(half) };
      update();
    }).catch((err) => {
      S.keys[layer] = { missing: err.gone ? gone : "the server did not send this layer's queries and keys; point again in a moment" };
      update();
      if (!err.gone) setTimeout(() => { delete S.keys[layer]; delete S.pending[layer]; }, 3000);
    });
    return S.pending[layer];
  };
  const rowsFor = (layer, qi) => {  // (H + 1, N): the query patch's row in every head, the head mean last
    const key = layer + ":" + qi, hit = S.rowCache.get(key);
    if (hit) return hit;
    const K = S.keys[layer];
    const out = queryRows(K.q, K.k, H, p.tokens, p.head_dim, p.prefix, qi);
    S.rowCache.set(key, out);
    if (S.rowCache.size > 32) S.rowCache.delete(S.rowCache.keys().next().value);
    return out;
  };
  S.rowsFor = rowsFor;
  S.ensureKeys = (layer) => ensureKeys(layer) || Promise.resolve();
  const map = (layer, head) => {  // (N,) the map drawn; null while its data is on its way
    if (S.query === null) {
      const at = (layer * (H + 1) + (head < 0 ? H : head)) * n;
      return S.cls.subarray(at, at + n);
    }
    const K = S.keys[layer];
    if (!K) { ensureKeys(layer); return null; }
    if (!K.q) return null;
    const h = head < 0 ? H : head, rows = rowsFor(layer, S.query[0] * gw + S.query[1]);
    return rows.subarray(h * n, (h + 1) * n);
  };

  // ---- drawing
  const paint = (cv, a, withMask, query) => {
    const ctx = cv.getContext("2d"), W = cv.width, Hh = cv.height;
    ctx.globalAlpha = 1;
    ctx.imageSmoothingEnabled = true;
    ctx.drawImage(S.img, 0, 0, W, Hh);
    if (!a) { ctx.fillStyle = "rgba(255,255,255,0.75)"; ctx.fillRect(0, 0, W, Hh); return null; }
    let lo = Infinity, hi = -Infinity;
    for (const v of a) { if (v < lo) lo = v; if (v > hi) hi = v; }
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(heatImage(a, gh, gw, S.luts[S.cmap], lo, hi, S.alpha), 0, 0, W, Hh);
    const cw = W / gw, ch = Hh / gh;
    let mm = null;
    if (withMask) {
      mm = massMask(a, S.keep);
      const on = (r, c) => r >= 0 && c >= 0 && r < gh && c < gw && mm.mask[r * gw + c];
      ctx.beginPath();
      for (let r = 0; r < gh; r++) for (let c = 0; c < gw; c++) {
        if (!on(r, c)) continue;
        const x = c * cw, y = r * ch;
        if (!on(r - 1, c)) { ctx.moveTo(x, y); ctx.lineTo(x + cw, y); }
        if (!on(r + 1, c)) { ctx.moveTo(x, y + ch); ctx.lineTo(x + cw, y + ch); }
        if (!on(r, c - 1)) { ctx.moveTo(x, y); ctx.lineTo(x, y + ch); }
        if (!on(r, c + 1)) { ctx.moveTo(x + cw, y); ctx.lineTo(x + cw, y + ch); }
      }
      ctx.strokeStyle = "#00e5ff"; ctx.lineWidth = Math.max(2, W / 200); ctx.stroke();
    }
    if (query) {
      ctx.strokeStyle = "#ffffff"; ctx.lineWidth = Math.max(2, W / 150);
      ctx.strokeRect(query[1] * cw, query[0] * ch, cw, ch);
    }
    return mm;
  };
  const draw = () => {
    const cap = $(".vxb-big figcaption");
    if (!S.cls || !S.img) { cap.textContent = S.status || "fetching the attention maps…"; return; }
    const L = S.layer, name = (h) => (h < 0 ? "head mean" : `head ${h}`);
    const big = paint($(".vxb-big canvas"), map(L, S.head), true, S.query);
    const who = S.query ? `patch (${S.query[0]}, ${S.query[1]})${S.pinned ? ", pinned" : ""}` : "the class token";
    if (big) {
      cap.textContent = `${name(S.head)}, layer ${L + 1} of ${p.layers}, query ${who}: ${pct(big.mass)} of the ` +
        `attention in ${big.count} of ${n} patches (${pct(big.frac)}).`;
      Object.assign(cap.dataset, { mass: big.mass, frac: big.frac, count: big.count, head: S.head, layer: L + 1,
                                   query: S.query ? S.query.join(",") : "cls" });
    } else {
      cap.textContent = S.status || (S.keys[L] && S.keys[L].missing) || "fetching this layer's queries and keys…";
      cap.dataset.count = "";
    }
    for (const fig of el.querySelectorAll(".vxb-head")) {
      const h = Number(fig.dataset.h), m = paint(fig.querySelector("canvas"), map(L, h), true, S.query);
      fig.classList.toggle("vxb-on", h === S.head);
      fig.setAttribute("aria-pressed", String(h === S.head));
      fig.querySelector("figcaption").innerHTML = `${h < 0 ? "mean" : "head " + h}<br>${m ? percent(m.frac, 0) : "—"}`;
      fig.title = m ? `${name(h)}: the contour holds ${pct(m.mass)} of its attention in ${pct(m.frac)} of the patches` : name(h);
    }
    const strip = [S.alpha, S.cmap, !!S.roll, Object.keys(S.classMaps)].join();  // independent of the query
    for (const fig of el.querySelectorAll(".vxb-step[data-l]")) {
      const l = Number(fig.dataset.l);
      fig.classList.toggle("vxb-on", l === L);
      if (S.strip === strip) continue;
      const a = l < 0 ? S.roll : S.cls.subarray((l * (H + 1) + H) * n, (l * (H + 1) + H + 1) * n);
      paint(fig.querySelector("canvas"), a, false, null);
    }
    if (S.strip !== strip) {
      for (const fig of el.querySelectorAll(".vxb-class")) {
        const cv = fig.querySelector("canvas");
        if (cv) paint(cv, S.classMaps[fig.dataset.map] || null, false, null);
      }
    }
    S.strip = strip;
  };
  // a pointer or key event draws now (and its time from the event to drawn is kept); data arriving draws in the
  // next frame
  const update = (ev) => {
    if (S.closed) return;
    if (ev && ev.timeStamp) {
      if (S.raf) { cancelAnimationFrame(S.raf); S.raf = null; }
      draw();
      S.timings.push(performance.now() - ev.timeStamp);
      el.dataset.latency = S.timings[S.timings.length - 1].toFixed(2);
      return;
    }
    if (S.raf) return;
    S.raf = requestAnimationFrame(() => { S.raf = null; draw(); });
  };
  S.draw = draw;

  // ---- the parts of the strip computed on the server when asked for
  const fetchRollout = (fig) => {
    if (S.roll || S.rollPending) return;
    const cap = fig.querySelector("figcaption");
    S.rollPending = true; cap.textContent = "computing…";
    fetchPart(p.parts.rollout).then((buf) => { S.roll = floats(buf); cap.textContent = "rollout"; update(); })
      .catch((err) => { cap.textContent = err.gone ? "rollout: pick the picture again" : "rollout: try again"; })
      .finally(() => { S.rollPending = false; });
  };
  const fetchClassMap = (fig, cell) => {
    const name = cell.name, cap = fig.querySelector("figcaption");
    if (!cell.part || S.classMaps[name] || S.cmPending[name]) return;
    S.cmPending[name] = true; cap.textContent = "computing…";
    fetchPart(cell.part).then((buf) => {
      const a = floats(buf);
      if (a.length !== n) { cap.textContent = `${cell.label}: arrived damaged`; return; }
      const top = topPatch(a, gw);
      S.classMaps[name] = a;
      cap.textContent = `${cell.label}: top ${percent(top.share, 0)}`;
      Object.assign(cap.dataset, { top: `${top.row},${top.col}`, share: top.share });
      fig.title = `${cell.label} for class “${esc(p.class_maps.class)}”: its top patch (${top.row}, ${top.col}) holds ` +
        `${pct(top.share)} of the map's positive total`;
      fig.setAttribute("aria-label", fig.title);
      update();
    }).catch((err) => { cap.textContent = err.gone ? `${cell.label}: pick the picture again` : `${cell.label}: try again`; })
      .finally(() => { S.cmPending[name] = false; });
  };

  // ---- the explorer's own changes
  const setLayer = (l, ev) => {
    const to = Math.max(0, Math.min(p.layers - 1, l));
    if (to === S.layer) return;
    S.layer = to;
    update(ev);
    hold("layer");
  };
  const pointAt = (cv, pins) => {
    cv.addEventListener("pointermove", (ev) => {
      const rc = cellAt(ev, cv, p.grid);
      if (!S.pinned && rc && (!S.query || rc[0] !== S.query[0] || rc[1] !== S.query[1])) { S.query = rc; update(ev); }
    });
    cv.addEventListener("pointerleave", (ev) => { if (!S.pinned && S.query) { S.query = null; update(ev); } });
    if (pins) {
      cv.addEventListener("click", (ev) => {
        S.query = cellAt(ev, cv, p.grid);
        S.pinned = !!S.query && !S.pinned;
        update(ev);
        hold("query");
      });
    }
  };

  const cells = classCells(p);
  const forClass = p.class_maps && p.class_maps.class !== null && p.class_maps.class !== undefined
    ? `, then the class maps for class “${esc(p.class_maps.class)}” (the model's top class here)` : "";
  el.innerHTML = `
    <div class="vxb-main">
      <figure class="vxb-big"><figcaption aria-live="polite"></figcaption></figure>
      <div class="vxb-heads" role="group" aria-label="the heads of this layer: click one to show it"></div>
    </div>
    <div class="vxb-strip" role="group" aria-label="layer strip: the class token's head-mean map per layer, then the rollout${forClass}; keys [ and ] change the layer"
      style="grid-template-columns: repeat(${Math.min(p.layers + 1, 13)}, minmax(0, 110px))"></div>
    <p class="vxb-help">Point at a patch to use it as the query (click to pin it, Esc for the class token). Keys
      (with the explorer focused): arrows move the query, 0–${Math.min(H, 10) - 1} pick a head, m the head mean,
      [ and ] the layer. Beside the map: each head, with the share of patches inside its contour; below: layers
      1–${p.layers} (class token, head mean) and the rollout${forClass}${cells.some((c) => c.part) ? ": click one to have it computed" : ""}.
      <button type="button" class="vxb-full" aria-pressed="false">Full screen</button></p>`;
  const [bw, bh] = fitGrid(p.grid, 960), [sw, sh] = fitGrid(p.grid, 240), [tw, th] = fitGrid(p.grid, 120);
  pointAt(hiDpiCanvas($(".vxb-big"), bw, bh), true);
  for (let h = -1; h < H; h++) {
    const fig = document.createElement("figure");
    fig.className = "vxb-head"; fig.dataset.h = h; fig.innerHTML = "<figcaption></figcaption>";
    pointAt(hiDpiCanvas(fig, sw, sh), false);
    fig.addEventListener("click", (ev) => { if (S.head !== h) { S.head = h; update(ev); hold("head"); } });
    $(".vxb-heads").append(fig);
  }
  for (let l = 0; l <= p.layers; l++) {
    const fig = document.createElement("figure"), id = l === p.layers ? -1 : l;
    fig.className = "vxb-step"; fig.dataset.l = id;
    fig.innerHTML = `<figcaption>${id < 0 ? "roll&shy;out: click" : l + 1}</figcaption>`;
    fig.title = id < 0 ? "rollout through every layer (computed on the server when you click)" : `layer ${l + 1}`;
    hiDpiCanvas(fig, tw, th);
    if (id < 0) fig.addEventListener("click", () => fetchRollout(fig));
    else {
      const pick = (ev) => { if (ev.type === "click" || ev.buttons === 1) setLayer(id, ev); };
      fig.addEventListener("click", pick);
      fig.addEventListener("pointermove", pick);
    }
    $(".vxb-strip").append(fig);
  }
  for (const cell of cells) {
    const fig = document.createElement("figure");
    fig.className = "vxb-step vxb-class"; fig.dataset.map = cell.name; fig.title = cell.title;
    fig.innerHTML = `<figcaption>${esc(cell.part ? `${cell.label}: click` : cell.name ? `${cell.label}: not for this model` : cell.label)}</figcaption>`;
    if (cell.part) {
      hiDpiCanvas(fig, tw, th);
      fig.tabIndex = 0; fig.setAttribute("role", "button"); fig.setAttribute("aria-label", cell.title);
      fig.addEventListener("click", () => fetchClassMap(fig, cell));
      fig.addEventListener("keydown", (ev) => {
        if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); ev.stopPropagation(); fetchClassMap(fig, cell); }
      });
    } else fig.classList.add("vxb-none");
    $(".vxb-strip").append(fig);
  }
  const full = $(".vxb-full");
  full.addEventListener("click", () => (document.fullscreenElement ? document.exitFullscreen() : el.requestFullscreen?.()));
  const onFull = () => {
    const on = document.fullscreenElement === el;
    full.textContent = on ? "Leave full screen" : "Full screen";
    full.setAttribute("aria-pressed", String(on));
    layout();
  };
  document.addEventListener("fullscreenchange", onFull);

  el.addEventListener("keydown", (ev) => {
    if (ev.target.closest("button, input, select, [role=button]") && ev.target !== el) return;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (stepCell(ev.key, [0, 0], p.grid)) {  // the first arrow picks the centre patch, the next ones move it
      S.query = S.query ? stepCell(ev.key, S.query, p.grid) : [gh >> 1, gw >> 1];
      S.pinned = true;
      ev.preventDefault();
      update(ev);
      hold("query");
    } else if (ev.key === "Escape") {
      S.query = null; S.pinned = false;
      ev.preventDefault(); update(ev); hold("query");
    } else if (/^[0-9]$/.test(ev.key) && Number(ev.key) < H) {
      S.head = Number(ev.key); ev.preventDefault(); update(ev); hold("head");
    } else if (ev.key === "m") {
      S.head = -1; ev.preventDefault(); update(ev); hold("head");
    } else if (ev.key === "[" || ev.key === "]") {
      ev.preventDefault(); setLayer(S.layer + (ev.key === "]" ? 1 : -1), ev);
    }
  });

  // the big map takes the width it has, but no more than the window's height leaves it beside the panel's text
  const layout = () => {
    const big = $(".vxb-big canvas");
    if (!big || !el.isConnected) return;
    const avail = $(".vxb-big").clientWidth, caption = $(".vxb-big figcaption").offsetHeight;
    const tall = document.fullscreenElement === el ? window.innerHeight - $(".vxb-strip").offsetHeight - caption - 40
      : window.innerHeight - caption - 120;
    const width = Math.min(avail, Math.max(240, tall) * gw / gh);
    if (width > 0) big.style.width = Math.floor(width) + "px";
  };
  const resized = new ResizeObserver(() => layout());
  resized.observe(el);

  // ---- the first data
  fetchPart(p.parts.image).then((buf) => loadImage(URL.createObjectURL(new Blob([buf], { type: "image/png" }))))
    .then((img) => { S.img = img; update(); })
    .catch((err) => { S.status = err.gone ? gone : `the picture did not arrive (${err.message})`; update(); });
  fetchPart(p.parts.cls).then((c) => {
    S.cls = floats(c);
    if (S.cls.length !== p.layers * (H + 1) * n) { S.cls = null; S.status = "the attention maps arrived damaged"; }
    update();
  }).catch((err) => { S.status = err.gone ? gone : `the attention maps did not arrive (${err.message})`; update(); });
  for (const l of p.first) ensureKeys(l);
  el.dataset.bytes = p.bytes;

  return {
    el, token: p.token, follow, layout,
    close() {
      S.closed = true;
      writer.flush();
      unsubscribe();
      resized.disconnect();
      document.removeEventListener("fullscreenchange", onFull);
      el.remove();
    },
  };
}
