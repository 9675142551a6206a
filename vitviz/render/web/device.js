// vitviz "compute on this device": the picture is read from a file input and never leaves the browser; the model's
// graph (vitviz/models/device.py) runs in ONNX Runtime Web, served by the app from the package (/vitviz/ort/), and
// the attention explorer draws what it gives, as it draws the server's answers. Runs as gr.HTML's js_on_load
// (`element`, `props`, `watch`). The manifest of the chosen model (file, size, preprocessing, labels, the explorer's
// settings, or {error}) comes from GET /vitviz/device-manifest when the server has made it (no work there), else as
// this element's value, from the queued event its hidden "make" button starts (the graph made on first use).
//
// The picture is prepared exactly as the server's checkpoint path prepares it (timm's eval transform through PIL):
// resized with Pillow's own resampling (antialiased bicubic or bilinear, its 22-bit fixed-point arithmetic), the
// centre crop with Python's rounding, then float32 normalisation: the same input tensor, bit for bit, for a PNG.

const D = { m: null, sessions: new Map(), busy: false, last: null, timings: [], done: 0, failed: null,
            warm: new Set(), speed: new Map() };  // warm: graphs whose WebGPU shaders are compiled; speed: ms per
                                                  // multiply-accumulate this device took for each graph
const SLOWER_MS = 5000;  // a forward here slower than this and than three times the server's: the server answers
const PROBE_SIDE = 224;  // a larger side asked of a graph this device has not run yet: measured first at this side
const $d = (sel) => element.querySelector(sel);

// Which tab's panel this is (the Attention tab's explorer draws what is computed here; the Forward pass's own
// script, forward_device.js, draws its view; Classify shows the top 5): TAB and its device key KEY are given before
// this script (components.device_panel, from TabSpec.device). From the key: the panel's and the switch's element
// ids, the body class while the switch is on, and the window name the tests read it by.
const ROLE = { panel: `${KEY}-panel`, switch: `${KEY}-switch`, on: `vx-${KEY}-on`,
               name: `vitviz${KEY.split("-").map((w) => w[0].toUpperCase() + w.slice(1)).join("")}` };
const IN_CLASSIFY = TAB === "classify", ON = ROLE.on;
const SWITCH = `#${ROLE.switch} input`;
function explorerHere() { return TAB === "attention"; }
// the tab's own drawing of what was computed (forward_device.js defines drawOwn, after this file in one body)
const OWN = typeof drawOwn === "function" ? drawOwn : null;

function say(text) { const s = $d(".vx-dev-status"); if (s) s.textContent = text; }

