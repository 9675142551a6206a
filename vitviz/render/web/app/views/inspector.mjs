// The patch inspector on the page at /next: point at a patch (or move with the arrow keys) and see it cut out,
// flattened (red, then green, then blue, row by row) and projected to its embedding, computed here from the
// fitted picture and the projection the Patches answer brings once (answer.data.inspector,
// vitviz/render/browser.py patches_payload).

import { colourIndex, stepCell } from "../../lib/maps.mjs";
import { bytes, fixed, floats } from "../../lib/numbers.mjs";
import { cellAt, ensureStyles, fitGrid, hiDpiCanvas, loadImage } from "./canvas.mjs";

// a patch's flattened pixels in [0, 1] (3·P·P: channel, row, column) and its embedding W·x + b (D), in float64.
// pix: RGBA bytes of the fitted picture (width = cols·P); W: (D, 3·P·P); b: (D,)
export function embedPatch(pix, cols, P, W, b, r, c) {
  const width = cols * P, flat = new Float64Array(3 * P * P);
  for (let ch = 0; ch < 3; ch++) for (let y = 0; y < P; y++) for (let x = 0; x < P; x++)
    flat[(ch * P + y) * P + x] = pix[((r * P + y) * width + c * P + x) * 4 + ch] / 255;
  const D = b.length, emb = new Float64Array(D);
  for (let d = 0; d < D; d++) {
    let acc = b[d];
    for (let i = 0; i < flat.length; i++) acc += W[d * flat.length + i] * flat[i];
    emb[d] = acc;
  }
  return { flat, emb };
}

function strip(cv, colours) {  // one row of RGB colours, stretched over the canvas
  const img = new ImageData(colours.length / 3, 1);
  for (let i = 0; i < colours.length / 3; i++) img.data.set([colours[3 * i], colours[3 * i + 1], colours[3 * i + 2], 255], 4 * i);
  const off = new OffscreenCanvas(img.width, 1), ctx = cv.getContext("2d");
  off.getContext("2d").putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, cv.width, cv.height);
}

export function drawInspector({ figs, answer, page }) {
  const p = answer && answer.data && answer.data.inspector;
  if (!p || !p.weight) return;
  ensureStyles(page.version);
  const [gh, gw] = p.grid, P = p.patch, W = floats(p.weight), b = floats(p.bias);
  const S = { at: [gh >> 1, gw >> 1], img: null, pix: null };
  const el = document.createElement("div");
  el.className = "vxb-inspector";
  el.tabIndex = 0;
  el.setAttribute("role", "group");
  el.setAttribute("aria-label", "patch inspector: point at a patch, or use the arrow keys");
  el.innerHTML = `<p class="vxb-title">Patch inspector: point at a patch (or use the arrow keys)</p>
    <figure><figcaption class="vxb-cap" aria-live="polite"></figcaption></figure>
    <p class="vxb-label">flattened pixels</p><canvas class="vxb-flat" width="640" height="28"></canvas>
    <p class="vxb-label">embedding (purple negative, orange positive)</p><canvas class="vxb-emb" width="640" height="28"></canvas>`;
  const [w, h] = fitGrid(p.grid, 420), cv = hiDpiCanvas(el.querySelector("figure"), w, h);
  cv.classList.add("vxb-pic");
  const draw = (ev) => {
    if (!S.pix) return;
    const ctx = cv.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(S.img, 0, 0, cv.width, cv.height);
    const cw = cv.width / gw, ch = cv.height / gh;
    if (cw >= 6) {
      ctx.strokeStyle = "rgba(255,255,255,0.8)"; ctx.lineWidth = 1; ctx.beginPath();
      for (let c = 1; c < gw; c++) { ctx.moveTo(c * cw, 0); ctx.lineTo(c * cw, cv.height); }
      for (let r = 1; r < gh; r++) { ctx.moveTo(0, r * ch); ctx.lineTo(cv.width, r * ch); }
      ctx.stroke();
    }
    const [r, c] = S.at;
    ctx.strokeStyle = "#ffc800"; ctx.lineWidth = Math.max(3, cv.width / 150); ctx.strokeRect(c * cw, r * ch, cw, ch);
    const { flat, emb } = embedPatch(S.pix, gw, P, W, b, r, c), per = P * P, tint = new Uint8Array(3 * flat.length);
    for (let i = 0; i < flat.length; i++) tint[3 * i + Math.floor(i / per)] = Math.round(255 * flat[i]);
    strip(el.querySelector(".vxb-flat"), tint);
    let lim = 0;
    for (const v of emb) lim = Math.max(lim, Math.abs(v));
    const lut = bytes(p.colormaps.PuOr_r), cols = new Uint8Array(3 * emb.length);
    emb.forEach((v, i) => { const k = colourIndex(v, -lim || -1, lim || 1); cols.set(lut.subarray(k, k + 3), 3 * i); });
    strip(el.querySelector(".vxb-emb"), cols);
    const cap = el.querySelector(".vxb-cap");
    cap.textContent = `patch p${r},${c}: ${flat.length.toLocaleString()} = ${P}·${P}·3 numbers (red, then green, then ` +
      `blue, row by row) → ${emb.length} after the projection: ${Array.from(emb.slice(0, 4), (v) => fixed(v, 3)).join(", ")}, …`;
    Object.assign(cap.dataset, { patch: `${r},${c}`, flat: flat.length, emb: JSON.stringify(Array.from(emb)) });
    if (ev && ev.timeStamp) el.dataset.latency = (performance.now() - ev.timeStamp).toFixed(2);
  };
  cv.addEventListener("pointermove", (ev) => {
    const rc = cellAt(ev, cv, p.grid);
    if (rc && (rc[0] !== S.at[0] || rc[1] !== S.at[1])) { S.at = rc; draw(ev); }
  });
  el.addEventListener("keydown", (ev) => {
    const next = stepCell(ev.key, S.at, p.grid);
    if (!next) return;
    ev.preventDefault();
    S.at = next;
    draw(ev);
  });
  figs.append(el);
  loadImage(p.image).then((img) => {
    const off = new OffscreenCanvas(img.width, img.height), ctx = off.getContext("2d", { willReadFrequently: true });
    ctx.drawImage(img, 0, 0);
    S.img = img;
    S.pix = ctx.getImageData(0, 0, img.width, img.height).data;  // the exact pixels (a lossless PNG)
    draw();
  }).catch(() => { el.querySelector(".vxb-cap").textContent = "the picture did not load: show the view again"; });
}
