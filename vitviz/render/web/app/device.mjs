// "Compute on this device" on the page at /next: the tab's main view computed in this browser. The model's graph
// (vitviz/models/device.py, GET /vitviz/device/<file>) runs in ONNX Runtime Web, served by the app from the package
// (/vitviz/ort/); the picture (an example, fetched as any page shows it, or a file chosen here) is prepared exactly
// as the server prepares it (lib/picture.mjs) and never leaves the browser. What it gives is drawn by the tab's own
// drawing: the attention explorer (views/explorer.mjs), the top 5 (Classify), the stages' numbers (Forward pass).
//
// The switch is the store's `device` flag (one for the page: device=1 in the link). Each device tab's panel is a
// gr.HTML mounted by one line importing this module (vitviz/app/next_extras.py device); its one queued event makes
// the manifest when GET /vitviz/device-manifest has none yet. While the switch is on, the tab's main panel asks
// the server nothing (main.mjs onDevice) and this panel draws the view.

import { appRoot, under } from "../lib/server.mjs";
import { deviceStatus, megabytes } from "../lib/device.mjs";
import { pictureKey, prepare } from "../lib/picture.mjs";
import { top5 } from "../lib/maps.mjs";
import { forwardNumbers, forwardSummary, stagesAt } from "../lib/forward.mjs";
import { settingText } from "./store.mjs";

const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

// what every device panel of the page shares (one module for the page): the runtime, its sessions by graph file,
// the position tables, the examples fetched, the picture chosen by hand (a File: it stays in this browser)
const shared = { ort: null, sessions: new Map(), tables: new Map(), examples: new Map(), hand: null, handFor: null,
                 panels: new Map() };

// the store, from the same main.mjs the panels import (its URL carries the page's version: one copy, one store)
function mainModule() { return import(`./main.mjs${new URL(import.meta.url).search}`); }

// ---- ONNX Runtime Web -----------------------------------------------------------------------------------------

// the runtime, loaded once for the page (ONNX Runtime Web's WebAssembly build, run in its proxy worker so the page
// answers while a session is prepared or a forward runs)
export function runtime() {
  if (!shared.ort) {
    shared.ort = new Promise((ok, fail) => {
      const s = document.createElement("script");
      s.src = `${appRoot()}/vitviz/ort/ort.wasm.min.js`;
      // (ONNX Runtime Web's own build names itself `ort` on the page: the library's name, not one this page makes)
      s.onload = () => (typeof ort === "object" ? ok(ort) : fail(new Error("the runtime did not start")));
      s.onerror = () => fail(new Error("the runtime did not load"));
      document.head.append(s);
    }).then((ort) => {
      ort.env.wasm.wasmPaths = `${appRoot()}/vitviz/ort/`;
      ort.env.wasm.numThreads = crossOriginIsolated ? Math.max(1, navigator.hardwareConcurrency || 1) : 1;
      ort.env.wasm.proxy = true;
      return ort;
    });
    shared.ort.catch(() => { shared.ort = null; });
  }
  return shared.ort;
}

// a file of this server as bytes, saying how much has come (`step`: lib/device.mjs's words; null says nothing)
async function download(url, total, step, say) {
  const r = await fetch(url);
  if (!r.ok || !r.body) throw new Error(`${url.split("/").pop()} could not be downloaded (${r.status})`);
  const reader = r.body.getReader(), parts = [];
  let got = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    got += value.length;
    parts.push(value);
    if (step) say(deviceStatus(step, { got, total }));
  }
  const all = new Uint8Array(got);
  let at = 0;
  for (const p of parts) { all.set(p, at); at += p.length; }
  return all;
}

