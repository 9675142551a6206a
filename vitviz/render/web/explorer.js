// vitviz attention explorer. Runs as gr.HTML's js_on_load (`element`, `props`, `server`, `watch` given), after
// common.js, and draws everything from one payload made by the server (render/browser.py): no server call when you point or
// move a slider.
let root = element.querySelector(".vx");
const S = { p: null, n: 0, cls: null, roll: null, classMaps: {}, keys: {}, pending: {}, rowCache: new Map(), luts: {}, img: null,
            png: null, status: "", layer: 0, head: -1, query: null, pinned: false, keep: 0.6, alpha: 0.6,
            cmap: "inferno", timings: [] };
root.__vx = S;
S.rowsFor = (layer, qi) => rowsFor(layer, qi);  // for tests and benchmarks: the rows as drawn
S.ensureKeys = (layer) => ensureKeys(layer) || Promise.resolve();
S.draw = () => draw();

// massMask and queryRows (lib/maps.mjs) are the library's mass_mask and LayerKeys.rows, tested under node

const PART_WAIT = "fetching this layer's queries and keys…";

function partUrl(name) {  // where the server serves part `name` of this analysis (under the app's root)
  return under(`${S.p.base}${name}`);
}

function fetchPart(name) {  // -> ArrayBuffer; the browser's cache answers a part fetched before (same name, same bytes)
  if (S.p.local) {  // computed on this device (device.js): every part is here, nothing is asked of the server
    return S.p.local[name] ? Promise.resolve(S.p.local[name])
      : Promise.reject(Object.assign(new Error("not computed on this device"), { local: true }));
  }
  if (S.p.data && S.p.data[name]) {
    const d = S.p.data[name];
    return Promise.resolve(d.startsWith("data:") ? bytes(d.split(",")[1]).buffer : bytes(d).buffer);
  }
  return fetch(partUrl(name)).then((r) => {
    if (r.status === 404) throw Object.assign(new Error("gone"), { gone: true });
    if (!r.ok) throw new Error(`the server answered ${r.status}`);
    return r.arrayBuffer();
  });
}

function decodeKeys(name, buf) {  // q then k, each (H, T, d); float32 or float16 as the part's name says
  const all = floats(buf, name.endsWith(".f2") ? "f2" : "f4"), half = all.length / 2;
  return { q: all.subarray(0, half), k: all.subarray(half) };
}

function ensureKeys(layer) {  // a layer's queries and keys: fetched once, when a patch is first the query there
  const p = S.p, token = p.token, name = p.parts.keys[layer];
  if (S.keys[layer] || S.pending[layer]) return S.pending[layer];
  S.pending[layer] = fetchPart(name).then((buf) => {
    if (S.p && S.p.token === token) { S.keys[layer] = decodeKeys(name, buf); update(); }
  }).catch((err) => {
    if (!S.p || S.p.token !== token) return;
    if (err.gone) { sendBack(); return; }  // the server no longer holds this analysis
    S.keys[layer] = { missing: "the server did not send this layer's queries and keys; point again in a moment" };
    update();
    setTimeout(() => { delete S.keys[layer]; delete S.pending[layer]; }, 3000);
  });
  return S.pending[layer];
}

function sendBack() {  // the server forgot the analysis: it makes it again from its own copy of the picture, once
  if (S.sentBack === S.p.token) return;
  S.sentBack = S.p.token;
  S.status = "the server no longer holds this picture's analysis: asking for it again…";
  update();
  window.vitvizState?.set("attention-again", { token: S.p.token, picture: S.p.picture, at: Date.now() });
}

function sendPicture() {  // the server has no copy of the picture either (restart, another process): send it, once
  if (S.sentPicture === S.p.token) return;
  if (!S.png) { S.status = "the server no longer holds this picture; show it again"; update(); return; }
  S.sentPicture = S.p.token;
  S.status = "the server no longer holds this picture: sending the picture back…";
  update();
  let text = "";
  const u = new Uint8Array(S.png);
  for (let i = 0; i < u.length; i += 0x8000) text += String.fromCharCode.apply(null, u.subarray(i, i + 0x8000));
  window.vitvizState?.set("attention-again", { image: "data:image/png;base64," + btoa(text), at: Date.now() });
}

