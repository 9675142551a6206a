// Shared by vitviz's browser views (prepended to each view's js_on_load): decoding what the server packs, and
// printing numbers with the server's digits.
function fixed(v, d) {  // Python's format(v, f".{d}f"): v's exact binary value rounded to d decimals, ties to even
  // (JavaScript's toFixed sends a tie up: 12.5 -> "13" where Python writes "12"), so the page and the server's
  // figures and tables print the same digits for the same number.
  if (!Number.isFinite(v)) return String(v);
  const sign = v < 0 || Object.is(v, -0) ? "-" : "", a = Math.abs(v), long = a.toFixed(Math.min(100, d + 40));
  const dot = long.indexOf("."), tail = long.slice(dot + 1 + d);
  if (/^50*$/.test(tail)) {  // exactly half way between two d-digit numbers: keep the even one
    const kept = long.slice(0, dot + 1 + d).replace(/\.$/, "");
    if (Number(kept[kept.length - 1]) % 2 === 0) return sign + kept;
  }
  return sign + a.toFixed(d);
}
function percent(x, d = 1) { return fixed(100 * x, d) + "%"; }  // Python's f"{x:.{d}%}"
function bytes(b64) {  // base64 -> Uint8Array
  const s = atob(b64), u = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) u[i] = s.charCodeAt(i);
  return u;
}
function floats(b64, dtype) {  // little-endian float32, or IEEE float16 widened to float32 (base64 or raw bytes)
  const u = typeof b64 === "string" ? bytes(b64) : new Uint8Array(b64);
  if (dtype !== "f2") return new Float32Array(u.buffer);
  if (typeof Float16Array !== "undefined") return new Float32Array(new Float16Array(u.buffer));  // native, fast
  const h = new Uint16Array(u.buffer), out = new Float32Array(h.length);
  for (let i = 0; i < h.length; i++) {
    const s = h[i] & 0x8000 ? -1 : 1, e = (h[i] >> 10) & 31, f = h[i] & 1023;
    out[i] = e === 0 ? s * f * 2 ** -24 : e === 31 ? (f ? NaN : s * Infinity) : s * (1 + f / 1024) * 2 ** (e - 15);
  }
  return out;
}
function colourIndex(v, lo, hi) {  // as matplotlib: t in [0, 1] -> entry floor(256 t) of a 256-entry table
  const t = hi - lo > 1e-12 ? Math.min(1, Math.max(0, (v - lo) / (hi - lo))) : 0;
  return 3 * Math.min(255, Math.floor(t * 256));
}
const heatCanvases = {};
function heatImage(values, rows, cols, lut, lo, hi, alpha) {  // (rows, cols) values -> an RGBA canvas, one pixel each
  const px = new ImageData(cols, rows), a = Math.round(alpha * 255), key = rows + "x" + cols;
  for (let i = 0; i < values.length; i++) {
    const k = colourIndex(values[i], lo, hi);
    px.data[4 * i] = lut[k]; px.data[4 * i + 1] = lut[k + 1]; px.data[4 * i + 2] = lut[k + 2]; px.data[4 * i + 3] = a;
  }
  const off = heatCanvases[key] || (heatCanvases[key] = new OffscreenCanvas(cols, rows));  // reused: drawn at once
  off.getContext("2d").putImageData(px, 0, 0);
  return off;
}
function hiDpiCanvas(parent, cssW, cssH) {
  const cv = document.createElement("canvas"), dpr = window.devicePixelRatio || 1;
  cv.width = Math.round(cssW * dpr); cv.height = Math.round(cssH * dpr);
  cv.style.width = cssW + "px"; cv.style.height = "auto"; cv.style.maxWidth = "100%";  // shrinks on a phone
  parent.prepend(cv);
  return cv;
}
const ARROWS = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
function stepCell(key, cell, grid) {  // an arrow key moves a (row, col) cell inside a (rows, cols) grid; else null
  if (!ARROWS[key]) return null;
  const [dr, dc] = ARROWS[key];
  return [Math.max(0, Math.min(grid[0] - 1, cell[0] + dr)), Math.max(0, Math.min(grid[1] - 1, cell[1] + dc))];
}
function cellAt(ev, cv, grid) {  // the (row, col) of a (rows, cols) grid under the pointer, or null outside it
  const b = cv.getBoundingClientRect();
  const r = Math.floor(((ev.clientY - b.top) / b.height) * grid[0]), c = Math.floor(((ev.clientX - b.left) / b.width) * grid[1]);
  return r >= 0 && c >= 0 && r < grid[0] && c < grid[1] ? [r, c] : null;
}
function followCells(state, field, cv, draw) {  // pointer and arrow keys move state[field] over state.p.grid
  cv.addEventListener("pointermove", (ev) => {
    const rc = cellAt(ev, cv, state.p.grid), at = state[field];
    if (rc && (rc[0] !== at[0] || rc[1] !== at[1])) { state[field] = rc; requestAnimationFrame(draw); }
  });
  if (element.__vxKeys) return;  // one key listener for the element's lifetime
  element.__vxKeys = true;
  element.addEventListener("keydown", (ev) => {
    const next = state.p && stepCell(ev.key, state[field], state.p.grid);
    if (!next) return;
    state[field] = next;
    ev.preventDefault();
    requestAnimationFrame(draw);
  });
}
function serverFile(path) {  // fetch a file the server wrote for this page (its own route, under the app's root)
  const root = (window.gradio_config && window.gradio_config.root) || "";
  return fetch(`${root.replace(/\/$/, "")}/gradio_api/file=${path}`).then((r) => {
    if (!r.ok) throw new Error(`the server answered ${r.status}`);
    return r.arrayBuffer();
  });
}