// one session per graph file (content-named: the browser keeps its download)
function session(m, say) {
  if (!shared.sessions.has(m.file)) {
    const made = (async () => {
      const ort = await runtime();
      const model = await download(`${appRoot()}/vitviz/device/${m.file}`, m.bytes, "model", say);
      say(deviceStatus("preparing", { backend: "WebAssembly" }));
      return ort.InferenceSession.create(model, { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
    })();
    made.catch(() => shared.sessions.delete(m.file));
    shared.sessions.set(m.file, made);
  }
  return shared.sessions.get(m.file);
}

// the graph's position table for a grid, resampled by the server as the model's own forward does
function positions(m, grid) {
  const key = `${m.file}/${grid[0]}x${grid[1]}`;
  if (!shared.tables.has(key)) {
    const got = fetch(`${appRoot()}/vitviz/device-pos/${key}`).then((r) => {
      if (!r.ok) throw new Error(`the position table for ${grid[0]}×${grid[1]} patches is not there (${r.status})`);
      return r.arrayBuffer();
    }).then((b) => new Float32Array(b));
    got.catch(() => shared.tables.delete(key));
    shared.tables.set(key, got);
  }
  return shared.tables.get(key);
}

// ---- the picture ---------------------------------------------------------------------------------------------

// a picture's pixels, (h, w, 3) uint8, as this browser decodes them (orientation applied, no colour conversion)
async function readPicture(blob) {
  const bmp = await createImageBitmap(blob, { imageOrientation: "from-image", premultiplyAlpha: "none",
                                              colorSpaceConversion: "none" });
  const c = document.createElement("canvas");
  c.width = bmp.width; c.height = bmp.height;
  const g = c.getContext("2d", { willReadFrequently: true });
  g.drawImage(bmp, 0, 0);
  const rgba = g.getImageData(0, 0, c.width, c.height).data, rgb = new Uint8Array(c.width * c.height * 3);
  for (let i = 0, j = 0; i < rgba.length; i += 4, j += 3) { rgb[j] = rgba[i]; rgb[j + 1] = rgba[i + 1]; rgb[j + 2] = rgba[i + 2]; }
  bmp.close?.();
  return { rgb, w: c.width, h: c.height };
}

// an example by its name, fetched from this server's copy (the page's picture: nothing of the student's is sent)
function example(m, name) {
  if (!shared.examples.has(name)) {
    const got = fetch(under(m.examples[name])).then((r) => {
      if (!r.ok) throw new Error(`the example ${name} is not there (${r.status})`);
      return r.blob();
    });
    got.catch(() => shared.examples.delete(name));
    shared.examples.set(name, got);
  }
  return shared.examples.get(name);
}

// the fitted (H, W, 3) picture as PNG bytes (the explorer's picture)
async function pngOf(rgb, W, H) {
  const c = document.createElement("canvas");
  c.width = W; c.height = H;
  const g = c.getContext("2d"), img = g.createImageData(W, H);
  for (let i = 0, j = 0; j < rgb.length; i += 4, j += 3) {
    img.data[i] = rgb[j]; img.data[i + 1] = rgb[j + 1]; img.data[i + 2] = rgb[j + 2]; img.data[i + 3] = 255;
  }
  g.putImageData(img, 0, 0);
  const blob = await new Promise((ok) => c.toBlob(ok, "image/png"));
  return new Uint8Array(await blob.arrayBuffer());
}

// bytes as base64 (the explorer reads an answer's parts so)
export function base64(u8) {
  let s = "";
  for (let i = 0; i < u8.length; i += 0x8000) s += String.fromCharCode.apply(null, u8.subarray(i, i + 0x8000));
  return btoa(s);
}

// ---- what the graph gives, as each tab's drawing reads it -------------------------------------------------------

// The explorer's payload (render/browser.py's, with its parts inline): the class token's maps with the head mean
// (L, H + 1, N), each layer's queries then keys, the fitted picture; no rollout or class maps (the server's).
export function explorerPayload(m, out, png, token, grid) {
  const L = m.layers, H = m.heads, n = grid[0] * grid[1];
  const cls = out.cls, all = new Float32Array(L * (H + 1) * n);
  for (let l = 0; l < L; l++) {
    for (let h = 0; h < H; h++) all.set(cls.subarray((l * H + h) * n, (l * H + h + 1) * n), (l * (H + 1) + h) * n);
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let h = 0; h < H; h++) s += cls[(l * H + h) * n + j];
      all[(l * (H + 1) + H) * n + j] = s / H;
    }
  }
  const data = { "cls.f4": base64(new Uint8Array(all.buffer)), "image.png": base64(png) }, keys = [];
  for (let l = 0; l < L; l++) {
    const q = out[`q${l}`], k = out[`k${l}`], both = new Float32Array(q.length + k.length);
    both.set(q); both.set(k, q.length);
    keys.push(`keys-${l}.f4`);
    data[`keys-${l}.f4`] = base64(new Uint8Array(both.buffer));
  }
  const d = out.q0.length / (m.prefix + n) / H;
  return { token, model: m.model, grid, patch: m.patch, layers: L, heads: H, prefix: m.prefix, tokens: m.prefix + n,
           head_dim: d, parts: { cls: "cls.f4", rollout: "rollout.f4", image: "image.png", keys },
           first: Array.from({ length: L }, (_, i) => i), base: "", state: m.state, fields: m.fields,
           colormaps: m.colormaps, bytes: 0, data, device: true };
}

