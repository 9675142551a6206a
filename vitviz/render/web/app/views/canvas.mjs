// Drawing helpers shared by the views drawn in the browser: a map of values as a heat image, a canvas sharp on a
// high-density screen, the grid cell under the pointer, and the views' style sheet (loaded once, from the package).

import { colourIndex } from "../../lib/maps.mjs";
import { under } from "../../lib/server.mjs";

const heatCanvases = new Map();  // one small canvas per grid shape, reused: each is drawn onto a map at once

// (rows, cols) values -> an RGBA canvas one pixel per cell, coloured by a 256-entry RGB table between lo and hi
export function heatImage(values, rows, cols, lut, lo, hi, alpha) {
  const px = new ImageData(cols, rows), a = Math.round(alpha * 255), key = rows + "x" + cols;
  for (let i = 0; i < values.length; i++) {
    const k = colourIndex(values[i], lo, hi);
    px.data[4 * i] = lut[k]; px.data[4 * i + 1] = lut[k + 1]; px.data[4 * i + 2] = lut[k + 2]; px.data[4 * i + 3] = a;
  }
  let off = heatCanvases.get(key);
  if (!off) heatCanvases.set(key, off = new OffscreenCanvas(cols, rows));
  off.getContext("2d").putImageData(px, 0, 0);
  return off;
}

// a canvas of cssW×cssH CSS pixels (times the screen's density in its own pixels), first in `parent`
export function hiDpiCanvas(parent, cssW, cssH) {
  const cv = document.createElement("canvas"), dpr = window.devicePixelRatio || 1;
  cv.width = Math.round(cssW * dpr); cv.height = Math.round(cssH * dpr);
  cv.style.width = cssW + "px"; cv.style.height = "auto"; cv.style.maxWidth = "100%";
  parent.prepend(cv);
  return cv;
}

// the [row, col] of a (rows, cols) grid drawn over `cv` under a pointer event, or null outside it
export function cellAt(ev, cv, grid) {
  const b = cv.getBoundingClientRect();
  const r = Math.floor(((ev.clientY - b.top) / b.height) * grid[0]), c = Math.floor(((ev.clientX - b.left) / b.width) * grid[1]);
  return r >= 0 && c >= 0 && r < grid[0] && c < grid[1] ? [r, c] : null;
}

// a picture (a URL or data URL) as a loaded HTMLImageElement
export function loadImage(src) {
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => resolve(img);
    img.onerror = () => reject(new Error("the picture did not load"));
    img.src = src;
  });
}

// the browser views' styles, added to the page once (served from the package beside this module)
export function ensureStyles(version) {
  if (document.querySelector("link[data-vx-views]")) return;
  const css = document.createElement("link");
  css.rel = "stylesheet";
  css.href = under(`vitviz/web/app/views/views.css?v=${version || ""}`);
  css.dataset.vxViews = "1";
  document.head.appendChild(css);
}

// a box's width and height for a (rows, cols) grid whose longer side is `side` CSS pixels
export function fitGrid(grid, side) {
  const [gh, gw] = grid;
  return gw >= gh ? [side, (side * gh) / gw] : [(side * gw) / gh, side];
}
