// vitviz position-similarity map (after common.js): point at a position and every cell shows how similar its
// embedding is to the one under the pointer. The whole table comes once from the server (render/browser.py).
let root = element.querySelector(".vx");
const S = { p: null, sim: null, pos: null, lo: 0, hi: 1 };

function draw() {
  if (!S.p) return;
  const [R, C] = S.p.grid, n = R * C, [r, c] = S.pos, q = r * C + c, row = S.sim.subarray(q * n, q * n + n);
  const cv = root.querySelector("canvas"), ctx = cv.getContext("2d"), lut = bytes(S.p.colormaps[S.p.cmap]);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(heatImage(row, R, C, lut, S.lo, S.hi, 1), 0, 0, cv.width, cv.height);
  const cw = cv.width / C, ch = cv.height / R;
  if (cw >= 44 * (window.devicePixelRatio || 1) && ch >= 30) {  // big cells: print the numbers too
    ctx.font = `${Math.round(Math.min(cw / 3.2, 22 * (window.devicePixelRatio || 1)))}px sans-serif`;
    ctx.textAlign = "center"; ctx.textBaseline = "middle";
    for (let i = 0; i < n; i++) {
      const k = colourIndex(row[i], S.lo, S.hi), light = 0.3 * lut[k] + 0.6 * lut[k + 1] + 0.1 * lut[k + 2] > 140;
      ctx.fillStyle = light ? "#000" : "#fff";
      ctx.fillText(fixed(row[i], 2), (i % C + 0.5) * cw, (Math.floor(i / C) + 0.5) * ch);
    }
  }
  ctx.strokeStyle = "#ff3b30"; ctx.lineWidth = Math.max(3, cv.width / 120);
  ctx.strokeRect(c * cw, r * ch, cw, ch);
  let low = 0;
  for (let i = 1; i < n; i++) if (row[i] < row[low]) low = i;
  const right = c + 1 < C ? row[q + 1] : null, cap = root.querySelector("figcaption");
  cap.textContent = `${S.p.kind} similarity to position (${r}, ${c}): itself ${fixed(row[q], 3)}` +
    (right === null ? "" : `, the next position to the right ${fixed(right, 3)}`) +
    `, least similar (${Math.floor(low / C)}, ${low % C}) at ${fixed(row[low], 3)}.`;
  Object.assign(cap.dataset, { pos: `${r},${c}`, self: row[q], right: right ?? "", low: row[low] });
}

function build(p) {
  root = element.querySelector(".vx");
  if (!p || !p.sim) { root.innerHTML = ""; S.p = null; return; }
  const [R, C] = p.grid, side = 380, w = C >= R ? side : (side * C) / R, h = C >= R ? (side * R) / C : side;
  Object.assign(S, { p, sim: floats(p.sim, p.dtype), pos: [R >> 1, C >> 1] });
  S.lo = Infinity; S.hi = -Infinity;
  for (const v of S.sim) { if (v < S.lo) S.lo = v; if (v > S.hi) S.hi = v; }
  root.innerHTML = `<p class="vx-title">${p.name}: point at a position (or use the arrow keys)</p>
    <figure><figcaption aria-live="polite"></figcaption></figure>
    <div class="vx-scale"><span>${fixed(S.lo, 2)}</span><canvas class="vx-bar"></canvas><span>${fixed(S.hi, 2)}</span>
    <span>one colour scale for every position</span></div>`;
  followCells(S, "pos", hiDpiCanvas(root.querySelector("figure"), w, h), draw);
  const bar = root.querySelector(".vx-bar"), ramp = new Float32Array(256).map((_, i) => i);
  bar.width = 256; bar.height = 1;
  bar.getContext("2d").drawImage(heatImage(ramp, 1, 256, bytes(p.colormaps[p.cmap]), 0, 255, 1), 0, 0);
  draw();
}

watch("value", () => build(props.value));
build(props.value);
