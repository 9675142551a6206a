// vitviz patch picker ("predict, then test", after common.js): the picture as the model sees it, with its patch
// grid; click or drag to mark the patches you think the model needs (the arrow keys move, space or Enter marks).
// The marked patches are a declared setting (`patches`, link key tm_patches): written into the tab's carrier,
// whose change asks the server to test them, and into the page's link.
let root = element.querySelector(".vx");
const S = { p: null, img: null, chosen: new Set(), at: [0, 0], painting: null };

function text() {  // the setting as the declaration reads it: "row,column;row,column"
  return Array.from(S.chosen).map((k) => k.split(",").map(Number)).sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .map(([r, c]) => `${r},${c}`).join(";");
}

function caption() {  // what is marked, in words (and as the setting's text, for tests)
  const t = text(), cap = root.querySelector(".vx-cap"), n = S.chosen.size;
  if (!cap) return;
  cap.textContent = n ? `${n} patch${n === 1 ? "" : "es"} marked: ${t.replace(/;/g, "; ")}`
    : "No patch marked yet: click or drag on the picture.";
  cap.dataset.patches = t;
}

function tell() {  // the carrier (the server tests the choice when the burst settles) and the link
  const t = text();
  window.vitvizState?.set("predict", { patches: t });
  window.vitvizLink?.setting("tm_patches", t, "");
  caption();
}

function draw() {
  if (!S.p || !S.img) return;
  const [gh, gw] = S.p.grid, cv = root.querySelector("canvas"), g = cv.getContext("2d");
  g.imageSmoothingEnabled = false;
  g.drawImage(S.img, 0, 0, cv.width, cv.height);
  const cw = cv.width / gw, ch = cv.height / gh;
  g.fillStyle = "rgba(213, 94, 0, 0.55)";  // Okabe-Ito vermillion: the marked patches
  for (const k of S.chosen) { const [r, c] = k.split(",").map(Number); g.fillRect(c * cw, r * ch, cw, ch); }
  g.strokeStyle = "rgba(255,255,255,0.75)"; g.lineWidth = 1; g.beginPath();
  for (let c = 1; c < gw; c++) { g.moveTo(c * cw, 0); g.lineTo(c * cw, cv.height); }
  for (let r = 1; r < gh; r++) { g.moveTo(0, r * ch); g.lineTo(cv.width, r * ch); }
  g.stroke();
  if (root.contains(document.activeElement)) {  // the keyboard's patch
    const [r, c] = S.at;
    g.strokeStyle = "#ffc800"; g.lineWidth = Math.max(3, cv.width / 150); g.strokeRect(c * cw, r * ch, cw, ch);
  }
}

function cellAt(ev) {
  const cv = root.querySelector("canvas"), box = cv.getBoundingClientRect(), [gh, gw] = S.p.grid;
  const c = Math.floor(((ev.clientX - box.left) / box.width) * gw), r = Math.floor(((ev.clientY - box.top) / box.height) * gh);
  return r >= 0 && r < gh && c >= 0 && c < gw ? [r, c] : null;
}

function mark(cell, on) {
  const k = `${cell[0]},${cell[1]}`;
  if (on) S.chosen.add(k); else S.chosen.delete(k);
}

function build(p) {
  root = element.querySelector(".vx");
  if (!p || !p.grid) { root.innerHTML = ""; S.p = null; return; }
  const same = S.p && S.p.model === p.model && S.p.image === p.image;
  S.p = p;
  if (!same) S.chosen = new Set((p.chosen || []).map(([r, c]) => `${r},${c}`));
  const [gh, gw] = p.grid, side = 420, w = gw >= gh ? side : (side * gw) / gh, h = gw >= gh ? (side * gh) / gw : side;
  root.innerHTML = `<canvas width="${Math.round(w)}" height="${Math.round(h)}" aria-hidden="true"></canvas>
    <p class="vx-cap" role="status" aria-live="polite"></p>
    <p class="vx-keys">Click or drag to mark patches; arrow keys move, space marks. ${gh}×${gw} patches of
    ${p.patch}×${p.patch} pixels, as ${p.model} sees the picture.</p>
    <button type="button" class="vx-clear">Clear my marks</button>`;
  S.img = new Image();
  S.img.onload = draw;
  S.img.src = p.image;
  const cv = root.querySelector("canvas");
  cv.addEventListener("pointerdown", (ev) => {
    const cell = cellAt(ev);
    if (!cell) return;
    S.painting = !S.chosen.has(`${cell[0]},${cell[1]}`);
    S.at = cell;
    mark(cell, S.painting); draw();
    cv.setPointerCapture?.(ev.pointerId);
  });
  cv.addEventListener("pointermove", (ev) => {
    if (S.painting === null) return;
    const cell = cellAt(ev);
    if (cell) { mark(cell, S.painting); draw(); }
  });
  const done = () => { if (S.painting !== null) { S.painting = null; tell(); } };
  cv.addEventListener("pointerup", done);
  cv.addEventListener("pointercancel", done);
  root.querySelector(".vx-clear").addEventListener("click", () => { S.chosen.clear(); draw(); tell(); });
  caption();
}

// a link opened within the page set the marks (its carrier, by the server's opener) and the picture stays: they are
// shown as the link says, as the server tests them
document.addEventListener("vitviz-settled", () => {
  if (!S.p || !element.isConnected) return;
  let t = "";
  try { t = JSON.parse(window.vitvizState?.values?.predict?.() || "{}").patches || ""; } catch (e) { return; }
  if (Array.isArray(t)) t = t.map((rc) => (Array.isArray(rc) ? rc.join(",") : "")).join(";");  // the server's form
  if (typeof t !== "string") return;
  const [gh, gw] = S.p.grid, before = text();
  S.chosen = new Set(t.split(";").filter(Boolean).map((k) => k.split(",").map(Number))
    .filter(([r, c]) => r >= 0 && r < gh && c >= 0 && c < gw).map(([r, c]) => `${r},${c}`));
  if (text() === before) return;
  draw(); caption();
});

root.addEventListener("keydown", (ev) => {
  if (!S.p) return;
  const [gh, gw] = S.p.grid, [r, c] = S.at;
  const to = { ArrowUp: [r - 1, c], ArrowDown: [r + 1, c], ArrowLeft: [r, c - 1], ArrowRight: [r, c + 1] }[ev.key];
  if (to) {
    S.at = [Math.min(gh - 1, Math.max(0, to[0])), Math.min(gw - 1, Math.max(0, to[1]))];
    ev.preventDefault(); draw();
  } else if (ev.key === " " || ev.key === "Enter") {
    if (ev.target.closest("button")) return;
    mark(S.at, !S.chosen.has(`${S.at[0]},${S.at[1]}`));
    ev.preventDefault(); draw(); tell();
  }
});
root.addEventListener("focus", draw);
root.addEventListener("blur", draw);
element.__picker = S;
watch("value", () => build(props.value));
build(props.value);