// the top 5 as [label, probability], each label "nearest shape: …" when a shapes-only model answers for a photo
export function topFive(logits, labels, photo) {
  return top5(logits, labels).map(([label, p]) => [photo ? `nearest shape: ${label}` : label, p]);
}

function top5Html(rows) {
  return `<ol class="vx-dev-top5">${rows.map(([label, p]) =>
    `<li data-label="${esc(label)}" data-p="${p}">${esc(label)}: ${(100 * p).toFixed(1)}%</li>`).join("")}</ol>`;
}

// the Forward pass's numbers (lib/forward.mjs) as a summary, the stages with their shapes and each block's updates
function forwardHtml(m, out, grid, H, W) {
  const n = grid[0] * grid[1], T = m.prefix + n, got = forwardNumbers(out, { layers: m.layers, prefix: m.prefix, grid });
  const stages = m.forward ? stagesAt(m.forward, { H, W, N: n, T }) : [];
  const rows = got.attn.map((a, i) => `<tr><th scope="row">${i + 1}</th><td>${a.toFixed(3)}</td><td>${got.mlp[i].toFixed(3)}</td>` +
    `<td>${Number(got.cosine[i]).toFixed(3)}</td></tr>`).join("");
  const top = got.probs ? topFive(out.logits, m.labels, false) : [];
  return `<p class="vx-dev-summary">${esc(forwardSummary(m.model, grid, m.patch, T, m.width, m.layers))}</p>
    <table class="vx-dev-stages"><caption>Each stage's tensor, as computed here</caption>
      <thead><tr><th scope="col">stage</th><th scope="col">shape</th></tr></thead>
      <tbody>${stages.map((s) => `<tr><th scope="row">${esc(s.name)}</th><td>${s.shape.join(" × ")}</td></tr>`).join("")}</tbody></table>
    <table class="vx-dev-updates"><caption>The residual stream: each block's update (norm, relative to the stream) and the
      class token's cosine to its last state</caption>
      <thead><tr><th scope="col">block</th><th scope="col">attention update</th><th scope="col">MLP update</th><th scope="col">cosine to last</th></tr></thead>
      <tbody>${rows}</tbody></table>
    ${top.length ? `<h4>The model's top 5</h4>${top5Html(top)}` : ""}`;
}

// ---- the panel -------------------------------------------------------------------------------------------------

// the panel's styles, and each device panel shown only in its own tab (as main.mjs shows each tab's panels)
function styles(version, tabs) {
  if (document.querySelector("link[data-vx-device]")) return;
  const away = document.createElement("style");
  away.textContent = tabs.map((t) => `body:not([data-vx-tab="${t}"]) #next-device-${t} { display: none !important; }`).join("\n");
  document.head.appendChild(away);
  const css = document.createElement("link");
  css.rel = "stylesheet";
  css.href = under(`vitviz/web/app/device.css?v=${version}`);
  css.dataset.vxDevice = "1";
  document.head.appendChild(css);
}

