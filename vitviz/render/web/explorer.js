// vitviz attention explorer. Runs as gr.HTML's js_on_load (`element`, `props`, `server`, `watch` given), after
// common.js, and draws everything from one payload made by the server (render/browser.py): no server call when you point or
// move a slider.
let root = element.querySelector(".vx");
const S = { p: null, n: 0, cls: null, roll: null, rows: {}, pending: {}, luts: {}, img: null, layer: 0,
            head: -1, query: null, pinned: false, keep: 0.6, alpha: 0.6, cmap: "inferno", t0: null, timings: [] };
root.__vx = S;

// DINO's threshold, as vitviz.attention.mass_mask: the fewest patches holding `keep` of the mass.
const scratch = { n: 0 };
function massMask(a, keep) {
  const n = a.length;
  if (scratch.n !== n) Object.assign(scratch, { n, order: new Uint32Array(n), run: new Float64Array(n) });
  const order = scratch.order, run = scratch.run;
  for (let i = 0; i < n; i++) order[i] = i;
  order.sort((i, j) => (a[j] - a[i]) || (i - j));
  let acc = 0;
  for (let i = 0; i < n; i++) run[i] = acc += a[order[i]];
  const total = run[n - 1], mask = new Uint8Array(n);
  if (!(total > 0)) return { mask: mask.fill(1), mass: 1, frac: 1, count: n };
  let k = n;
  for (let i = 0; i < n; i++) if (run[i] / total >= keep - 1e-12) { k = i + 1; break; }
  for (let i = 0; i < k; i++) mask[order[i]] = 1;
  return { mask, mass: run[k - 1] / total, frac: k / n, count: k };
}

function ensureRows(layer) {  // another layer's patch rows: asked for once, when a patch is the query
  const token = S.p.token;
  if (S.rows[layer] || S.pending[layer] || typeof server === "undefined") return;
  S.pending[layer] = server.explorer_rows(token, layer).then((r) => r.file
    ? serverFile(r.file).then((buf) => ({ layer: r.layer, heads: r.heads, data: floats(buf, r.dtype) }))
    : decodeRows(r)).then((r) => {
    if (S.p && S.p.token === token) { S.rows[r.layer] = r; update(); }
  }).catch(() => {  // say so; after a pause the next pointing asks again
    if (!S.p || S.p.token !== token) return;
    S.rows[layer] = { missing: "the server did not answer for this layer's patch rows; point again in a moment" };
    update();
    setTimeout(() => { delete S.rows[layer]; delete S.pending[layer]; }, 3000);
  });
}

