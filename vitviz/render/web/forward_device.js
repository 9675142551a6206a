// vitviz "compute on this device", the Forward pass: after device.js in one body (device.js calls drawOwn with what
// the graph computed). Draws the view the server draws (vitviz/views/forward.py) from the graph's outputs, into the
// places beside the server's figures (#forward-device-diagram, #forward-device-residual, #forward-device-lens: shown
// while the switch is on, the server's hidden), with lib/forward.mjs's numbers. Nothing is sent anywhere.

let FD = null;  // what the last drawing was made from: {m, out, x, rgb, W, H, grid, side, n: forwardNumbers}
const SVG = "http://www.w3.org/2000/svg";

function place(id) { return document.querySelector(`#${id} .vx-fd`); }
function cmapOf(m) { const c = D.more?.[0]; return m.colormaps?.[c] ? c : "viridis"; }
function lutOf(m) { return bytes(m.colormaps[cmapOf(m)]); }
function layerOf(L) { return Math.max(1, Math.min(L, Math.round(Number(D.more?.[1]) || L))); }
function el(tag, attrs = {}, text = null) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== null) e.textContent = text;
  return e;
}

// a (gh, gw) map coloured from its smallest to its largest value (plotting.colorize), its long side `px` pixels
function mapCanvas(values, gh, gw, lut, px, label) {
  const c = el("canvas", { role: "img", "aria-label": label });
  c.width = gw; c.height = gh;
  const g = c.getContext("2d"), img = g.createImageData(gw, gh);
  let lo = Infinity, hi = -Infinity;
  for (const v of values) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  for (let i = 0; i < gh * gw; i++) {
    const o = colourIndex(values[i], lo, hi);
    img.data[4 * i] = lut[o]; img.data[4 * i + 1] = lut[o + 1]; img.data[4 * i + 2] = lut[o + 2];
    img.data[4 * i + 3] = 255;
  }
  g.putImageData(img, 0, 0);
  const s = px / Math.max(gh, gw);
  c.style.width = `${Math.round(gw * s)}px`; c.style.height = `${Math.round(gh * s)}px`;
  return c;
}

// the fitted picture, its long side `px` pixels; with `heat` (gh, gw), that map over it at alpha 0.6 (heat_overlay)
function pictureCanvas(r, px, label, heat = null, lut = null) {
  const c = el("canvas", { role: "img", "aria-label": label }), s = px / Math.max(r.W, r.H);
  c.width = Math.round(r.W * s); c.height = Math.round(r.H * s);
  const g = c.getContext("2d");
  g.drawImage(rgbCanvas(r.rgb, r.W, r.H), 0, 0, c.width, c.height);  // (device.js)
  if (heat) {
    g.imageSmoothingEnabled = false;
    g.globalAlpha = 0.6;
    g.drawImage(mapCanvas(heat, r.grid[0], r.grid[1], lut, 1, ""), 0, 0, c.width, c.height);
    g.globalAlpha = 1;
  }
  return c;
}

// a strip of a vector's 32 largest values, largest first (the diagram's glimpse of logits and probabilities)
function stripCanvas(v, lut, label) {
  const top = Array.from(v).sort((a, b) => b - a).slice(0, 32);
  return mapCanvas([...top, ...top, ...top, ...top], 4, top.length, lut, 96, label);
}

