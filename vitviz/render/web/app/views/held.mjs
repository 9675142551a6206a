// What the views drawn in the browser read from the page's store and write back to it, with no DOM: the settings
// a view holds while it draws (the explorer's layer, head, threshold, opacity, colours and pinned patch), the
// marked patches as the link writes them, and a writer that waits for a burst of changes to end. Node runs these
// (tests/js/views.test.mjs).

import { gText } from "../store.mjs";

const clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, v));

// "r,c" -> [r, c] inside a (rows, cols) grid (clamped), "" or anything else -> null
export function readCell(text, grid) {
  const m = /^(\d{1,4}),(\d{1,4})$/.exec(String(text ?? "").trim());
  if (!m) return null;
  return [clamp(Number(m[1]), 0, grid[0] - 1), clamp(Number(m[2]), 0, grid[1] - 1)];
}

// "r,c;r,c" -> the cells inside a (rows, cols) grid, as "r,c" strings (outside ones left out, repeats once)
export function readCells(text, grid) {
  const out = new Set();
  for (const part of String(text ?? "").split(";")) {
    const m = /^(\d{1,4}),(\d{1,4})$/.exec(part.trim());
    if (m && Number(m[1]) < grid[0] && Number(m[2]) < grid[1]) out.add(`${Number(m[1])},${Number(m[2])}`);
  }
  return out;
}

// cells ("r,c" strings) -> the setting's text, row by row then column ("0,1;2,0"), as the server's Field writes it
export function cellsText(cells) {
  return [...cells].map((k) => k.split(",").map(Number)).sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .map(([r, c]) => `${r},${c}`).join(";");
}

// The explorer's settings as the store's texts say them, fitted to the payload's model and grid: layer from 0,
// head (-1 the head mean), keep, alpha, cmap, query [r, c] or null. `text(name)` gives a held setting's link text;
// `p` is the payload (layers, heads, grid, fields with their words, colormaps); `was` fills what cannot be read.
export function explorerSettings(text, p, was = {}) {
  const num = (name) => {
    const t = String(text(name) ?? ""), words = (p.fields[name] || {}).words || {};
    return t in words ? Number(words[t]) : t.trim() === "" ? NaN : Number(t);
  };
  const layer = num("layer"), head = num("head"), keep = num("keep"), alpha = num("alpha"), cmap = text("cmap");
  return {
    layer: Number.isFinite(layer) ? clamp(Math.round(layer) - 1, 0, p.layers - 1) : (was.layer ?? p.layers - 1),
    head: Number.isFinite(head) ? clamp(Math.round(head), -1, p.heads - 1) : (was.head ?? -1),
    keep: Number.isFinite(keep) ? keep : (was.keep ?? 0.6),
    alpha: Number.isFinite(alpha) ? alpha : (was.alpha ?? 0.6),
    cmap: p.colormaps && cmap in p.colormaps ? cmap : (was.cmap ?? "inferno"),
    query: readCell(text("query"), p.grid),
  };
}

// One held setting as the link writes it (the inverse of explorerSettings): layer counted from 1, head -1 as its
// word ("mean"), numbers as Python's :g, the query "r,c" (or "" for the class token).
export function explorerText(name, value, p) {
  if (name === "layer") return String(value + 1);
  if (name === "head") {
    const words = (p.fields.head || {}).words || {};
    const word = Object.keys(words).find((w) => Number(words[w]) === value);
    return word ?? String(value);
  }
  if (name === "query") return value ? `${value[0]},${value[1]}` : "";
  if (name === "keep" || name === "alpha") return gText(value);
  return String(value);
}

// A writer that holds changes until `wait` ms pass with none (a burst of arrow presses, a drag across the layer
// strip), then hands them over at once: `put({key: text})` merges, `flush()` hands over now, `cancel()` drops.
// `timers` is {set, clear} (setTimeout and clearTimeout unless a test gives its own clock).
export function settleWriter(write, wait = 400, timers = { set: (f, ms) => setTimeout(f, ms), clear: (t) => clearTimeout(t) }) {
  let held = {}, timer = null;
  const flush = () => {
    if (timer !== null) { timers.clear(timer); timer = null; }
    const out = held;
    held = {};
    if (Object.keys(out).length) write(out);
  };
  return {
    put(patch) {
      Object.assign(held, patch);
      if (timer !== null) timers.clear(timer);
      timer = timers.set(flush, wait);
    },
    flush,
    cancel() { if (timer !== null) timers.clear(timer); timer = null; held = {}; },
    pending: () => ({ ...held }),
  };
}