// One query patch's rows in every head (lib/maps.mjs queryRows: softmax of q·k over all tokens, prefix keys then
// dropped), (H + 1, N) with the head mean last. The last few are kept.
function rowsFor(layer, qi) {
  const key = layer + ":" + qi, hit = S.rowCache.get(key);
  if (hit) return hit;
  const K = S.keys[layer], p = S.p;
  const out = queryRows(K.q, K.k, p.heads, p.tokens, p.head_dim, p.prefix, qi);
  S.rowCache.set(key, out);
  if (S.rowCache.size > 32) S.rowCache.delete(S.rowCache.keys().next().value);
  return out;
}

function map(layer, head) {  // (N,) the map to draw; head -1 = head mean; null when not available yet
  const { n } = S, H = S.p.heads;
  if (S.query === null) {
    const at = (layer * (H + 1) + (head < 0 ? H : head)) * n;
    return S.cls.subarray(at, at + n);
  }
  const K = S.keys[layer];
  if (!K) { ensureKeys(layer); return null; }
  if (!K.q) return null;
  const h = head < 0 ? H : head, rows = rowsFor(layer, S.query[0] * S.p.grid[1] + S.query[1]);
  return rows.subarray(h * n, (h + 1) * n);
}

function paint(cv, a, withMask) {
  const [gh, gw] = S.p.grid, ctx = cv.getContext("2d"), W = cv.width, Hh = cv.height;
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
  if (S.query) {
    ctx.strokeStyle = "#ffffff"; ctx.lineWidth = Math.max(2, W / 150);
    ctx.strokeRect(S.query[1] * cw, S.query[0] * ch, cw, ch);
  }
  return mm;
}

const pct = (x) => percent(x, 1);
const $ = (sel) => root.querySelector(sel);

function draw() {
  if (!S.p || !S.cls || !S.img || !S.img.complete) {
    if (S.p) $(".vx-big figcaption").textContent = S.status || "fetching the attention maps…";
    return;
  }
  const H = S.p.heads, L = S.layer, name = (h) => (h < 0 ? "head mean" : `head ${h}`);
  const big = paint($(".vx-big canvas"), map(L, S.head), true), cap = $(".vx-big figcaption");
  const who = S.query ? `patch (${S.query[0]}, ${S.query[1]})${S.pinned ? ", pinned" : ""}` : "the class token";
  if (big) {
    cap.textContent = `${S.p.local ? "computed on this device: " : ""}${name(S.head)}, layer ${L + 1} of ${S.p.layers}, query ${who}: ${pct(big.mass)} of the ` +
      `attention in ${big.count} of ${S.n} patches (${pct(big.frac)}).`;
    Object.assign(cap.dataset, { mass: big.mass, frac: big.frac, count: big.count, head: S.head, layer: L + 1,
                                 query: S.query ? S.query.join(",") : "cls" });
  } else {
    cap.textContent = S.status || (S.keys[L] && S.keys[L].missing) || PART_WAIT;
    cap.dataset.count = "";
  }
  root.querySelectorAll(".vx-head").forEach((fig) => {
    const h = Number(fig.dataset.h), m = paint(fig.querySelector("canvas"), map(L, h), true);
    fig.classList.toggle("vx-on", h === S.head);
    const cap = fig.querySelector("figcaption");
    cap.innerHTML = `${h < 0 ? "mean" : "head " + h}<br>${m ? percent(m.frac, 0) : "—"}`;
    cap.title = m ? `${name(h)}: the contour holds ${pct(m.mass)} of its attention in ${pct(m.frac)} of the patches` : "";
  });
  const strip = [S.alpha, S.cmap, !!S.roll, Object.keys(S.classMaps)].join();  // the strip does not depend on the
  // query: repainted only when it changes
  root.querySelectorAll(".vx-step[data-l]").forEach((fig) => {
    const l = Number(fig.dataset.l);
    fig.classList.toggle("vx-on", l === L);
    if (S.strip === strip) return;
    const a = l < 0 ? S.roll : S.cls.subarray((l * (H + 1) + H) * S.n, (l * (H + 1) + H + 1) * S.n);  // rollout: once fetched
    const q = S.query; S.query = null; paint(fig.querySelector("canvas"), a, false); S.query = q;
  });
  if (S.strip !== strip) {
    root.querySelectorAll(".vx-class").forEach((fig) => {  // a class map: once fetched (an empty canvas until then)
      const cv = fig.querySelector("canvas");
      if (!cv) return;
      const q = S.query; S.query = null; paint(cv, S.classMaps[fig.dataset.map] || null, false); S.query = q;
    });
  }
  S.strip = strip;
  $(".vx-layer-out").textContent = `${L + 1} of ${S.p.layers}`;
  $(".vx-keep-out").textContent = `${percent(S.keep, 0)} of the mass`;
  $(".vx-alpha-out").textContent = `opacity ${fixed(S.alpha, 2)}`;
}