async function readPicture(file) {  // the file's pixels, (h, w, 3) uint8, as decoded here (orientation applied)
  const bmp = await createImageBitmap(file, { imageOrientation: "from-image", premultiplyAlpha: "none",
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

function rgbCanvas(rgb, W, H) {  // (H, W, 3) uint8 pixels on a canvas of their own size
  const c = document.createElement("canvas");
  c.width = W; c.height = H;
  const g = c.getContext("2d"), img = g.createImageData(W, H);
  for (let i = 0, j = 0; j < rgb.length; i += 4, j += 3) {
    img.data[i] = rgb[j]; img.data[i + 1] = rgb[j + 1]; img.data[i + 2] = rgb[j + 2]; img.data[i + 3] = 255;
  }
  g.putImageData(img, 0, 0);
  return c;
}

async function pngOf(rgb, W, H) {  // the fitted picture as PNG bytes (the explorer's "image" part)
  const c = rgbCanvas(rgb, W, H);
  const blob = await new Promise((ok) => c.toBlob(ok, "image/png"));
  return blob.arrayBuffer();
}

// ---- ONNX Runtime Web -----------------------------------------------------------------------------------------
// WebGPU where the browser has an adapter (ONNX Runtime Web's WebGPU build, which also runs WebAssembly), the
// WebAssembly build otherwise: one runtime per page, chosen once
async function gpuAdapter() {
  if (window.vitvizDevicePrefer === "wasm" || !navigator.gpu) return null;  // the tests may ask for WebAssembly
  try { return await navigator.gpu.requestAdapter(); } catch (e) { return null; }
}

function runtime() {  // the runtime, loaded once per page from this server (both device panels share it)
  const shared = window.vitvizRuntime || (window.vitvizRuntime = { ort: null, gpu: false });
  if (!shared.ort) {
    shared.ort = (async () => {
      const gpu = await gpuAdapter();
      const ort = await new Promise((ok, fail) => {
        const s = document.createElement("script");
        s.src = `${appRoot()}/vitviz/ort/${gpu ? "ort.webgpu.min.js" : "ort.wasm.min.js"}`;
        s.onload = () => ok(window.ort);
        s.onerror = () => fail(new Error("the runtime did not load"));
        document.head.append(s);
      });
      ort.env.wasm.wasmPaths = `${appRoot()}/vitviz/ort/`;
      // WebAssembly threads need an isolated page (the app says it may be: serving.Isolated); inside another
      // site's frame it is not, and one thread runs
      ort.env.wasm.numThreads = window.crossOriginIsolated ? Math.max(1, navigator.hardwareConcurrency || 1) : 1;
      if (gpu) ort.env.webgpu.adapter = gpu;
      // WebAssembly runs in ONNX Runtime's proxy worker (its own script, started as a worker), off the page's main
      // thread: preparing a session and a forward take seconds there, and the page must answer meanwhile
      ort.env.wasm.proxy = !gpu && window.vitvizDeviceProxy !== false;
      shared.gpu = !!gpu;
      return ort;
    })();
    shared.ort.catch(() => { shared.ort = null; });
  }
  return shared.ort.then((ort) => { D.gpu = shared.gpu; D.threads = ort.env.wasm.numThreads; return ort; });
}

// what ran the last session made: "WebGPU" or "WebAssembly, <threads>"
function backendWords() {
  if (D.backend === "webgpu") return "WebGPU";
  const threads = D.threads > 1 ? `${D.threads} threads` : "one thread (this page is not cross-origin isolated)";
  const why = D.gpuFailed ? `; WebGPU was tried and failed: ${D.gpuFailed}` : "";
  return `WebAssembly, ${threads}${why}`;
}

// ONNX Runtime's WebAssembly file for the build this page loads (its size is the manifest's runtime_bytes)
const RUNTIME_WASM = { wasm: "ort-wasm-simd-threaded.wasm", webgpu: "ort-wasm-simd-threaded.asyncify.wasm" };

async function inCache(url) {  // whether this browser holds the file already (its cache asked, nothing sent)
  try {
    const r = await fetch(url, { cache: "only-if-cached", mode: "same-origin" });
    r.body?.cancel();
    return r.ok;
  } catch (e) { return false; }
}

// a file of this server, saying how much of it has come (`step`: lib/device.mjs's words, or null to say nothing);
// its bytes (Uint8Array) when `keep`, else only in the browser's cache, where the runtime then finds it
async function counted(url, total, step, keep) {
  const r = await fetch(url);
  if (!r.ok || !r.body) throw new Error(`${url.split("/").pop()} could not be downloaded (${r.status})`);
  const reader = r.body.getReader(), parts = [];
  let got = 0, said = -1e9;
  if (step) say(deviceStatus(step, { got, total }));
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    got += value.length;
    if (keep) parts.push(value);
    if (step && performance.now() - said > 150) { said = performance.now(); say(deviceStatus(step, { got, total })); }
  }
  if (!keep) return null;
  const all = new Uint8Array(got);
  let at = 0;
  for (const part of parts) { all.set(part, at); at += part.length; }
  return all;
}

async function makeSession(m) {
  const ort = await runtime(), url = `${appRoot()}/vitviz/device/${m.file}`, build = D.gpu ? "webgpu" : "wasm";
  // what is actually happening, said as it happens: ONNX Runtime's WebAssembly and the model downloaded the first
  // time (counted), read from this browser's cache after that; then both prepared (off the page's main thread)
  const wasm = `${appRoot()}/vitviz/ort/${RUNTIME_WASM[build]}`;
  if (!(await inCache(wasm))) await counted(wasm, m.runtime_bytes?.[build] || 0, "runtime", false);
  const cached = await inCache(url);
  if (cached) say(deviceStatus("cached", { total: m.bytes }));
  const model = await counted(url, m.bytes, cached ? null : "model", true);
  say(deviceStatus("preparing", { backend: D.gpu ? "WebGPU" : backendWords() }));
  if (D.gpu && !D.gpuFailed) {
    try {
      const s = await ort.InferenceSession.create(model, { executionProviders: ["webgpu"], graphOptimizationLevel: "all" });
      D.backend = "webgpu";
      return s;
    } catch (err) {  // an adapter but no device, or an operator the backend lacks: WebAssembly from the same build
      D.gpuFailed = String(err.message || err).slice(0, 200);
    }
  }
  // (the proxy worker is handed the bytes: they are gone from here once it has them)
  const s = await ort.InferenceSession.create(model, { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
  D.backend = "wasm";
  return s;
}

function session(m) {  // one per graph file (content-named: the browser keeps the download)
  if (!D.sessions.has(m.file)) {
    const made = makeSession(m);
    made.catch(() => D.sessions.delete(m.file));
    D.sessions.set(m.file, made);
  }
  return D.sessions.get(m.file);
}

// the model's position table for this grid, resampled by the server as the model's own forward does (a few hundred
// kB, kept by the browser under its name)
function positions(m, grid) {
  const key = `${m.file}/${grid[0]}x${grid[1]}`;
  if (!D.tables) D.tables = new Map();
  if (!D.tables.has(key)) {
    D.tables.set(key, fetch(`${appRoot()}/vitviz/device-pos/${key}`).then((r) => {
      if (!r.ok) throw new Error(`the position table for ${grid[0]}×${grid[1]} patches is not there (${r.status})`);
      return r.arrayBuffer();
    }).then((b) => new Float32Array(b)).catch((e) => { D.tables.delete(key); throw e; }));
  }
  return D.tables.get(key);
}

// the explorer's payload from the graph's outputs: the class token's maps with the head mean (L, H + 1, N), each
// layer's q then k (float32), the fitted picture; everything in `local`
function payloadOf(m, out, png, name, grid) {
  const L = m.layers, H = m.heads, n = grid[0] * grid[1], T = m.prefix + n;
  const cls = out.cls.data, all = new Float32Array(L * (H + 1) * n);
  for (let l = 0; l < L; l++) {
    for (let h = 0; h < H; h++) all.set(cls.subarray((l * H + h) * n, (l * H + h + 1) * n), (l * (H + 1) + h) * n);
    for (let j = 0; j < n; j++) {
      let s = 0; for (let h = 0; h < H; h++) s += cls[(l * H + h) * n + j];
      all[(l * (H + 1) + H) * n + j] = s / H;
    }
  }
  const local = { "cls.f4": all.buffer, "image.png": png }, keys = [];
  for (let l = 0; l < L; l++) {
    const q = out[`q${l}`].data, k = out[`k${l}`].data, both = new Float32Array(q.length + k.length);
    both.set(q); both.set(k, q.length);
    keys.push(`keys-${l}.f4`); local[`keys-${l}.f4`] = both.buffer;
  }
  const d = out.q0.dims[out.q0.dims.length - 1];
  return { token: `device-${name}`, model: m.model, grid, patch: m.patch, layers: L, heads: H, prefix: m.prefix,
           tokens: T, head_dim: d, parts: { cls: "cls.f4", rollout: "rollout.f4", image: "image.png", keys },
           first: Array.from({ length: L }, (_, i) => i), base: "", state: m.state, fields: m.fields,
           colormaps: m.colormaps, bytes: 0, local, device: true };
}

// This device's speed for the graph: a forward of a blank picture at PROBE_SIDE (twice on WebGPU, whose first run
// compiles its shaders), in milliseconds per multiply-accumulate.
async function probe(m, sess, ort) {
  const pm = atSide(m, Math.min(m.side, PROBE_SIDE - (PROBE_SIDE % m.patch)));
  const [, , W, H] = fitShape(pm.side, pm.side, pm), grid = [H / m.patch, W / m.patch], T = m.prefix + grid[0] * grid[1];
  const feeds = { pixels: new ort.Tensor("float32", new Float32Array(3 * H * W), [1, 3, H, W]),
                  pos: new ort.Tensor("float32", (await positions(m, grid)).slice(), [1, m.pos_prefix + grid[0] * grid[1], m.width]) };
  let t = performance.now();
  await sess.run(feeds);
  if (D.backend === "webgpu" && !D.warm.has(m.file)) { D.warm.add(m.file); t = performance.now(); await sess.run(feeds); }
  const ms = performance.now() - t;
  D.speed.set(m.file, ms / forwardMacs(m.cost, T));
  D.probed = { side: pm.side, ms };
}

function seconds(ms) { return ms < 10000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`; }

async function run(file) {
  const m = D.m;
  if (!m || m.error) return;
  if (typeof WebAssembly !== "object") { fallBack("this browser has no WebAssembly"); return; }
  D.busy = true;
  try {
    say(`reading ${file.name} here (it is not sent anywhere)…`);
    const pic = await readPicture(file);
    const t0 = performance.now(), sess = await session(m), loaded = performance.now(), ort = await runtime();
    // the side: the one asked, or the largest this device affords (measured first when it has not run this graph)
    let used = m, afford = null;
    if (!IN_CLASSIFY && m.cost && m.side > PROBE_SIDE && window.vitvizDeviceProbe !== false) {  // (a benchmark's off)
      const askedMacs = forwardMacs(m.cost, tokensAt(pic.w, pic.h, m));
      if (!D.speed.has(m.file)) { say(deviceStatus("measuring", { side: PROBE_SIDE })); await probe(m, sess, ort); }
      afford = largestSide(pic.w, pic.h, m, D.speed.get(m.file), SLOWER_MS);
      if (afford) afford.askedMs = D.speed.get(m.file) * askedMacs;  // what the side asked would take here
      if (afford === null) {
        fallBack(`this device would take about ${seconds(D.speed.get(m.file) * askedMacs)} for the forward at ` +
                 `${m.side} px and too long even at ${m.smallest} px`);
        return;
      }
      if (afford.side !== m.side) used = atSide(m, afford.side);
    }
    const p0 = performance.now(), prep = prepare(pic.rgb, pic.w, pic.h, used), prepMs = performance.now() - p0;
    const grid = [prep.H / m.patch, prep.W / m.patch], table = await positions(m, grid);
    // (copies: the proxy worker is handed the inputs' buffers, which the page keeps: the picture's, the table's)
    const feeds = { pixels: new ort.Tensor("float32", prep.x.slice(), [1, 3, prep.H, prep.W]),
                    pos: new ort.Tensor("float32", table.slice(), [1, m.pos_prefix + grid[0] * grid[1], m.width]) };
    say(deviceStatus("computing", { backend: backendWords() }));
    let t1 = performance.now(), out = await sess.run(feeds), ms = performance.now() - t1, firstMs = null;
    if (D.backend === "webgpu" && !D.warm.has(m.file)) {  // a session's first WebGPU run compiles its shaders:
      D.warm.add(m.file);                                  // judged (and said) by a second, compiled run
      firstMs = ms;
      t1 = performance.now(); out = await sess.run(feeds); ms = performance.now() - t1;
    }
    D.timings.push(ms);
    D.ranAt = performance.now();  // prepared and computed: what follows draws it (the tests time the two apart)
    if (m.cost) D.speed.set(m.file, ms / forwardMacs(m.cost, m.prefix + grid[0] * grid[1]));  // the next picture's guess
    const png = await pngOf(prep.rgb, prep.W, prep.H);
    const p = payloadOf(m, out, png, `${m.file}-${file.name}-${file.size}-${file.lastModified}-${used.side}`, grid);
    D.last = { input: prep.x, rgb: prep.rgb, out: Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v.data])),
               ms, first: firstMs, prep: prepMs, load: loaded - t0, backend: D.backend, side: used.side,
               asked: m.side, afford };
    if (explorerHere()) window.dispatchEvent(new CustomEvent("vitviz-attention-local", { detail: p }));
    if (OWN) OWN({ m, out: D.last.out, x: prep.x, rgb: prep.rgb, W: prep.W, H: prep.H, grid, side: used.side });
    // a shapes-only model answering for a photo: its nearest shapes, said as such (as the server says them)
    const photo = !!m.shapes_warning && !(await knownScene(pic, m.scenes));
    const list = $d(".vx-dev-top5");
    list.innerHTML = "";
    if (out.logits) {
      for (const [label, prob] of top5(out.logits.data, m.labels)) {
        const li = document.createElement("li"), shown = photo ? `nearest shape: ${label}` : label;
        li.textContent = `${shown}: ${(100 * prob).toFixed(1)}%`;
        li.dataset.p = String(prob); li.dataset.label = shown;
        list.append(li);
      }
    }
    $d(".vx-dev-top5-box").hidden = !out.logits;
    const warn = $d(".vx-dev-warning");
    if (warn) { warn.textContent = photo ? m.shapes_warning : ""; warn.hidden = !photo; }
    const server = m.server_ms ? ` The server's forward for this model takes about ${Math.round(m.server_ms)} ms` +
      `${used === m ? "" : ` at ${m.side} px`} (the median of its latest).` : "";
    // the side used, when it is not the side asked: why, and how to have the one asked
    const smaller = used === m ? "" : `: the largest side expected to run here within ${seconds(afford.allowed)}; at ` +
      `${m.side} px it would take about ${seconds(afford.askedMs)}, so switch this off and upload the picture for ` +
      `${m.side} px from the server`;
    // a side the probe chose is shown whatever it took (the next picture's side follows the time measured now)
    // (a test may stand in for a faster server: window.vitvizDeviceServer = {ms, floor})
    // the server's forward of this picture at the side used (its time at m.side × m.side scaled by the cost model)
    const serverMs = window.vitvizDeviceServer?.ms ?? serverMsFor(pic.w, pic.h, m, used.side);
    const floor = window.vitvizDeviceServer?.floor ?? SLOWER_MS;
    if (!afford && serverMs && ms > Math.max(3 * serverMs, floor)) {
      fallBack(`this device took ${Math.round(ms)} ms for the forward, more than three times the server's (about ` +
               `${serverMs < 10 ? serverMs.toFixed(1) : Math.round(serverMs)} ms)`);
    } else {
      const note = m.side_note ? m.side_note.replace(/\.$/, "") : "";
      const compiled = firstMs === null ? "" : `, after ${Math.round(firstMs)} ms for a first run that prepared the GPU`;
      say(`${file.name}: computed on this device in ${Math.round(ms)} ms${compiled} (${m.model}, ${prep.W}×${prep.H} px` +
          `${smaller}${note ? (smaller ? "; " : ": ") + note : ""}; ${backendWords()}); the picture was ` +
          `not sent.${server}`);
    }
    $d(".vx-device").dataset.ms = String(ms);
    $d(".vx-device").dataset.side = String(used.side);
    $d(".vx-device").dataset.backend = D.backend;
  } catch (err) {
    D.failed = String(err.message || err);
    fallBack(`the model could not run here (${D.failed})`);
  } finally {
    D.busy = false;
    D.done = (D.done || 0) + 1;  // on the state too: a fallback hides the panel
    const box = $d(".vx-device");
    if (box) { box.dataset.done = String(D.done); box.dataset.from = D.from || ""; }  // "hand", or the link's example
  }
}

// whether the chosen picture is one of the example scenes (their pixels' digests, as the server's image_key makes
// them: SHA-1 of the (h, w, 3) bytes and the shape's text); without a secure context nothing can tell: a photo
async function knownScene(pic, scenes) {
  if (!scenes || !scenes.length || !window.crypto?.subtle) return false;
  return scenes.includes(await pictureKey(pic.rgb, pic.h, pic.w));
}

// The server answers instead: said in words where the first screen shows them (the panel stays, at the top of its
// column: body class FELL, theme.css), and the switch turned off. The link's example is the server's to show: the
// link is opened again without device=1, so the server's opener sets the picture and answers; a picture chosen by
// hand stays here until the person uploads it in the tab's picture box, which the words ask for.
const FELL = `vx-${KEY}-fell`;
function fallBack(why) {
  // the picture this panel was to compute: D.from once a run began; before one (a manifest's error, no WebAssembly:
  // show() falls back before any run) the link's example, unless a picture was chosen by hand in a panel
  const example = D.from ? (D.from !== "hand" ? D.from : null)
    : (window.vitvizDevicePicture ? null : linkedImage());
  const then = example ? `the server answers instead, for the example ${example} (its own copy)`
    : "the server can answer instead: upload the picture in the box below (it is then sent to the server)";
  say(`${why[0].toUpperCase()}${why.slice(1)}: ${then}.`);
  D.fell = why;
  document.body.classList.add(FELL);
  for (const part of [".vx-dev-what", ".vx-dev-pick", ".vx-dev-top5-box", ".vx-dev-warning"]) {
    const e = $d(part);
    if (e) e.hidden = true;
  }
  const box = document.querySelector(SWITCH), turning = !!(box && box.checked);
  if (turning) box.click();
  if (!example) return;
  const started = performance.now();
  const reopen = () => {  // once the switch's change has taken device=1 out of the link (if it was on to change)
    if (turning && new URLSearchParams(window.location.search).get("device") === "1" &&
        performance.now() - started < 5000) {
      setTimeout(reopen, 50);
      return;
    }
    const url = new URL(window.location.href);  // never device=1 again: the link would come back here (a loop)
    url.searchParams.delete("device");
    window.vitvizLink?.go(url.href, true);
  };
  setTimeout(reopen, 0);
}

function unfall() {  // the switch on again: the panel as it was
  if (!D.fell) return;
  D.fell = null;
  document.body.classList.remove(FELL);
  for (const part of [".vx-dev-what", ".vx-dev-pick"]) { const e = $d(part); if (e) e.hidden = false; }
}

// the explorer's settings as the page holds them (the link's, or as the explorer left them) over the manifest's
// defaults: a manifest from GET carries the defaults only
function withHeld(m) {
  if (!m || m.error || !m.state || !explorerHere()) return m;
  let linked = {};
  try { linked = JSON.parse(window.vitvizState?.values?.attention?.() || "{}") || {}; } catch (e) { linked = {}; }
  const held = { ...linked, ...(window.vitvizState?.get?.("attention") || {}) }, st = { ...m.state };
  for (const k of Object.keys(st)) if (held[k] !== undefined) st[k] = held[k];
  st.layer = Math.max(1, Math.min(m.layers || 1, Math.round(Number(st.layer) || 1)));
  return { ...m, state: st };
}

let asked = 0;
// the switch, the model, the short side or (the Forward pass) its colour map or layer changed (device_want in
// vitviz/app/components.py): `more`, what only the drawing reads, is redrawn without running the model again
async function want(on, model, side, ...more) {
  if (more.length) D.more = more;
  const wanted = JSON.stringify([!!on, String(model ?? ""), IN_CLASSIFY ? null : side]);
  if (on && D.m && wanted === D.wanted) { if (OWN) OWN(null); return; }  // only what the drawing reads changed
  D.wanted = wanted;
  const mine = ++asked;
  // the server's answers beside this panel are of the server's picture, not this one: hidden while it is on
  document.body.classList.toggle(ON, !!on);
  if (!on) { show(null); return; }
  unfall();
  say("looking up the model…");
  const q = new URLSearchParams({ tab: TAB, model: String(model ?? "") });
  if (!IN_CLASSIFY && side != null) q.set("side", String(Math.round(Number(side))));
  try {
    const r = await fetch(`${appRoot()}/vitviz/device-manifest?${q}`);
    if (mine !== asked) return;
    if (r.status === 200) { show(withHeld(await r.json())); return; }  // 204: not made yet
  } catch (e) { /* the queue answers instead */ }
  if (mine !== asked) return;
  say("making the model's file for this device (the first time only)…");
  window.vitvizDoors?.[`${ROLE.panel}-make`]?.();  // its event makes it
}

function show(m) {
  const was = D.m;
  D.m = m;
  const what = $d(".vx-dev-what");
  if (!m) {  // switched off: the explorer shows the server's answer again
    if (was && D.last && explorerHere()) window.dispatchEvent(new CustomEvent("vitviz-attention-local", { detail: null }));
    D.last = null;
    return;
  }
  if (m.error) { what.textContent = ""; fallBack(m.error); return; }
  if (typeof WebAssembly !== "object") { fallBack("this browser has no WebAssembly"); return; }
  what.textContent = `${m.model}: ${megabytes(m.bytes)}, downloaded once and kept by this browser. Choose a picture: it ` +
    `is read and computed here and never uploaded.${m.notice ? " " + m.notice.replace(/\*\*/g, "") : ""}`;
  say(D.last ? "" : "no picture yet");
  runChosen();  // the model or the side changed: the same picture again
}

// One picture for the page: the one chosen by hand in any device panel of it (it never leaves the device), else the
// example the page's link names (image=, fetched from this server as any page shows it: a lesson's picture)
function linkedExample() {
  const name = new URLSearchParams(window.location.search).get("image");
  return name && D.m?.examples && Object.hasOwn(D.m.examples, name) ? name : null;
}
// the link's example by name (image=), also before a manifest names the examples (a manifest's error names none:
// the server's opener then checks the name, as for any link)
function linkedImage() {
  const name = new URLSearchParams(window.location.search).get("image");
  return !name ? null : D.m?.examples ? (Object.hasOwn(D.m.examples, name) ? name : null) : name;
}
function chosenPicture() {
  if (window.vitvizDevicePicture) return Promise.resolve(window.vitvizDevicePicture);
  const name = linkedExample();
  if (!name) return Promise.resolve(null);
  const kept = window.vitvizDeviceExamples || (window.vitvizDeviceExamples = new Map()), path = D.m.examples[name];
  if (!kept.has(name)) {
    kept.set(name, fetch(under(path)).then((r) => {
      if (!r.ok) throw new Error(`the example ${name} is not there (${r.status})`);
      return r.blob();
    }).then((b) => new File([b], path.split("/").pop(), { type: b.type })).catch((e) => { kept.delete(name); throw e; }));
  }
  return kept.get(name);
}
async function runChosen() {
  const from = window.vitvizDevicePicture ? "hand" : linkedExample();
  let file = null;
  try { file = await chosenPicture(); } catch (e) { say(String(e.message || e)); return; }
  if (!file || !D.m || D.m.error) return;
  if (D.busy) { D.stale = true; return; }  // run once this one is done
  D.file = file; D.from = from; D.stale = false;
  run(file);
}
// a picture chosen in another device panel, or a link within the page that names another example: run when this
// panel is on and in sight (else once it is: checked twice a second, which costs nothing while nothing waits)
window.addEventListener("vitviz-device-picture", (ev) => { if (ev.detail.from !== TAB) D.stale = true; });
document.addEventListener("vitviz-settled", () => {
  if (!window.vitvizDevicePicture && linkedExample() && linkedExample() !== D.from) D.stale = true;
});
setInterval(() => {
  if (!D.stale || D.busy || !D.m || D.m.error || !element.offsetParent) return;
  D.stale = false;
  runChosen();
}, 500);

function chooseByHand(f) {  // the page's picture from now on, in every device panel (it never leaves the device)
  window.vitvizDevicePicture = f;
  window.dispatchEvent(new CustomEvent("vitviz-device-picture", { detail: { from: TAB } }));
  runChosen();
}
element.addEventListener("change", (ev) => {  // on the element: its inside may be drawn again
  if (ev.target && ev.target.type === "file") {
    const f = ev.target.files && ev.target.files[0];
    if (f) chooseByHand(f);
    ev.target.value = "";  // the same file chosen again is a new choice
  }
});
// a picture dropped on the panel's own box (as on the tab's picture box, which it stands for)
const pickBox = () => $d(".vx-dev-pick");
element.addEventListener("dragover", (ev) => {
  if (!ev.target?.closest?.(".vx-dev-pick")) return;
  ev.preventDefault();
  pickBox()?.classList.add("vx-over");
});
element.addEventListener("dragleave", () => pickBox()?.classList.remove("vx-over"));
element.addEventListener("drop", (ev) => {
  if (!ev.target?.closest?.(".vx-dev-pick")) return;
  ev.preventDefault();
  pickBox()?.classList.remove("vx-over");
  const f = ev.dataTransfer?.files?.[0];
  if (f) chooseByHand(f);
});
// While the switch is on no picture leaves this device through any box of the tab: the tab's own picture boxes
// (hidden then, theme.css, so the panel's is on the first screen) would upload what is dropped, pasted or chosen in
// them; caught before gradio's handlers see it (capture, on the window), the picture is this panel's instead.
function intercept(ev) {
  if (!document.body.classList.contains(ON)) return;
  const t = ev.target, box = t?.closest?.(".vx-picture");
  if (!box || t.closest(".vx-device") || box.closest(".tabitem") !== element.closest(".tabitem")) return;
  let f = null;
  if (t.type === "file" && (ev.type === "change" || ev.type === "input")) f = t.files?.[0] || null;
  else if (ev.type === "drop") f = ev.dataTransfer?.files?.[0] || null;
  else if (ev.type === "paste") f = [...(ev.clipboardData?.files || [])][0] || null;
  else if (ev.type !== "dragover") return;
  ev.preventDefault();
  ev.stopImmediatePropagation();
  if (t.type === "file") t.value = "";
  if (f && (!f.type || f.type.startsWith("image/"))) chooseByHand(f);
}
for (const kind of ["change", "input", "drop", "dragover", "paste"]) window.addEventListener(kind, intercept, true);
element.__device = { D, prepare, resample, top5 };
// what was computed last (the tests read it)
window[ROLE.name] = D;
(window.vitvizDevicePanels || (window.vitvizDevicePanels = {}))[TAB] = { want };
watch("value", () => { if (props.value || !D.m) show(props.value); });  // the queue's answer (null: switched off)
if (props.value) show(props.value);
else if (window.vitvizDeviceWanted?.[TAB]) want(...window.vitvizDeviceWanted[TAB]);  // asked before this was drawn
