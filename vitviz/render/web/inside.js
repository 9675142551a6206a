// vitviz "inside one head": one head of one layer, any query. Runs as gr.HTML's js_on_load after common.js. The
// payload (render/browser.py inside_payload) holds that head's q, k, v and the model's own output, float32; pointing
// at a patch redoes the head's arithmetic here, as vitviz.analyses.heads.trace does: scores_j = q·k_j·scale,
// weights = softmax(scores), out = Σ_j weights_j v_j, and compares the sum with what the model computed.
let root = element.querySelector(".vx");
const S = { p: null, q: null, k: null, v: null, out: null, query: 0, img: null, luts: {}, timings: [] };
root.__vx = S;

function trace(t) {  // token t as the query: {scores, weights, mixed, error} (lib/maps.mjs headTrace)
  const { tokens: T, d, scale } = S.p;
  return headTrace(S.q, S.k, S.v, S.out, T, d, scale, t);
}
S.trace = trace;

const $ = (sel) => root.querySelector(sel);

function paintMap(cv, values, P) {  // patch keys' values over the picture (prefix keys left out)
  const [gh, gw] = S.p.grid, ctx = cv.getContext("2d");
  const a = values.subarray(P);
  let lo = Infinity, hi = -Infinity;
  for (const x of a) { if (x < lo) lo = x; if (x > hi) hi = x; }
  ctx.imageSmoothingEnabled = true;
  ctx.drawImage(S.img, 0, 0, cv.width, cv.height);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(heatImage(a, gh, gw, S.luts[S.p.cmap], lo, hi, 0.75), 0, 0, cv.width, cv.height);
  const t = S.query - P;
  if (t >= 0) {
    const cw = cv.width / gw, ch = cv.height / gh;
    ctx.strokeStyle = "#00e5ff"; ctx.lineWidth = Math.max(2, cv.width / 120);
    ctx.strokeRect((t % gw) * cw, Math.floor(t / gw) * ch, cw, ch);
  }
  return [lo, hi];
}

function paintBars(cv, model, ours) {  // the model's output (bars) and our weighted sum (dots), per dimension
  const ctx = cv.getContext("2d"), W = cv.width, H = cv.height, d = model.length;
  let lo = 0, hi = 0;
  for (let c = 0; c < d; c++) { lo = Math.min(lo, model[c], ours[c]); hi = Math.max(hi, model[c], ours[c]); }
  const y = (v) => H - 8 - ((v - lo) / (hi - lo || 1)) * (H - 16), bw = W / d;
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
  ctx.fillStyle = "#0072b2";
  for (let c = 0; c < d; c++) { const a = y(0), b = y(model[c]); ctx.fillRect(c * bw, Math.min(a, b), Math.max(1, bw - 1), Math.abs(a - b)); }
  ctx.fillStyle = "#e69f00";
  const r = Math.max(2, Math.min(5, bw / 2));
  for (let c = 0; c < d; c++) { ctx.beginPath(); ctx.arc((c + 0.5) * bw, y(ours[c]), r, 0, 2 * Math.PI); ctx.fill(); }
  ctx.strokeStyle = "#333"; ctx.lineWidth = 1; ctx.beginPath(); ctx.moveTo(0, y(0)); ctx.lineTo(W, y(0)); ctx.stroke();
}

function draw() {
  if (!S.p || !S.img || !S.img.complete) return;
  const P = S.p.prefix, [gh, gw] = S.p.grid, tr = trace(S.query), d = S.p.d;
  const [slo, shi] = paintMap($(".vx-in-scores canvas"), tr.scores, P);
  paintMap($(".vx-in-weights canvas"), tr.weights, P);
  paintBars($(".vx-in-sum canvas"), S.out.subarray(S.query * d, (S.query + 1) * d), tr.mixed);
  let top = 0;
  for (let j = 1; j < tr.weights.length; j++) if (tr.weights[j] > tr.weights[top]) top = j;
  const name = (t) => (t === 0 ? "[CLS]" : t < P ? "a register" : `patch (${Math.floor((t - P) / gw)}, ${(t - P) % gw})`);
  let onPrefix = 0;
  for (let j = 0; j < P; j++) onPrefix += tr.weights[j];
  const cap = $(".vx-in-caption");
  cap.textContent = `Layer ${S.p.layer + 1}, head ${S.p.head}, ${name(S.query)} as the query: scores from ` +
    `${fixed(slo, 2)} to ${fixed(shi, 2)} over the patches; the largest weight, ${percent(tr.weights[top])}, ` +
    `on ${name(top)}; ${percent(onPrefix)} on the [CLS] token. Our weighted sum differs from the ` +
    `model's output by at most ${tr.error.toExponential(1)}.`;
  Object.assign(cap.dataset, { query: S.query, error: tr.error, top });
}

function update(ev) {  // a pointer or key event draws at once; the picture arriving, in the next frame
  if (ev && ev.timeStamp) { draw(); S.timings.push(performance.now() - ev.timeStamp); return; }
  requestAnimationFrame(draw);
}

function build(p) {
  root = element.querySelector(".vx");
  root.__vx = S;
  if (!p || !p.q) { root.innerHTML = ""; S.p = null; return; }
  const [gh, gw] = p.grid, side = 300, [w, h] = gw >= gh ? [side, (side * gh) / gw] : [(side * gw) / gh, side];
  Object.assign(S, { p, q: floats(p.q), k: floats(p.k), v: floats(p.v), out: floats(p.out), query: p.query });
  for (const [name, b] of Object.entries(p.colormaps)) S.luts[name] = bytes(b);
  root.innerHTML = `
    <div class="vx-in">
      <figure class="vx-in-scores"><figcaption>scores q·k/√d</figcaption></figure>
      <figure class="vx-in-weights"><figcaption>softmax (the attention row)</figcaption></figure>
      <figure class="vx-in-sum"><figcaption>Σ aⱼvⱼ (dots) vs the model (bars)</figcaption></figure>
    </div>
    <p class="vx-in-caption" aria-live="polite"></p>`;
  for (const sel of [".vx-in-scores", ".vx-in-weights"]) {
    const cv = hiDpiCanvas($(sel), w, h);
    cv.addEventListener("pointermove", (ev) => {
      const rc = cellAt(ev, cv, S.p.grid), t = rc ? S.p.prefix + rc[0] * gw + rc[1] : null;
      if (t !== null && t !== S.query) { S.query = t; update(ev); }
    });
    cv.addEventListener("pointerleave", (ev) => { if (S.query !== S.p.query) { S.query = S.p.query; update(ev); } });
  }
  hiDpiCanvas($(".vx-in-sum"), w, h);
  S.img = new Image();
  S.img.onload = () => update();
  S.img.src = p.image;
}

element.addEventListener("keydown", (ev) => {  // arrows move the query patch (from the one the sliders chose)
  if (!S.p) return;
  const P = S.p.prefix, gw = S.p.grid[1], t = Math.max(S.query - P, 0);
  const next = stepCell(ev.key, [Math.floor(t / gw), t % gw], S.p.grid);
  if (!next) return;
  S.query = P + next[0] * gw + next[1];
  ev.preventDefault();
  update(ev);
});

watch("value", () => build(props.value));
build(props.value);