function held() {  // the Attention view's settings this explorer holds (vitviz/specs/views.py declares them)
  return { layer: S.layer + 1, head: S.head, keep: S.keep, alpha: S.alpha, cmap: S.cmap,
           query: S.pinned && S.query ? [S.query[0], S.query[1]] : null };
}

function publish(quiet) {  // the link and the carrier follow the explorer (the server's figures and the download read it)
  // no answer (the device's handed back before the server's came) or a picture that stays on this device: the
  // server draws nothing for it
  if (!S.p || S.p.local) return;
  const values = held(), text = JSON.stringify(values);
  if (text === S.published) return;
  S.published = text;
  if (!quiet) root.dataset.published = (Number(root.dataset.published) || 0) + 1;
  if (!quiet) window.vitvizLink?.settings(S.p.fields, values);  // what a person changed; not what the answer used
  window.vitvizState?.set("attention", values, { quiet });
}

function update(ev) {  // a pointer or key event draws at once (Chrome hands pointer moves over once per frame, so
  // the new map is in the next frame); anything else (data arriving) draws in the next animation frame. Records the
  // event → drawn time of each interaction.
  if (ev && ev.timeStamp) {
    if (S.raf) { cancelAnimationFrame(S.raf); S.raf = null; }
    draw();
    S.timings.push(performance.now() - ev.timeStamp);
    root.dataset.latency = S.timings[S.timings.length - 1].toFixed(2);
    publish(false);
    return;
  }
  if (S.raf) return;
  S.raf = requestAnimationFrame(() => { S.raf = null; draw(); publish(false); });
}

function fetchRollout(fig) {  // the rollout needs every row of every layer: the server computes it when asked, once
  if (S.roll || S.rollPending || !S.p) return;
  const token = S.p.token, cap = fig.querySelector("figcaption");
  S.rollPending = true; cap.textContent = "computing…";
  fetchPart(S.p.parts.rollout).then((buf) => {
    if (!S.p || S.p.token !== token) return;
    S.roll = floats(buf); cap.textContent = "rollout"; update();
  }).catch((err) => {
    cap.textContent = err.local ? "rollout: on the server only" : err.gone ? "rollout: click" : "rollout: try again";
    if (err.gone) sendBack();
  })
    .finally(() => { S.rollPending = false; });
}

function fetchClassMap(fig, cell) {  // a class map (relevance, AttnLRP, LeGrad) for the top class: the server runs
  // the model once for all of them when the first is asked for (a forward and its backwards), then each is a part
  const name = cell.name, cap = fig.querySelector("figcaption");
  if (!cell.part || S.classMaps[name] || S.cmPending[name] || !S.p) return;
  const token = S.p.token;
  S.cmPending[name] = true; cap.textContent = "computing…";
  fetchPart(cell.part).then((buf) => {
    if (!S.p || S.p.token !== token) return;
    const a = floats(buf);
    if (a.length !== S.n) { cap.textContent = `${cell.label}: arrived damaged`; return; }
    const top = topPatch(a, S.p.grid[1]);
    S.classMaps[name] = a;
    cap.textContent = `${cell.label}: top ${percent(top.share, 0)}`;
    Object.assign(cap.dataset, { top: `${top.row},${top.col}`, share: top.share });
    fig.title = `${cell.label} for class “${S.p.class_maps.class}”: its top patch (${top.row}, ${top.col}) holds ` +
      `${pct(top.share)} of the map's positive total`;
    fig.setAttribute("aria-label", fig.title);
    update();
  }).catch((err) => {
    cap.textContent = err.gone ? `${cell.label}: click` : `${cell.label}: try again`;
    if (err.gone) sendBack();
  })
    .finally(() => { S.cmPending[name] = false; });
}

function setLayer(l, ev) {
  S.layer = Math.max(0, Math.min(S.p.layers - 1, l));
  $(".vx-layer").value = S.layer + 1;
  update(ev);
}