// ---- the diagram ---------------------------------------------------------------------------------------------------
function drawDiagram(r, lut) {
  const { m, n, grid } = r, P = m.prefix, N = grid[0] * grid[1], plan = m.forward;
  const stages = stagesAt(plan, { H: r.H, W: r.W, N, T: P + N });
  const glimpse = {
    "image": () => pictureCanvas(r, 96, "image: the picture"),
    "patches, flattened": () => patchNorms(r.x, r.H, r.W, m.patch),
    "patch embeddings": () => n.embedded,
    "tokens entering block 1": () => n.patchNorms[0],
    "final LayerNorm": () => n.final,
    "head: logits": () => r.out.logits,
    "softmax: probabilities": () => n.probs,
  };
  const list = el("ol", { class: "vx-forward",
                          "aria-label": `the forward pass of ${m.model}, stage by stage, computed on this device` });
  stages.forEach((st, i) => {
    const li = el("li", { class: "vx-stage" }), det = el("details"), sum = el("summary");
    sum.append(el("span", { class: "vx-step" }, String(i + 1)), " ", el("strong", {}, st.name), " ",
               el("code", {}, st.shape.map((k) => k.toLocaleString("en-US")).join(" × ")));
    const block = /^block (\d+)$/.exec(st.name);
    const values = block ? n.patchNorms[Number(block[1])] : glimpse[st.name]?.();
    const label = `${st.name}: a glimpse of its values`;
    if (values instanceof HTMLCanvasElement) sum.append(values);
    else if (values && st.shape.length === 1) sum.append(stripCanvas(values, lut, label));
    else if (values) sum.append(mapCanvas(values, grid[0], grid[1], lut, 96, label));
    const axes = st.shape.map((k, j) => `${k.toLocaleString("en-US")} ${st.axes[j]}`).join("; ");
    det.append(sum, el("p", {}, `${axes}.`), el("p", {}, st.words));
    const a = el("a", { href: st.link }, "Open the view that explains it"), p = el("p");
    p.append(a);
    det.append(p);
    li.append(det);
    list.append(li);
  });
  if (plan.no_head) {
    const li = el("li", { class: "vx-stage" });
    li.append(el("p", {}, plan.no_head));
    list.append(li);
  }
  const box = place("forward-device-diagram");
  if (!box) return;
  box.replaceChildren(el("p", { class: "vx-fd-summary" },
    forwardSummary(m.model, grid, m.patch, P + N, m.width, m.layers) + " Computed on this device."), list);
}

