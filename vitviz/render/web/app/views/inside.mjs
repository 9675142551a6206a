// "Inside one head" on the page at /next: one head of one layer, any query. The answer brings that head's q, k, v
// and the model's own output once (answer.data.inside, vitviz/render/browser.py inside_payload); pointing at a
// patch (or the arrow keys) redoes the head's arithmetic here as vitviz.analyses.heads.trace does (scores
// q·k·scale, softmax, Σ weights·v) and compares the sum with the model's output. Nothing is asked of the server.

import { headTrace, stepCell } from "../../lib/maps.mjs";
import { bytes, fixed, floats, percent } from "../../lib/numbers.mjs";
import { cellAt, ensureStyles, fitGrid, heatImage, hiDpiCanvas, loadImage } from "./canvas.mjs";

// the token a query's words name: [CLS], a register, or a patch as (row, column)
export function tokenName(t, prefix, gw) {
  return t === 0 ? "[CLS]" : t < prefix ? "a register" : `patch (${Math.floor((t - prefix) / gw)}, ${(t - prefix) % gw})`;
}

export function drawInside({ figs, answer, page }) {
  const p = answer && answer.data && answer.data.inside;
  if (!p || !p.q) return;
  ensureStyles(page.version);
  const [gh, gw] = p.grid, P = p.prefix, d = p.d, lut = bytes(p.colormaps[p.cmap]);
  const S = { q: floats(p.q), k: floats(p.k), v: floats(p.v), out: floats(p.out), query: p.query, img: null };
  S.trace = (t) => headTrace(S.q, S.k, S.v, S.out, p.tokens, d, p.scale, t);
  const el = document.createElement("div");
  el.className = "vxb-inside";
  el.tabIndex = 0;
  el.setAttribute("role", "group");
  el.setAttribute("aria-label", "inside one head: point at a patch, or use the arrow keys, to make it the query");
  el.__vx = S;
  el.innerHTML = `<div class="vxb-in">
      <figure class="vxb-in-scores"><figcaption>scores q·k/√d</figcaption></figure>
      <figure class="vxb-in-weights"><figcaption>softmax (the attention row)</figcaption></figure>
      <figure class="vxb-in-sum"><figcaption>Σ aⱼvⱼ (dots) vs the model (bars)</figcaption></figure>
    </div><p class="vxb-in-caption" aria-live="polite"></p>`;
  const $ = (sel) => el.querySelector(sel);
  const paintMap = (cv, values) => {  // the patch keys' values over the picture (prefix keys left out)
    const ctx = cv.getContext("2d"), a = values.subarray(P);
    let lo = Infinity, hi = -Infinity;
    for (const x of a) { if (x < lo) lo = x; if (x > hi) hi = x; }
    ctx.imageSmoothingEnabled = true;
    ctx.drawImage(S.img, 0, 0, cv.width, cv.height);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(heatImage(a, gh, gw, lut, lo, hi, 0.75), 0, 0, cv.width, cv.height);
    const t = S.query - P;
    if (t >= 0) {
      const cw = cv.width / gw, ch = cv.height / gh;
      ctx.strokeStyle = "#00e5ff"; ctx.lineWidth = Math.max(2, cv.width / 120);
      ctx.strokeRect((t % gw) * cw, Math.floor(t / gw) * ch, cw, ch);
    }
    return [lo, hi];
  };
  const paintBars = (cv, model, ours) => {  // the model's output (bars) and the sum made here (dots), per dimension
    const ctx = cv.getContext("2d"), W = cv.width, H = cv.height, n = model.length;
    let lo = 0, hi = 0;
    for (let c = 0; c < n; c++) { lo = Math.min(lo, model[c], ours[c]); hi = Math.max(hi, model[c], ours[c]); }
    const y = (v) => H - 8 - ((v - lo) / (hi - lo || 1)) * (H - 16), bw = W / n;
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
    ctx.fillStyle = "#0072b2";
    for (let c = 0; c < n; c++) { const a = y(0), b = y(model[c]); ctx.fillRect(c * bw, Math.min(a, b), Math.max(1, bw - 1), Math.abs(a - b)); }
    ctx.fillStyle = "#e69f00";
    const r = Math.max(2, Math.min(5, bw / 2));
    for (let c = 0; c < n; c++) { ctx.beginPath(); ctx.arc((c + 0.5) * bw, y(ours[c]), r, 0, 2 * Math.PI); ctx.fill(); }
    ctx.strokeStyle = "#333"; ctx.lineWidth = 1; ctx.beginPath(); ctx.moveTo(0, y(0)); ctx.lineTo(W, y(0)); ctx.stroke();
  };
  const draw = (ev) => {
    if (!S.img) return;
    const tr = S.trace(S.query);
    const [slo, shi] = paintMap($(".vxb-in-scores canvas"), tr.scores);
    paintMap($(".vxb-in-weights canvas"), tr.weights);
    paintBars($(".vxb-in-sum canvas"), S.out.subarray(S.query * d, (S.query + 1) * d), tr.mixed);
    let top = 0, onPrefix = 0;
    for (let j = 1; j < tr.weights.length; j++) if (tr.weights[j] > tr.weights[top]) top = j;
    for (let j = 0; j < P; j++) onPrefix += tr.weights[j];
    const cap = $(".vxb-in-caption");
    cap.textContent = `Layer ${p.layer + 1}, head ${p.head}, ${tokenName(S.query, P, gw)} as the query: scores from ` +
      `${fixed(slo, 2)} to ${fixed(shi, 2)} over the patches; the largest weight, ${percent(tr.weights[top])}, on ` +
      `${tokenName(top, P, gw)}; ${percent(onPrefix)} on the [CLS] token. The weighted sum made here differs from ` +
      `the model's output by at most ${tr.error.toExponential(1)}.`;
    Object.assign(cap.dataset, { query: S.query, error: tr.error, top });
    if (ev && ev.timeStamp) el.dataset.latency = (performance.now() - ev.timeStamp).toFixed(2);
  };
  const [w, h] = fitGrid(p.grid, 300);
  for (const sel of [".vxb-in-scores", ".vxb-in-weights"]) {
    const cv = hiDpiCanvas($(sel), w, h);
    cv.addEventListener("pointermove", (ev) => {
      const rc = cellAt(ev, cv, p.grid), t = rc ? P + rc[0] * gw + rc[1] : null;
      if (t !== null && t !== S.query) { S.query = t; draw(ev); }
    });
    cv.addEventListener("pointerleave", (ev) => { if (S.query !== p.query) { S.query = p.query; draw(ev); } });
  }
  hiDpiCanvas($(".vxb-in-sum"), w, h);
  el.addEventListener("keydown", (ev) => {  // arrows move the query patch (from the one the settings chose)
    const t = Math.max(S.query - P, 0), next = stepCell(ev.key, [Math.floor(t / gw), t % gw], p.grid);
    if (!next) return;
    S.query = P + next[0] * gw + next[1];
    ev.preventDefault();
    draw(ev);
  });
  figs.append(el);
  loadImage(p.image).then((img) => { S.img = img; draw(); })
    .catch(() => { $(".vxb-in-caption").textContent = "the picture did not load: show the view again"; });
}