function canvas(parent, cssW, cssH, pins = true) {  // a map to point at; clicking the big one pins the patch
  const cv = hiDpiCanvas(parent, cssW, cssH);
  cv.addEventListener("pointermove", (ev) => {
    const rc = cellAt(ev, cv, S.p.grid);
    if (!S.pinned && rc && (!S.query || rc[0] !== S.query[0] || rc[1] !== S.query[1])) { S.query = rc; update(ev); }
  });
  cv.addEventListener("pointerleave", (ev) => { if (!S.pinned && S.query) { S.query = null; update(ev); } });
  if (pins) cv.addEventListener("click", (ev) => { S.query = cellAt(ev, cv, S.p.grid); S.pinned = !!S.query && !S.pinned; update(ev); });
  return cv;
}

function build(p) {
  root = element.querySelector(".vx");
  root.__vx = S;
  if (p && p.resend) { if (S.p && S.p.token === p.resend) sendPicture(); return; }  // the picture is wanted
  if (!p || !p.parts) { root.innerHTML = ""; S.p = null; return; }
  const [gh, gw] = p.grid, fit = (side) => (gw >= gh ? [side, (side * gh) / gw] : [(side * gw) / gh, side]);
  for (const [name, b] of Object.entries(p.colormaps)) S.luts[name] = bytes(b);
  const cells = classCells(p), forClass = p.class_maps && p.class_maps.class !== null && p.class_maps.class !== undefined
    ? `, then the class maps for class “${p.class_maps.class}” (the model's top class here)` : "";
  Object.assign(S, { p, n: gh * gw, cls: null, roll: null, rollPending: false, classMaps: {}, cmPending: {}, keys: {}, pending: {}, rowCache: new Map(),
                     strip: null, img: null, png: null, status: "", published: null }, settingsFrom(p.state, p, S));
  root.innerHTML = `
    <div class="vx-bar">
      <label>layer <input class="vx-layer" type="range" min="1" max="${p.layers}" step="1" value="${S.layer + 1}">
        <output class="vx-layer-out"></output></label>
      <label>keep <input class="vx-keep" type="range" min="${p.fields.keep.lo}" max="${p.fields.keep.hi}"
        step="${p.fields.keep.step}" value="${S.keep}"> <output class="vx-keep-out"></output></label>
      <label>overlay <input class="vx-alpha" type="range" min="${p.fields.alpha.lo}" max="${p.fields.alpha.hi}"
        step="${p.fields.alpha.step}" value="${S.alpha}"> <output class="vx-alpha-out"></output></label>
      <label>colours <select class="vx-cmap">${p.fields.cmap.choices.map((c) =>
        `<option${c === S.cmap ? " selected" : ""}>${c}</option>`).join("")}</select></label>
      <button type="button" class="vx-full" aria-pressed="false">Full screen</button>
    </div>
    <div class="vx-main">
      <figure class="vx-big"><figcaption aria-live="polite"></figcaption></figure>
      <div class="vx-heads"></div>
    </div>
    <div class="vx-strip" tabindex="0" role="group" title="class token, head mean, per layer; then the rollout and the class maps. Drag across to scrub."
      aria-label="layer strip: the class token's head-mean map per layer, then the rollout${forClass}; keys [ and ] change the layer"
      style="grid-template-columns: repeat(${p.layers + 1}, minmax(0, 110px))"></div>
    <p class="vx-help">Beside the map: each head, with the share of patches inside its contour; below: layers 1–${p.layers}
      (class token, head mean) and the rollout${forClass}${cells.some((c) => c.part) ? ": click one to have it computed" : ""}. Point at a patch to use it as the query (click to pin it, Esc for the class token). Keys:
      arrows move the query, 0–${p.heads - 1} pick a head, m the head mean, [ and ] the layer.</p>`;
  const [bw, bh] = fit(960), [sw, sh] = fit(240), [tw, th] = fit(120);
  canvas($(".vx-big"), bw, bh);
  for (let h = -1; h < p.heads; h++) {
    const fig = document.createElement("figure");
    fig.className = "vx-head"; fig.dataset.h = h; fig.innerHTML = "<figcaption></figcaption>";
    canvas(fig, sw, sh, false);
    fig.addEventListener("click", () => { S.head = h; update(); });  // a head's panel picks the head
    $(".vx-heads").append(fig);
  }
  for (let l = 0; l <= p.layers; l++) {
    const fig = document.createElement("figure"), id = l === p.layers ? -1 : l;
    fig.className = "vx-step"; fig.dataset.l = id;
    fig.innerHTML = `<figcaption>${id < 0 ? "roll&shy;out: click" : l + 1}</figcaption>`;
    fig.title = id < 0 ? "rollout through every layer (computed on the server when you click: it needs every row of every layer)" : `layer ${l + 1}`;
    hiDpiCanvas(fig, tw, th);
    const pick = (ev) => { if (id >= 0 && (ev.type === "click" || ev.buttons === 1) && id !== S.layer) setLayer(id, ev); };
    if (id < 0) fig.addEventListener("click", () => fetchRollout(fig));
    else { fig.addEventListener("click", pick); fig.addEventListener("pointermove", pick); }
    $(".vx-strip").append(fig);
  }
  for (const cell of cells) {  // the class maps, or one cell that says why there are none
    const fig = document.createElement("figure");
    fig.className = "vx-step vx-class"; fig.dataset.map = cell.name; fig.title = cell.title;
    fig.innerHTML = `<figcaption>${cell.part ? `${cell.label}: click` : cell.name ? `${cell.label}: not for this model`
      : cell.label}</figcaption>`;  // a map this model cannot have says so (its title says why)
    if (cell.part) {
      hiDpiCanvas(fig, tw, th);
      fig.tabIndex = 0; fig.setAttribute("role", "button"); fig.setAttribute("aria-label", cell.title);
      fig.addEventListener("click", () => fetchClassMap(fig, cell));
      fig.addEventListener("keydown", (ev) => {
        if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); fetchClassMap(fig, cell); }
      });
    } else fig.classList.add("vx-none");
    $(".vx-strip").append(fig);
  }
  $(".vx-layer").addEventListener("input", (ev) => setLayer(Number(ev.target.value) - 1, ev));
  $(".vx-keep").addEventListener("input", (ev) => { S.keep = Number(ev.target.value); update(ev); });
  $(".vx-alpha").addEventListener("input", (ev) => { S.alpha = Number(ev.target.value); update(ev); });
  $(".vx-cmap").addEventListener("change", (ev) => { S.cmap = ev.target.value; update(ev); });
  $(".vx-full").addEventListener("click", () => (document.fullscreenElement ? document.exitFullscreen()
                                                   : root.requestFullscreen?.()));
  root.dataset.bytes = p.bytes;
  layout();
  const token = p.token, [H, L, n] = [p.heads, p.layers, gh * gw];
  const mine = () => S.p && S.p.token === token;
  const failed = (err) => {
    if (!mine()) return;
    if (err.gone) { sendBack(); return; }
    S.status = err.gone ? "the server no longer holds this picture's analysis; show it again"
      : `the attention maps did not arrive (${err.message}); show it again`;
    update();
  };
  fetchPart(p.parts.image).then((buf) => {
    if (!mine()) return;
    S.png = buf;
    const img = new Image();
    img.onload = () => { if (mine()) { S.img = img; update(); } };
    img.src = URL.createObjectURL(new Blob([buf], { type: "image/png" }));
  }).catch(failed);
  fetchPart(p.parts.cls).then((c) => {
    if (!mine()) return;
    S.cls = floats(c);
    if (S.cls.length !== L * (H + 1) * n) { S.cls = null; S.status = "the attention maps arrived damaged"; }
    update();
  }).catch(failed);
  for (const l of p.first) ensureKeys(l);
  update();
  publish(true);  // the carrier holds the settings as used (the server's figures were drawn with them already)
}

