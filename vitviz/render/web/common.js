// Shared by vitviz's browser views (prepended to each view's js_on_load, after lib/: numbers and maps): drawing
// heat maps on canvases, following the pointer and the arrow keys, fetching the server's files.
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
  return fetch(under(`gradio_api/file=${path}`)).then((r) => {
    if (!r.ok) throw new Error(`the server answered ${r.status}`);
    return r.arrayBuffer();
  });
}