// A device tab's panel: the switch, what the model costs to download, a picture chooser that keeps the picture
// here, the status in words, and the tab's drawing of what was computed.
export async function mountDevice({ element, props, trigger, watch }) {
  const { whenStore, onDevice } = await mainModule();
  const store = await whenStore();
  const spec = props.spec, page = store.spec;
  styles(props.version, page.device || []);
  const root = element.querySelector(".vx-device-panel") || element;
  const id = `vx-device-${spec.tab}`;
  root.innerHTML = `
    <div class="vx-field vx-bool vx-dev-switch"><input type="checkbox" id="${id}-switch" data-device-switch="1">
      <label for="${id}-switch">Compute on this device (the picture stays here)</label></div>
    <p class="vx-dev-status" role="status" aria-live="polite"></p>
    <div class="vx-dev-body" hidden>
      <p class="vx-dev-what"></p>
      <div class="vx-field"><label for="${id}-picture">Choose a picture on this device (it is read here, never uploaded)</label>
        <input type="file" accept="image/*" id="${id}-picture" data-device-picture="1"></div>
      <p class="vx-dev-warning" hidden></p>
      <div class="vx-dev-drawn"><div class="vx-figures"></div><div class="vx-dev-numbers"></div></div>
    </div>`;
  const $ = (sel) => root.querySelector(sel);
  const box = $("[data-device-switch]"), body = $(".vx-dev-body"), status = $(".vx-dev-status");
  const say = (text) => { status.textContent = text; };
  const P = { m: null, wanted: null, n: 0, pending: null, busy: false, again: false, ran: null, done: 0, last: null };
  root.__device = P;  // what was computed last (tests read it)
  const mainView = { tab: spec.tab, main: true };
  const here = (s) => s.tab === spec.tab && onDevice(page, s, mainView);  // this panel's tab, its switch on

  const wantKey = (s) => JSON.stringify([spec.model ? settingText(s, page, spec.model) : "",
                                         spec.side ? settingText(s, page, spec.side) : ""]);
  const manifestFor = async (s) => {  // the manifest of the model (and side) the store names
    const want = wantKey(s);
    if (want === P.wanted) return;
    P.wanted = want;
    P.m = null;
    const [model, side] = JSON.parse(want);
    say("looking up the model…");
    const q = new URLSearchParams({ tab: spec.tab, model });
    if (spec.side) q.set("side", side);
    try {
      const r = await fetch(`${appRoot()}/vitviz/device-manifest?${q}`);
      if (want !== P.wanted) return;
      if (r.status === 200) { use(await r.json()); return; }  // 204: not made yet
    } catch (e) { /* the queue makes it */ }
    if (want !== P.wanted) return;
    say("making the model's file for this device (the first time only)…");
    P.n += 1;
    P.pending = P.n;
    props.value = { ask: { n: P.n, model, side: spec.side ? side : null } };
    trigger("submit");
  };

  const use = (m) => {
    if (m.error) { fallBack(m.error); return; }
    P.m = m;
    $(".vx-dev-what").textContent = `${m.model}: ${megabytes(m.bytes)}, downloaded once and kept by this browser. ` +
      `The picture is read and computed here and never uploaded.${m.notice ? " " + m.notice.replace(/\*\*/g, "") : ""}`;
    root.dataset.ready = "1";
    runNow();
  };

  const fallBack = (why) => {  // the server answers instead: said, and the switch turned off
    say(`${why}: the server answers instead (switch this on again to retry).`);
    P.fell = true;
    P.wanted = null;
    store.set({ device: false });
  };

  watch("value", () => {
    const got = props.value;
    if (!got || got.ask || got.n !== P.pending) return;
    if (got.error) { fallBack(got.error); return; }
    use(got.manifest);
  });

  // the picture to compute: the one chosen here by hand (while the page's picture is the one it was chosen on),
  // else the page's picture when it is an example
  const picture = async (m, s) => {
    if (shared.hand && shared.handFor === s.picture) return { blob: shared.hand, from: "hand", name: shared.hand.name };
    if (m.examples && Object.hasOwn(m.examples, s.picture)) return { blob: await example(m, s.picture), from: s.picture, name: s.picture };
    return null;
  };

  const runNow = async () => {
    const s = store.get();
    if (!here(s) || !P.m) return;
    if (P.busy) { P.again = true; return; }
    P.busy = true;
    const m = P.m;
    let counted = false;  // whether this call computed (or failed to): what `done` counts
    try {
      const pic = await picture(m, s);
      if (!pic) { say("choose a picture on this device above (the page's picture is one the server holds)"); return; }
      const ranKey = JSON.stringify([m.file, m.side, pic.from, pic.name, pic.blob.size]);
      if (ranKey === P.ran) return;
      counted = true;
      say(`reading ${pic.name} here…`);
      const px = await readPicture(pic.blob);
      const sess = await session(m, say), ort = await runtime();
      const prep = prepare(px.rgb, px.w, px.h, m);
      const grid = [prep.H / m.patch, prep.W / m.patch], table = await positions(m, grid);
      const feeds = { pixels: new ort.Tensor("float32", prep.x.slice(), [1, 3, prep.H, prep.W]),
                      pos: new ort.Tensor("float32", table.slice(), [1, m.pos_prefix + grid[0] * grid[1], m.width]) };
      say(deviceStatus("computing", { backend: "WebAssembly" }));
      const t0 = performance.now(), got = await sess.run(feeds), ms = performance.now() - t0;
      const out = Object.fromEntries(Object.entries(got).map(([k, v]) => [k, v.data]));
      const photo = !!m.shapes_warning && !(m.scenes || []).includes(await pictureKey(px.rgb, px.h, px.w));
      await draw(m, out, prep, grid, pic, photo);
      P.ran = ranKey;
      P.last = { input: prep.x, out, ms, from: pic.from, grid };
      say(`${pic.name}: computed on this device in ${Math.round(ms)} ms (${m.model}, ${prep.W}×${prep.H} px; ` +
          `WebAssembly); the picture was not sent.`);
      root.dataset.ms = String(ms);
    } catch (err) {
      counted = true;
      fallBack(`the model could not run here (${String(err.message || err)})`);
    } finally {
      P.busy = false;
      if (counted) { P.done += 1; root.dataset.done = String(P.done); }
      if (P.again) { P.again = false; runNow(); }
    }
  };

  const figs = $(".vx-figures"), numbers = $(".vx-dev-numbers"), warning = $(".vx-dev-warning");
  const draw = async (m, out, prep, grid, pic, photo) => {
    warning.hidden = !photo;
    warning.textContent = photo ? m.shapes_warning : "";
    if (spec.tab === "attention") {
      const png = await pngOf(prep.rgb, prep.W, prep.H);
      const token = `device-${m.file}-${pic.from}-${pic.name}-${pic.blob.size}-${m.side}`;
      const p = explorerPayload(m, out, png, token, grid);
      const { drawExplorer } = await import("./views/explorer.mjs");
      drawExplorer({ root, figs, answer: { data: { explorer: p } }, store, page });
      numbers.innerHTML = out.logits ? `<h4>The model's top 5</h4>${top5Html(topFive(out.logits, m.labels, photo))}` : "";
    } else if (spec.tab === "classify") {
      numbers.innerHTML = out.logits ? `<h4>The model's top 5, computed here</h4>${top5Html(topFive(out.logits, m.labels, photo))}`
        : `<p>${esc(m.model)} has no classification head.</p>`;
    } else {
      numbers.innerHTML = forwardHtml(m, out, grid, prep.H, prep.W);
    }
  };

  // a picture chosen here, or in the tab's main panel while the switch is on: it stays in this browser
  const chooseHere = (file) => {
    if (!file || (file.type && !file.type.startsWith("image/"))) return;
    shared.hand = file;
    shared.handFor = store.get().picture;
    for (const other of shared.panels.values()) other();
  };
  $("[data-device-picture]").addEventListener("change", (e) => {
    chooseHere(e.target.files && e.target.files[0]);
    e.target.value = "";  // the same file again is a new choice
  });
  window.addEventListener("change", (e) => {  // the main panel's upload, caught before it sends anything
    const t = e.target;
    if (!t || !t.dataset || !t.dataset.upload || !t.closest(`#panel-${spec.main}`)) return;
    if (!here(store.get())) return;
    e.stopImmediatePropagation();
    e.preventDefault();
    chooseHere(t.files && t.files[0]);
    t.value = "";
  }, true);
  box.addEventListener("change", () => store.set({ device: box.checked }));
  shared.panels.set(spec.tab, () => { P.ran = null; runNow(); });

  const update = (s) => {
    const on = here(s);
    box.checked = !!s.device;
    body.hidden = !on;
    if (!on && !P.fell) say("");
    if (on) P.fell = false;
    document.body.classList.toggle(`vx-device-on-${spec.tab}`, on);
    if (!on) return;
    manifestFor(s);
    runNow();
  };
  store.subscribe(update);
  update(store.get());
}
