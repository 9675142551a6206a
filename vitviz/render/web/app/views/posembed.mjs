// The position-similarity map on the page at /next: point at a position (or move it with the arrow keys) and every
// cell shows how similar its embedding is to that one's. The whole table comes once with the Position embeddings
// answer (answer.data.similarity_map, vitviz/render/browser.py posembed_payload); nothing is asked of the server.

import { colourIndex, stepCell } from "../../lib/maps.mjs";
import { bytes, fixed, floats } from "../../lib/numbers.mjs";
import { cellAt, ensureStyles, fitGrid, heatImage, hiDpiCanvas } from "./canvas.mjs";

// server text (model and class names from an operator's files) goes into HTML escaped
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

// one row of the table as the caption says it: itself, the next position to the right, the least similar one
export function similarityWords(row, pos, grid) {
  const C = grid[1], [r, c] = pos, q = r * C + c;
  let low = 0;
  for (let i = 1; i < row.length; i++) if (row[i] < row[low]) low = i;
  return { self: row[q], right: c + 1 < C ? row[q + 1] : null, low: row[low], lowAt: [Math.floor(low / C), low % C] };
}

export function drawSimilarity({ figs, answer, page }) {
  const p = answer && answer.data && answer.data.similarity_map;
  if (!p || !p.sim) return;
  ensureStyles(page.version);
  const [R, C] = p.grid, n = R * C, sim = floats(p.sim, p.dtype), lut = bytes(p.colormaps[p.cmap]);
  let lo = Infinity, hi = -Infinity;
  for (const v of sim) { if (v < lo) lo = v; if (v > hi) hi = v; }
  const S = { pos: [R >> 1, C >> 1], timings: [] };
  const el = document.createElement("div");
  el.className = "vxb-similarity";
  el.tabIndex = 0;
  el.setAttribute("role", "group");
  el.setAttribute("aria-label", `${p.name}: point at a position, or use the arrow keys`);
  el.innerHTML = `<p class="vxb-title">${esc(p.name)}: point at a position (or use the arrow keys)</p>
    <figure><figcaption aria-live="polite"></figcaption></figure>
    <div class="vxb-scale"><span>${fixed(lo, 2)}</span><canvas class="vxb-ramp" width="256" height="1"></canvas>
    <span>${fixed(hi, 2)}</span><span>one colour scale for every position</span></div>`;
  const [w, h] = fitGrid(p.grid, 380), cv = hiDpiCanvas(el.querySelector("figure"), w, h);
  const draw = (ev) => {
    const [r, c] = S.pos, q = r * C + c, row = sim.subarray(q * n, q * n + n), ctx = cv.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(heatImage(row, R, C, lut, lo, hi, 1), 0, 0, cv.width, cv.height);
    const cw = cv.width / C, ch = cv.height / R, dpr = window.devicePixelRatio || 1;
    if (cw >= 44 * dpr && ch >= 30) {  // big cells: the numbers too
      ctx.font = `${Math.round(Math.min(cw / 3.2, 22 * dpr))}px sans-serif`;
      ctx.textAlign = "center"; ctx.textBaseline = "middle";
      for (let i = 0; i < n; i++) {
        const k = colourIndex(row[i], lo, hi), light = 0.3 * lut[k] + 0.6 * lut[k + 1] + 0.1 * lut[k + 2] > 140;
        ctx.fillStyle = light ? "#000" : "#fff";
        ctx.fillText(fixed(row[i], 2), (i % C + 0.5) * cw, (Math.floor(i / C) + 0.5) * ch);
      }
    }
    ctx.strokeStyle = "#ff3b30"; ctx.lineWidth = Math.max(3, cv.width / 120);
    ctx.strokeRect(c * cw, r * ch, cw, ch);
    const got = similarityWords(row, S.pos, p.grid), cap = el.querySelector("figcaption");
    cap.textContent = `${p.kind} similarity to position (${r}, ${c}): itself ${fixed(got.self, 3)}` +
      (got.right === null ? "" : `, the next position to the right ${fixed(got.right, 3)}`) +
      `, least similar (${got.lowAt[0]}, ${got.lowAt[1]}) at ${fixed(got.low, 3)}.`;
    Object.assign(cap.dataset, { pos: `${r},${c}`, self: got.self, right: got.right ?? "", low: got.low });
    if (ev && ev.timeStamp) el.dataset.latency = (performance.now() - ev.timeStamp).toFixed(2);
  };
  cv.addEventListener("pointermove", (ev) => {
    const rc = cellAt(ev, cv, p.grid);
    if (rc && (rc[0] !== S.pos[0] || rc[1] !== S.pos[1])) { S.pos = rc; draw(ev); }
  });
  el.addEventListener("keydown", (ev) => {
    const next = stepCell(ev.key, S.pos, p.grid);
    if (!next) return;
    ev.preventDefault();
    S.pos = next;
    draw(ev);
  });
  const ramp = el.querySelector(".vxb-ramp"), steps = new Float32Array(256).map((_, i) => i);
  ramp.getContext("2d").drawImage(heatImage(steps, 1, 256, lut, 0, 255, 1), 0, 0);
  figs.append(el);
  draw();
}