// ---- the residual stream -------------------------------------------------------------------------------------------
// a line chart (SVG, text large enough for a projector): series [{name, values, colour, dash, marker}], xs, and an
// optional band {lo, hi, name} drawn first
function chart({ title, xs, series, band = null, xlabel, ylabel, ymin = null, ymax = null, label }) {
  const Wd = 640, Ht = 280, L = 70, R = 16, T = 40, B = 52;
  const all = series.flatMap((s) => s.values).concat(band ? [...band.lo, ...band.hi] : []);
  let lo = ymin ?? Math.min(...all), hi = ymax ?? Math.max(...all);
  if (!(hi > lo)) hi = lo + 1;
  const x = (v) => L + ((v - xs[0]) / Math.max(1, xs[xs.length - 1] - xs[0])) * (Wd - L - R);
  const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (Ht - T - B);
  const svg = document.createElementNS(SVG, "svg"), add = (tag, attrs, text) => {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  svg.setAttribute("viewBox", `0 0 ${Wd} ${Ht}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  svg.classList.add("vx-fd-chart");
  const ink = { fill: "#1a1a1a" };
  add("text", { x: Wd / 2, y: 24, "text-anchor": "middle", "font-size": 19, "font-weight": 600, ...ink }, title);
  add("line", { x1: L, y1: Ht - B, x2: Wd - R, y2: Ht - B, stroke: "#1a1a1a" });
  add("line", { x1: L, y1: T, x2: L, y2: Ht - B, stroke: "#1a1a1a" });
  const step = Math.max(1, Math.ceil(xs.length / 12));
  xs.forEach((v, i) => {
    if (i % step === 0 || i === xs.length - 1) {
      add("text", { x: x(v), y: Ht - B + 20, "text-anchor": "middle", "font-size": 15, ...ink }, String(v));
    }
  });
  for (let k = 0; k <= 4; k++) {
    const v = lo + (k / 4) * (hi - lo);
    add("text", { x: L - 8, y: y(v) + 5, "text-anchor": "end", "font-size": 15, ...ink }, fixed(v, hi - lo < 2 ? 2 : 1));
    add("line", { x1: L, y1: y(v), x2: Wd - R, y2: y(v), stroke: "#d9d9d9" });
  }
  add("text", { x: (L + Wd - R) / 2, y: Ht - 10, "text-anchor": "middle", "font-size": 16, ...ink }, xlabel);
  add("text", { x: 18, y: (T + Ht - B) / 2, "text-anchor": "middle", "font-size": 16, ...ink,
                transform: `rotate(-90 18 ${(T + Ht - B) / 2})` }, ylabel);
  if (band) {
    const pts = xs.map((v, i) => `${x(v)},${y(band.hi[i])}`)
      .concat(xs.map((v, i) => `${x(v)},${y(band.lo[i])}`).reverse());
    add("polygon", { points: pts.join(" "), fill: "#bbbbbb", opacity: 0.7 });
  }
  const legend = [...(band ? [{ name: band.name, colour: "#999999" }] : []), ...series];
  const named = new Set();
  series.forEach((s) => {
    add("polyline", { points: s.values.map((v, i) => `${x(xs[i])},${y(v)}`).join(" "), fill: "none",
                      stroke: s.colour, "stroke-width": 2.5, "stroke-dasharray": s.dash || "none" });
    s.values.forEach((v, i) => add(s.marker === "square" ? "rect" : "circle", s.marker === "square"
      ? { x: x(xs[i]) - 4, y: y(v) - 4, width: 8, height: 8, fill: s.colour }
      : { cx: x(xs[i]), cy: y(v), r: 4, fill: s.colour }));
  });
  let ly = T + 6;
  for (const s of legend) {
    if (named.has(s.name)) continue;
    named.add(s.name);
    add("rect", { x: Wd - R - 200, y: ly - 10, width: 18, height: 6, fill: s.colour });
    add("text", { x: Wd - R - 176, y: ly, "font-size": 15, ...ink }, s.name);
    ly += 20;
  }
  return svg;
}

// black or white, whichever contrasts more with the colour `rgb` (WCAG 2.1's relative luminance: black wins when
// (L + 0.05) / 0.05 > 1.05 / (L + 0.05), i.e. L > 0.179)
function inkOn(rgb) {
  const lin = rgb.map((v) => { const c = v / 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2] > 0.179 ? "#000" : "#fff";
}

function median(a) {
  const s = Array.from(a).sort((p, q) => p - q), k = s.length >> 1;
  return s.length % 2 ? s[k] : (s[k - 1] + s[k]) / 2;
}

function drawResidual(r, lut) {
  const { m, n, grid } = r, L = m.layers, who = m.forward.tracks;
  const maps = el("div", { class: "vx-fd-maps" });
  n.patchNorms.forEach((v, i) => {
    const name = i === 0 ? "embedding" : `block ${i}`;
    let hi = -Infinity;
    for (const t of v) hi = Math.max(hi, t);
    const fig = el("figure");
    fig.append(mapCanvas(v, grid[0], grid[1], lut, 120, `${name}: each patch token's norm, largest ${fixed(hi, 1)}`),
               el("figcaption", {}, `${name} · max ${fixed(hi, 1)}`));
    maps.append(fig);
  });
  const blocks = Array.from({ length: L }, (_, i) => i + 1), steps = Array.from({ length: L + 1 }, (_, i) => i);
  const short = shortName(who, 24);
  const updates = chart({
    title: `what each block adds to ${short}`, xs: blocks, xlabel: "block", ylabel: "relative size", ymin: 0,
    series: [{ name: "attention", values: n.attn, colour: "#0072b2" },
             { name: "MLP", values: n.mlp, colour: "#e69f00", dash: "6 4", marker: "square" }],
    label: `What each block adds to ${who}: attention ${n.attn.map((v) => fixed(v, 2)).join(", ")}; the MLP ` +
           `${n.mlp.map((v) => fixed(v, 2)).join(", ")} of its size.` });
  const cosine = chart({
    title: `${short} compared with its last value`, xs: steps, xlabel: "after block (0 = the embedding)",
    ylabel: "cosine", ymin: Math.min(0, ...n.cosine), ymax: 1.05,
    series: [{ name: "cosine", values: n.cosine, colour: "#009e73" }],
    label: `Cosine of ${who} with its last value after each block: ${n.cosine.map((v) => fixed(v, 2)).join(", ")}.` });
  const charts = el("div", { class: "vx-fd-charts" });
  charts.append(updates, cosine);
  const kinds = m.forward.prefix_kinds;
  if (kinds.length) {
    const lo = n.patchNorms.map((v) => Math.min(...v)), hi = n.patchNorms.map((v) => Math.max(...v));
    const marks = { "[CLS]": ["#0072b2", "", "circle"], distillation: ["#d55e00", "", "circle"],
                    register: ["#cc79a7", "6 4", "square"] };
    const names = { "[CLS]": "[CLS]", distillation: "distillation token", register: "registers" };
    const series = [{ name: "patch tokens (median)", values: n.patchNorms.map(median), colour: "#555555", dash: "2 4" }];
    kinds.forEach((k, i) => {
      const [colour, dash, marker] = marks[k] || ["#000000", "", "circle"];
      series.push({ name: names[k] || k, values: n.prefixNorms.map((row) => row[i]), colour, dash, marker });
    });
    const last = kinds.map((k, i) => `${k} ${fixed(n.prefixNorms[L][i], 1)}`).join(", ");
    charts.append(chart({
      title: "the prefix tokens' norms beside the patches'", xs: steps, xlabel: "after block (0 = the embedding)",
      ylabel: "token norm", band: { lo, hi, name: "patch tokens (range)" }, series,
      label: `Norms after the last block: ${last}; the patch tokens' median ${fixed(median(n.patchNorms[L]), 1)}.` }));
  }
  const box = place("forward-device-residual");
  if (!box) return;
  const title = "each patch token's norm, layer by layer (each map on its own scale; computed on this device)";
  box.replaceChildren(el("p", { class: "vx-fd-title" }, title), maps, charts);
}