function settingsFrom(st, p, was) {  // the view's settings as `st` gives them (the server's answer, or a link's
  // carrier), fitted to the model and the picture's grid: layer (0-based here, 1-based in st), head (-1: the mean),
  // the pinned query patch [r, c] or null; threshold, opacity and colours not given (or unknown) stay as `was` has them
  const clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, Number.isFinite(v) ? v : lo));
  const [gh, gw] = p.grid, q = st.query;
  const query = Array.isArray(q) && q[0] >= 0 && q[0] < gh && q[1] >= 0 && q[1] < gw ? [q[0], q[1]] : null;
  return { layer: clamp(st.layer - 1, 0, p.layers - 1), head: clamp(st.head, -1, p.heads - 1), query, pinned: !!query,
           keep: Number.isFinite(st.keep) ? st.keep : was.keep, alpha: Number.isFinite(st.alpha) ? st.alpha : was.alpha,
           cmap: st.cmap in S.luts ? st.cmap : was.cmap };
}

function follow(st) {  // a link opened within the page set this view's settings (its carrier, by the server's
  // opener) and the explorer's picture stays: drawn as the link says, as the server's figures beside it are
  if (!S.p || !st || !element.isConnected) return;
  const next = settingsFrom(st, S.p, S);
  if (Object.keys(next).every((k) => JSON.stringify(S[k]) === JSON.stringify(next[k]))) return;  // as it shows
  Object.assign(S, next);
  $(".vx-layer").value = S.layer + 1; $(".vx-keep").value = S.keep; $(".vx-alpha").value = S.alpha;
  $(".vx-cmap").value = S.cmap;
  update();
  publish(true);  // the carrier holds them already: nothing is asked of the server
}
document.addEventListener("vitviz-settled", () => {
  try { follow(JSON.parse(window.vitvizState?.values?.attention?.() || "null")); } catch (e) { /* no settings */ }
});

