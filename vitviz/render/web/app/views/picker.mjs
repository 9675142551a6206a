// Predict-then-test's patch picker on the page at /next: the picture as the model sees it, with its patch grid;
// click or drag to mark the patches you think the model needs (arrow keys move, space or Enter marks). The marks
// are the view's declared setting `patches` (link key tm_patches, "r,c;r,c"), written to the page's store at once
// (so they are in the address and reopen); nothing is asked of the server until "Test my choice" is pressed.
// The picture and grid come with the view's answer or its preview (answer.data.picker,
// vitviz/views/faithful.py picker_payload; vitviz/app/browser_views.py preview).

import { settingText } from "../store.mjs";
import { cellsText, readCells } from "./held.mjs";
import { ensureStyles, fitGrid, loadImage } from "./canvas.mjs";

const KEY = "tm_patches";
const mounted = new WeakMap();  // a panel's root -> its picker (kept while the picture and model are the same)

// the words under the picture for the marked cells ("r,c" strings)
export function marksWords(cells) {
  const t = cellsText(cells), n = cells.size;
  return n ? `${n} patch${n === 1 ? "" : "es"} marked: ${t.replace(/;/g, "; ")}`
    : "No patch marked yet: click or drag on the picture.";
}

export function drawPicker({ root, figs, answer, store, page }) {
  const p = answer && answer.data && answer.data.picker;
  if (!p || !p.grid) return;
  ensureStyles(page.version);
  let x = mounted.get(root);
  if (!x || x.model !== p.model || x.image !== p.image) {
    if (x) x.close();
    x = makePicker(p, store, page);
    mounted.set(root, x);
  }
  figs.prepend(x.el);
  x.follow();
}

function makePicker(p, store, page) {
  const [gh, gw] = p.grid, S = { img: null, chosen: new Set(), at: [gh >> 1, gw >> 1], painting: null, closed: false };
  const el = document.createElement("div");
  el.className = "vxb-picker";
  el.tabIndex = 0;
  el.setAttribute("role", "group");
  el.setAttribute("aria-label", "patch picker: arrow keys move, space or Enter marks a patch");
  const [w, h] = fitGrid(p.grid, 420);
  el.innerHTML = `<canvas width="${Math.round(w)}" height="${Math.round(h)}" aria-hidden="true"></canvas>
    <p class="vxb-cap" role="status" aria-live="polite"></p>
    <p class="vxb-keys">Click or drag to mark patches; arrow keys move, space marks. ${gh}×${gw} patches of
    ${p.patch}×${p.patch} pixels, as ${p.model} sees the picture.</p>
    <button type="button" class="vxb-clear">Clear my marks</button>`;
  el.__picker = S;
  el.dataset.grid = `${gh},${gw}`;
  const cv = el.querySelector("canvas");
  const caption = () => {
    const cap = el.querySelector(".vxb-cap");
    cap.textContent = marksWords(S.chosen);
    cap.dataset.patches = cellsText(S.chosen);
  };
  const draw = () => {
    if (!S.img) return;
    const g = cv.getContext("2d");
    g.imageSmoothingEnabled = false;
    g.drawImage(S.img, 0, 0, cv.width, cv.height);
    const cw = cv.width / gw, ch = cv.height / gh;
    g.fillStyle = "rgba(213, 94, 0, 0.55)";  // Okabe-Ito vermillion: the marked patches
    for (const k of S.chosen) { const [r, c] = k.split(",").map(Number); g.fillRect(c * cw, r * ch, cw, ch); }
    g.strokeStyle = "rgba(255,255,255,0.75)"; g.lineWidth = 1; g.beginPath();
    for (let c = 1; c < gw; c++) { g.moveTo(c * cw, 0); g.lineTo(c * cw, cv.height); }
    for (let r = 1; r < gh; r++) { g.moveTo(0, r * ch); g.lineTo(cv.width, r * ch); }
    g.stroke();
    if (el.contains(document.activeElement)) {  // the keyboard's patch
      const [r, c] = S.at;
      g.strokeStyle = "#ffc800"; g.lineWidth = Math.max(3, cv.width / 150); g.strokeRect(c * cw, r * ch, cw, ch);
    }
  };
  const tell = () => {  // the marks into the store (and so the address); the test waits for its button
    caption();
    store.setting(KEY, cellsText(S.chosen));
  };
  const follow = () => {  // the store's marks (a link opened, the text field typed in), fitted to this grid
    const t = settingText(store.get(), page, KEY), next = readCells(t, p.grid);
    if (cellsText(next) === cellsText(S.chosen)) { caption(); return; }
    S.chosen = next;
    caption();
    draw();
  };
  const unsubscribe = store.subscribe((state, changed) => {
    if ((changed || []).some((c) => c === "link" || c === "settings" || c === "settings:" + KEY)) follow();
  });
  const cellOf = (ev) => {
    const box = cv.getBoundingClientRect();
    const c = Math.floor(((ev.clientX - box.left) / box.width) * gw), r = Math.floor(((ev.clientY - box.top) / box.height) * gh);
    return r >= 0 && r < gh && c >= 0 && c < gw ? [r, c] : null;
  };
  const mark = (cell, on) => { const k = `${cell[0]},${cell[1]}`; if (on) S.chosen.add(k); else S.chosen.delete(k); };
  cv.addEventListener("pointerdown", (ev) => {
    const cell = cellOf(ev);
    if (!cell) return;
    S.painting = !S.chosen.has(`${cell[0]},${cell[1]}`);
    S.at = cell;
    mark(cell, S.painting); draw();
    cv.setPointerCapture?.(ev.pointerId);
  });
  cv.addEventListener("pointermove", (ev) => {
    if (S.painting === null) return;
    const cell = cellOf(ev);
    if (cell) { mark(cell, S.painting); draw(); }
  });
  const done = () => { if (S.painting !== null) { S.painting = null; tell(); } };
  cv.addEventListener("pointerup", done);
  cv.addEventListener("pointercancel", done);
  el.querySelector(".vxb-clear").addEventListener("click", () => { S.chosen.clear(); draw(); tell(); });
  el.addEventListener("keydown", (ev) => {
    const [r, c] = S.at;
    const to = { ArrowUp: [r - 1, c], ArrowDown: [r + 1, c], ArrowLeft: [r, c - 1], ArrowRight: [r, c + 1] }[ev.key];
    if (to) {
      S.at = [Math.min(gh - 1, Math.max(0, to[0])), Math.min(gw - 1, Math.max(0, to[1]))];
      ev.preventDefault(); draw();
    } else if ((ev.key === " " || ev.key === "Enter") && !ev.target.closest("button")) {
      mark(S.at, !S.chosen.has(`${S.at[0]},${S.at[1]}`));
      ev.preventDefault(); draw(); tell();
    }
  });
  el.addEventListener("focus", draw);
  el.addEventListener("blur", draw);
  loadImage(p.image).then((img) => { if (!S.closed) { S.img = img; draw(); } })
    .catch(() => { el.querySelector(".vxb-cap").textContent = "the picture did not load: show the view again"; });
  return {
    el, model: p.model, image: p.image, follow,
    close() { S.closed = true; unsubscribe(); el.remove(); },
  };
}