// ---- the logit lens ------------------------------------------------------------------------------------------------
function drawLens(r, lut) {
  const { m, n, grid } = r, L = m.layers, box = place("forward-device-lens");
  if (!box) return;
  const note = el("p", { class: "vx-fd-note" }, m.forward.lens_note);
  if (!n.probs) { box.replaceChildren(note); return; }
  const label = (i) => (m.labels ? m.labels[i] : String(i));
  const table = el("table", { class: "vx-fd-lens" });
  table.append(el("caption", {}, `the logit lens on ${m.forward.tracks}: each block's tokens read through the ` +
                                 "model's own final norm and head"));
  const head = el("tr");
  head.append(el("th", { scope: "col" }, "after block"));
  for (const c of n.chosen) head.append(el("th", { scope: "col", title: label(c) }, shortName(label(c))));
  table.append(head);
  let top = 0;
  for (const row of n.lens) for (const c of n.chosen) top = Math.max(top, row[c]);
  n.lens.forEach((row, i) => {
    const tr = el("tr");
    tr.append(el("th", { scope: "row" }, String(i + 1)));
    for (const c of n.chosen) {
      const o = colourIndex(row[c], 0, top), rgb = [lut[o], lut[o + 1], lut[o + 2]];
      tr.append(el("td", { style: `background: rgb(${rgb.join(",")}); color: ${inkOn(rgb)}` }, percent(row[c], 1)));
    }
    table.append(tr);
  });
  // the layer the lens map reads: its own control here (instant; the server's slider is hidden while this draws),
  // which writes the link as the server's does
  const f = m.forward.layer, pick = el("input", { type: "range", min: 1, max: L, step: 1, value: layerOf(L) });
  const shown = el("output", {}, String(layerOf(L))), row = el("label", { class: "vx-fd-layer" }, `${f.label} `);
  row.append(pick, " ", shown);
  pick.addEventListener("input", () => {
    D.more = [D.more?.[0], Number(pick.value)];
    shown.textContent = pick.value;
    window.vitvizLink?.setting(f.link, pick.value, String(f.default));
    drawLensMap(r, lut);
  });
  // the table scrolls sideways on a narrow screen (its own region, reachable by keyboard), its columns whole
  const wide = el("div", { class: "vx-fd-scroll", tabindex: "0", role: "region", "aria-label": "the logit lens table" });
  wide.append(table);
  box.replaceChildren(note, wide, row, el("figure", { class: "vx-fd-lensmap" }));
  drawLensMap(r, lut);
}

function drawLensMap(r, lut) {  // each patch's lens probability of the model's final class, after the chosen block
  const { m, n } = r, layer = layerOf(m.layers), heat = n.lensPatches[layer - 1];
  const name = m.labels ? m.labels[n.target] : String(n.target);
  let hi = 0, sum = 0;
  for (const v of heat) { hi = Math.max(hi, v); sum += v; }
  const fig = place("forward-device-lens")?.querySelector(".vx-fd-lensmap");
  if (!fig) return;
  const words = `Lens map after block ${layer}: each patch token's probability of ${name}, mean ` +
    `${percent(sum / heat.length, 1)}, largest ${percent(hi, 1)}.`;
  fig.replaceChildren(pictureCanvas(r, 250, words, heat, lut), el("figcaption", {},
    `P(${shortName(name, 24)}) read from each patch after block ${layer}: up to ${percent(hi, 1)}`));
}

function drawOwn(r) {  // r: what the graph computed (null: the same again, the colour map or the layer changed)
  if (r) FD = { ...r, n: forwardNumbers(r.out, { layers: r.m.layers, prefix: r.m.prefix, grid: r.grid }) };
  if (!FD || !FD.m.forward) return;
  const lut = lutOf(FD.m);
  drawDiagram(FD, lut);
  drawResidual(FD, lut);
  drawLens(FD, lut);
  D.drawn = (D.drawn || 0) + 1;
  const box = $d(".vx-device");
  if (box) box.dataset.drawn = String(D.drawn);
}
