// vitviz patch inspector (after common.js): point at a patch and see it cut out, flattened (R, then G, then B,
// row by row) and projected to its embedding, computed here from the picture and the projection sent once.
let root = element.querySelector(".vx");
const S = { p: null, pix: null, W: null, b: null, at: null };

function vectors(r, c) {  // the patch's flattened pixels in [0, 1] (3·P·P) and its embedding (D)
  const P = S.p.patch, width = S.p.grid[1] * P, flat = new Float64Array(3 * P * P);
  for (let ch = 0; ch < 3; ch++) for (let y = 0; y < P; y++) for (let x = 0; x < P; x++)
    flat[(ch * P + y) * P + x] = S.pix[((r * P + y) * width + c * P + x) * 4 + ch] / 255;
  const D = S.p.dim, emb = new Float64Array(D);
  for (let d = 0; d < D; d++) {
    let acc = S.b[d];
    for (let i = 0; i < flat.length; i++) acc += S.W[d * flat.length + i] * flat[i];
    emb[d] = acc;
  }
  return [flat, emb];
}

function strip(cv, colours) {  // one row of colours, stretched to the canvas
  const img = new ImageData(colours.length / 3, 1);
  for (let i = 0; i < colours.length / 3; i++) img.data.set([colours[3 * i], colours[3 * i + 1], colours[3 * i + 2], 255], 4 * i);
  const off = new OffscreenCanvas(img.width, 1), ctx = cv.getContext("2d");
  off.getContext("2d").putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, 0, 0, cv.width, cv.height);
}

function draw() {
  if (!S.p || !S.pix) return;
  const [gh, gw] = S.p.grid, P = S.p.patch, cv = root.querySelector(".vx-pic"), ctx = cv.getContext("2d");
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
  const [flat, emb] = vectors(r, c), n = P * P, tint = new Uint8Array(3 * flat.length);
  for (let i = 0; i < flat.length; i++) tint[3 * i + Math.floor(i / n)] = Math.round(255 * flat[i]);  // R, G, B runs
  strip(root.querySelector(".vx-flat"), tint);
  let lim = 0;
  for (const v of emb) lim = Math.max(lim, Math.abs(v));
  const lut = bytes(S.p.colormaps.PuOr_r), cols = new Uint8Array(3 * emb.length);
  emb.forEach((v, i) => cols.set(lut.subarray(colourIndex(v, -lim || -1, lim || 1), colourIndex(v, -lim || -1, lim || 1) + 3), 3 * i));
  strip(root.querySelector(".vx-emb"), cols);
  const cap = root.querySelector(".vx-cap");
  cap.textContent = `patch p${r},${c}: ${flat.length.toLocaleString()} = ${P}·${P}·3 numbers (red, then green, then ` +
    `blue, row by row) → ${emb.length} after the projection: ${Array.from(emb.slice(0, 4), (v) => fixed(v, 3)).join(", ")}, …`;
  Object.assign(cap.dataset, { patch: `${r},${c}`, flat: flat.length, emb: JSON.stringify(Array.from(emb)) });
}

function build(p) {
  root = element.querySelector(".vx");
  if (!p || !p.weight) { root.innerHTML = ""; S.p = null; return; }
  const [gh, gw] = p.grid, side = 420, w = gw >= gh ? side : (side * gw) / gh, h = gw >= gh ? (side * gh) / gw : side;
  Object.assign(S, { p, W: floats(p.weight), b: floats(p.bias), at: [gh >> 1, gw >> 1], pix: null });
  root.innerHTML = `<figure><figcaption class="vx-cap" aria-live="polite"></figcaption></figure>
    <p class="vx-label">flattened pixels</p><canvas class="vx-flat"></canvas>
    <p class="vx-label">embedding (purple negative, orange positive)</p><canvas class="vx-emb"></canvas>`;
  const cv = hiDpiCanvas(root.querySelector("figure"), w, h);
  cv.classList.add("vx-pic");
  for (const sel of [".vx-flat", ".vx-emb"]) { const s = root.querySelector(sel); s.width = 640; s.height = 28; }
  followCells(S, "at", cv, draw);
  S.img = new Image();
  S.img.onload = () => {
    const off = new OffscreenCanvas(S.img.width, S.img.height), ctx = off.getContext("2d", { willReadFrequently: true });
    ctx.drawImage(S.img, 0, 0);
    S.pix = ctx.getImageData(0, 0, S.img.width, S.img.height).data;  // the exact pixels (lossless PNG)
    draw();
  };
  S.img.src = p.image;
}

watch("value", () => build(props.value));
build(props.value);