element.addEventListener("keydown", (ev) => {
  if (!S.p || ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT") return;
  const [gh, gw] = S.p.grid;
  if (ARROWS[ev.key]) {  // the first arrow picks the centre patch, the next ones move it
    S.query = S.query ? stepCell(ev.key, S.query, S.p.grid) : [gh >> 1, gw >> 1];
    S.pinned = true;
  } else if (ev.key === "Escape") { S.query = null; S.pinned = false; }
  else if (/^[0-9]$/.test(ev.key) && Number(ev.key) < S.p.heads) S.head = Number(ev.key);
  else if (ev.key === "m") S.head = -1;
  else if (ev.key === "[" || ev.key === "]") { setLayer(S.layer + (ev.key === "]" ? 1 : -1), ev); ev.preventDefault(); return; }
  else return;
  ev.preventDefault();
  update(ev);
});

// The big map takes the width it is given, but no more than fits the window's height: on the first screen, below
// what the page shows above it (a large screen sees the whole map without scrolling), or, when that would leave it
// small, with the bar and the layer strip once the explorer is scrolled to the top (a projector at 1280×720 shows
// them at once); redone when the window or box changes.
function layout() {
  const big = root.querySelector(".vx-big canvas");
  if (!S.p || !big) return;
  const [gh, gw] = S.p.grid, avail = root.querySelector(".vx-big").clientWidth;
  const caption = $(".vx-big figcaption").offsetHeight;
  const scrolled = window.innerHeight - ($(".vx-bar").offsetHeight + $(".vx-strip").offsetHeight + caption + 40);
  const onLoad = window.innerHeight - (big.getBoundingClientRect().top + window.scrollY) - caption - 16;
  const fits = !document.fullscreenElement && onLoad >= 0.6 * scrolled ? onLoad : scrolled;
  const width = Math.min(avail, Math.max(240, fits) * gw / gh);
  if (width > 0) big.style.width = Math.floor(width) + "px";
  // the heads beside the map: as few columns as keep them within its height (more, smaller, when needed)
  const heads = $(".vx-heads"), n = S.p.heads + 1, tall = big.offsetHeight + $(".vx-big figcaption").offsetHeight;
  const beside = heads.offsetTop < big.offsetTop + big.offsetHeight / 2;
  for (let c = beside ? 2 : Math.min(n, 4); c <= n; c++) {
    heads.style.gridTemplateColumns = `repeat(${c}, minmax(0, 1fr))`;
    if (!beside || heads.offsetHeight <= tall) break;
  }
}
new ResizeObserver(() => layout()).observe(element);
window.addEventListener("resize", () => layout());
document.addEventListener("fullscreenchange", () => {
  const b = root && root.querySelector(".vx-full");
  if (b) { const on = document.fullscreenElement === root; b.textContent = on ? "Leave full screen" : "Full screen";
           b.setAttribute("aria-pressed", String(on)); }
});
watch("value", () => build(props.value));
// device.js hands over (on the window) what it computed on this device (a payload with its parts in `local`), or
// null to go back to the server's answer
window.addEventListener("vitviz-attention-local", (ev) => build(ev.detail || props.value));
build(props.value);