function map(layer, head) {  // (N,) the map to draw; head -1 = head mean; null when not available
  const { n } = S, H = S.p.heads;
  if (S.query === null) {
    const at = (layer * (H + 1) + (head < 0 ? H : head)) * n;
    return S.cls.subarray(at, at + n);
  }
  ensureRows(layer);
  const r = S.rows[layer];
  if (!r || !r.data) return null;
  const h = r.heads === 1 ? (head < 0 ? 0 : -1) : (head < 0 ? H : head);
  if (h < 0) return null;
  const q = S.query[0] * S.p.grid[1] + S.query[1];
  return r.data.subarray((h * n + q) * n, (h * n + q + 1) * n);
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

const pct = (x) => (100 * x).toFixed(1) + "%";
const $ = (sel) => root.querySelector(sel);

function draw() {
  if (!S.p || !S.img || !S.img.complete) return;
  const H = S.p.heads, L = S.layer, name = (h) => (h < 0 ? "head mean" : `head ${h}`);
  const big = paint($(".vx-big canvas"), map(L, S.head), true), cap = $(".vx-big figcaption");
  const who = S.query ? `patch (${S.query[0]}, ${S.query[1]})${S.pinned ? ", pinned" : ""}` : "the class token";
  if (big) {
    cap.textContent = `${name(S.head)}, layer ${L + 1} of ${S.p.layers}, query ${who}: ${pct(big.mass)} of the ` +
      `attention in ${big.count} of ${S.n} patches (${pct(big.frac)}).`;
    Object.assign(cap.dataset, { mass: big.mass, frac: big.frac, count: big.count, head: S.head, layer: L + 1,
                                 query: S.query ? S.query.join(",") : "cls" });
  } else {
    cap.textContent = S.rows[L] && S.rows[L].missing ? S.rows[L].missing : "fetching this layer's patch rows…";
    cap.dataset.count = "";
  }
  root.querySelectorAll(".vx-head").forEach((fig) => {
    const h = Number(fig.dataset.h), m = paint(fig.querySelector("canvas"), map(L, h), true);
    fig.classList.toggle("vx-on", h === S.head);
    fig.querySelector("figcaption").innerHTML = `${name(h)}<br>${m ? Math.round(100 * m.frac) + "% of patches" : "—"}`;
  });
  const strip = [S.alpha, S.cmap].join();  // the strip does not depend on the query: repainted only when it changes
  root.querySelectorAll(".vx-step").forEach((fig) => {
    const l = Number(fig.dataset.l);
    fig.classList.toggle("vx-on", l === L);
    if (S.strip === strip) return;
    const a = l < 0 ? S.roll : S.cls.subarray((l * (H + 1) + H) * S.n, (l * (H + 1) + H + 1) * S.n);
    const q = S.query; S.query = null; paint(fig.querySelector("canvas"), a, false); S.query = q;
  });
  S.strip = strip;
  $(".vx-layer-out").textContent = `layer ${L + 1} of ${S.p.layers}`;
  $(".vx-keep-out").textContent = `${Math.round(100 * S.keep)}% of the mass`;
  $(".vx-alpha-out").textContent = `opacity ${S.alpha.toFixed(2)}`;
}

function held() {  // the Attention view's settings this explorer holds (vitviz/specs/views.py declares them)
  return { layer: S.layer + 1, head: S.head, keep: S.keep, alpha: S.alpha, cmap: S.cmap,
           query: S.pinned && S.query ? [S.query[0], S.query[1]] : null };
}

function publish(quiet) {  // the link and the carrier follow the explorer (the server's figures and the download read it)
  const values = held(), text = JSON.stringify(values);
  if (text === S.published) return;
  S.published = text;
  if (!quiet) root.dataset.published = (Number(root.dataset.published) || 0) + 1;
  window.vitvizLink?.settings(S.p.fields, values);
  window.vitvizState?.set("attention", values, { quiet });
}

function update(ev) {  // every interaction: redraw in the next frame, record event → frame time
  if (S.t0 === null) S.t0 = ev && ev.timeStamp ? ev.timeStamp : performance.now();
  if (S.raf) return;
  S.raf = requestAnimationFrame(() => {
    S.raf = null;
    draw();
    S.timings.push(performance.now() - S.t0);
    root.dataset.latency = S.timings[S.timings.length - 1].toFixed(2);
    S.t0 = null;
    publish(false);
  });
}

function setLayer(l, ev) {
  S.layer = Math.max(0, Math.min(S.p.layers - 1, l));
  $(".vx-layer").value = S.layer + 1;
  update(ev);
}

function decodeRows(r) { return r.data ? { heads: r.heads, data: floats(r.data, r.dtype) } : r; }


function canvas(parent, cssW, cssH) {
  const cv = hiDpiCanvas(parent, cssW, cssH);
  cv.addEventListener("pointermove", (ev) => {
    const rc = cellAt(ev, cv, S.p.grid);
    if (!S.pinned && rc && (!S.query || rc[0] !== S.query[0] || rc[1] !== S.query[1])) { S.query = rc; update(ev); }
  });
  cv.addEventListener("pointerleave", (ev) => { if (!S.pinned && S.query) { S.query = null; update(ev); } });
  cv.addEventListener("click", (ev) => { S.query = cellAt(ev, cv, S.p.grid); S.pinned = !!S.query && !S.pinned; update(ev); });
  return cv;
}

function build(p) {
  root = element.querySelector(".vx");
  root.__vx = S;
  if (!p || !p.cls) { root.innerHTML = ""; S.p = null; return; }
  const [gh, gw] = p.grid, fit = (side) => (gw >= gh ? [side, (side * gh) / gw] : [(side * gw) / gh, side]);
  const st = p.state, clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, v));
  Object.assign(S, { p, n: gh * gw, cls: floats(p.cls), roll: floats(p.rollout), rows: {}, pending: {}, strip: null,
                     layer: clamp(st.layer - 1, 0, p.layers - 1), head: clamp(st.head, -1, p.heads - 1),
                     query: st.query, pinned: !!st.query, keep: st.keep, alpha: st.alpha, cmap: st.cmap,
                     published: null });
  for (const [l, r] of Object.entries(p.rows)) S.rows[Number(l)] = decodeRows(r);
  for (const [name, b] of Object.entries(p.colormaps)) S.luts[name] = bytes(b);
  root.innerHTML = `
    <div class="vx-bar">
      <label>layer <input class="vx-layer" type="range" min="1" max="${p.layers}" step="1" value="${S.layer + 1}"></label>
      <output class="vx-layer-out"></output>
      <label>keep <input class="vx-keep" type="range" min="${p.fields.keep.lo}" max="${p.fields.keep.hi}"
        step="${p.fields.keep.step}" value="${S.keep}"></label>
      <output class="vx-keep-out"></output>
      <label>overlay <input class="vx-alpha" type="range" min="${p.fields.alpha.lo}" max="${p.fields.alpha.hi}"
        step="${p.fields.alpha.step}" value="${S.alpha}"></label>
      <output class="vx-alpha-out"></output>
      <select class="vx-cmap" aria-label="colormap">${p.fields.cmap.choices.map((c) =>
        `<option${c === S.cmap ? " selected" : ""}>${c}</option>`).join("")}</select>
    </div>
    <div class="vx-main">
      <figure class="vx-big"><figcaption aria-live="polite"></figcaption></figure>
      <div class="vx-heads"></div>
    </div>
    <div class="vx-strip" tabindex="0" role="group" title="class token, head mean, per layer; then the rollout. Drag across to scrub."
      aria-label="layer strip: the class token's head-mean map per layer, then the rollout; keys [ and ] change the layer"></div>
    <p class="vx-help">Point at a patch to use it as the query (click to pin it, Esc for the class token). Keys:
      arrows move the query, 0–${p.heads - 1} pick a head, m the head mean, [ and ] the layer.</p>`;
  const [bw, bh] = fit(400), [sw, sh] = fit(124), [tw, th] = fit(80);
  canvas($(".vx-big"), bw, bh);
  for (let h = -1; h < p.heads; h++) {
    const fig = document.createElement("figure");
    fig.className = "vx-head"; fig.dataset.h = h; fig.innerHTML = "<figcaption></figcaption>";
    canvas(fig, sw, sh).addEventListener("click", () => { S.head = h; update(); });
    $(".vx-heads").append(fig);
  }
  for (let l = 0; l <= p.layers; l++) {
    const fig = document.createElement("figure"), id = l === p.layers ? -1 : l;
    fig.className = "vx-step"; fig.dataset.l = id;
    fig.innerHTML = `<figcaption>${id < 0 ? "rollout" : "layer " + (l + 1)}</figcaption>`;
    hiDpiCanvas(fig, tw, th);
    const pick = (ev) => { if (id >= 0 && (ev.type === "click" || ev.buttons === 1) && id !== S.layer) setLayer(id, ev); };
    fig.addEventListener("click", pick); fig.addEventListener("pointermove", pick);
    $(".vx-strip").append(fig);
  }
  $(".vx-layer").addEventListener("input", (ev) => setLayer(Number(ev.target.value) - 1, ev));
  $(".vx-keep").addEventListener("input", (ev) => { S.keep = Number(ev.target.value); update(ev); });
  $(".vx-alpha").addEventListener("input", (ev) => { S.alpha = Number(ev.target.value); update(ev); });
  $(".vx-cmap").addEventListener("change", (ev) => { S.cmap = ev.target.value; update(ev); });
  S.img = new Image();
  S.img.onload = () => update();
  S.img.src = p.image;
  root.dataset.bytes = p.bytes;
  publish(true);  // the carrier holds the settings as used (the server's figures were drawn with them already)
}

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

watch("value", () => build(props.value));
build(props.value);
