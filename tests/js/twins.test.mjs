// The page's twins of library functions (vitviz/render/web/lib) against vectors the library writes
// (tests/js/vectors.py). Run by tests/test_page_scripts.py, or alone:
//   python tests/js/vectors.py /tmp/vectors.json && VITVIZ_VECTORS=/tmp/vectors.json node --test tests/js/
import { test } from "node:test";
import assert from "node:assert/strict";
import { vectors } from "./load.mjs";

import { fixed, percent, floats, widenHalf, bytes } from "../../vitviz/render/web/lib/numbers.mjs";
import { colourIndex, massMask, queryRows, headTrace, stepCell, softmax, top5 } from "../../vitviz/render/web/lib/maps.mjs";
import { resample, prepare, fitShape, pictureKey, forwardMacs, atSide, tokensAt, largestSide, serverMsFor } from "../../vitviz/render/web/lib/picture.mjs";
import { appRoot, under } from "../../vitviz/render/web/lib/server.mjs";
import { stagesAt, forwardSummary, largest, shortName, forwardNumbers, patchNorms } from "../../vitviz/render/web/lib/forward.mjs";

const V = vectors();
const f32 = (b64) => floats(b64, "f4");
const u8 = (b64) => bytes(b64);

function within(got, want, bound, what) {  // every |got − want| ≤ bound (per entry), else the first that is not
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    const b = Array.isArray(bound) || ArrayBuffer.isView(bound) ? bound[i] : bound;
    if (!(Math.abs(got[i] - want[i]) <= b)) assert.fail(`${what}[${i}]: ${got[i]} vs ${want[i]} (bound ${b})`);
  }
}

test("fixed and percent print Python's digits", () => {
  let n = 0;
  for (const r of V.numbers.rows) {
    const v = Number(r.v);
    for (let d = 0; d < 4; d++, n++) assert.equal(fixed(v, d), r.fixed[d], `format(${r.v}, ".${d}f")`);
    for (let d = 0; d < 3; d++, n++) assert.equal(percent(v, d), r.percent[d], `format(${r.v}, ".${d}%")`);
  }
  assert.ok(n > 10000, `${n} comparisons`);
});

test("float16 parts widen to numpy's float32, natively or not", () => {
  const want = f32(V.halves.f32_b64), h = new Uint16Array(bytes(V.halves.b64).buffer);
  assert.equal(want.length, V.halves.count);
  for (const got of [floats(V.halves.b64, "f2"), widenHalf(h)]) {
    for (let i = 0; i < want.length; i++) assert.ok(Object.is(got[i], want[i]), `bits ${h[i]}: ${got[i]} vs ${want[i]}`);
  }
});

test("colourIndex takes matplotlib's table entry", () => {
  for (const c of V.colours.cases) {
    c.values.forEach((v, i) => assert.equal(colourIndex(v, c.lo, c.hi), 3 * c.index[i], `${v} in [${c.lo}, ${c.hi}]`));
  }
});

test("massMask is vitviz.core.attention.mass_mask to the last digit", () => {
  for (const c of V.mass_masks.cases) {
    const row = f32(c.b64), got = massMask(row, c.keep);
    const chosen = []; got.mask.forEach((m, i) => { if (m) chosen.push(i); });
    assert.deepEqual(chosen, c.mask, `keep ${c.keep} of ${row.length}`);
    assert.equal(got.mass, c.mass); assert.equal(got.frac, c.frac); assert.equal(got.count, c.mask.length);
  }
});

test("queryRows are LayerKeys.rows with the head mean, within float64 rounding then float32's", () => {
  for (const c of V.query_rows.cases) {
    const got = queryRows(f32(c.q_b64), f32(c.k_b64), c.heads, c.tokens, c.d, c.prefix, c.qi);
    within(got, c.rows, c.bound, `rows of patch ${c.qi} (${c.heads} heads, ${c.tokens} tokens)`);
  }
});

test("headTrace is vitviz.analyses.heads.trace", () => {
  for (const c of V.head_traces.cases) {
    const got = headTrace(f32(c.q_b64), f32(c.k_b64), f32(c.v_b64), f32(c.out_b64), c.tokens, c.d, c.scale, c.t);
    within(got.scores, c.scores, c.score_bound, "scores");
    within(got.weights, c.weights, c.weight_bound, "weights");
    within(got.mixed, c.mixed, c.mixed_bound, "mixed");
    within([got.error], [c.error], Math.max(...c.mixed_bound), "error");
  }
});

test("softmax and top5 are torch's softmax and its five largest", () => {
  const L = V.logits, p = softmax(L.logits);
  within(p, L.probs, L.bound, "softmax");
  const t = top5(L.logits, L.labels);
  assert.deepEqual(t.map((r) => r[0]), L.top5.map((r) => r[0]));
  within(t.map((r) => r[1]), L.top5.map((r) => r[1]), Math.max(...L.bound), "top5");
});

test("stepCell moves inside the grid and ignores other keys", () => {
  assert.deepEqual(stepCell("ArrowLeft", [0, 0], [3, 4]), [0, 0]);
  assert.deepEqual(stepCell("ArrowRight", [2, 3], [3, 4]), [2, 3]);
  assert.deepEqual(stepCell("ArrowDown", [1, 2], [3, 4]), [2, 2]);
  assert.equal(stepCell("a", [1, 2], [3, 4]), null);
});

test("resample is Pillow's resize, byte for byte", () => {
  for (const r of V.pictures.resizes) {
    const got = resample(u8(r.b64), r.w, r.h, r.ow, r.oh, r.name);
    assert.deepEqual(Array.from(got), Array.from(u8(r.want_b64)), `${r.name} ${r.w}×${r.h} → ${r.ow}×${r.oh}`);
  }
});

test("prepare fits and normalises a picture as the server does for each input policy", () => {
  const policies = new Set();
  for (const f of V.pictures.fits) {
    policies.add(f.m.policy);
    const [, , W, H] = fitShape(f.w, f.h, f.m);
    assert.deepEqual([H, W], [f.H, f.W], `${f.m.policy} ${f.w}×${f.h}`);
    const got = prepare(u8(f.b64), f.w, f.h, f.m);
    assert.deepEqual(Array.from(got.rgb), Array.from(u8(f.rgb_b64)), `${f.m.policy} ${f.w}×${f.h}: pixels`);
    assert.deepEqual(Array.from(got.x), Array.from(f32(f.x_b64)), `${f.m.policy} ${f.w}×${f.h}: input`);
  }
  assert.deepEqual([...policies].sort(), ["checkpoint", "keep"]);
});

test("appRoot and under follow gradio's root, with or without its trailing slash", () => {
  const before = globalThis.gradio_config;
  try {
    delete globalThis.gradio_config;
    assert.equal(appRoot(), ""); assert.equal(under("vitviz/device-pos/x"), "/vitviz/device-pos/x");
    globalThis.gradio_config = { root: "https://host/space/" };
    assert.equal(appRoot(), "https://host/space"); assert.equal(under("/gradio_api/file=a"), "https://host/space/gradio_api/file=a");
  } finally { globalThis.gradio_config = before; }
});

test("pictureKey is the server's image_key of the same pixels", async () => {
  for (const k of V.pictures.keys) assert.equal(await pictureKey(u8(k.b64), k.h, k.w), k.key, `${k.h}×${k.w}`);
  assert.equal(V.pictures.keys.length, 2);
});

test("serverMsFor: the server's time (at side × side) scaled by the cost to a 3:2 photo's tokens; largestSide uses it", () => {
  // a "keep" model runs a 3:2 photo at 224 × 336: 28 × 42 patches, not 28 × 28 (the server's time is the square's)
  const m = { policy: "keep", side: 224, patch: 8, prefix: 1, crop_pct: 1, smallest: 64, server_ms: 100,
              cost: { token: 21_630_000, pair: 2 * 12 * 384 } };
  const square = forwardMacs(m.cost, 1 + 28 * 28), photo = forwardMacs(m.cost, 1 + 28 * 42);
  assert.equal(tokensAt(600, 400, m), 1 + 28 * 42);
  assert.ok(Math.abs(serverMsFor(600, 400, m) - 100 * photo / square) < 1e-9);
  assert.equal(serverMsFor(400, 400, m), 100);
  const at = forwardMacs(m.cost, tokensAt(600, 400, atSide(m, 112)));
  assert.ok(Math.abs(serverMsFor(600, 400, m, 112) - 100 * at / square) < 1e-9);
  // a device exactly 3× the server's photo time at 224: allowed (it was judged against the square's time: refused)
  const speed = 3 * 100 * photo / square / photo;
  assert.equal(largestSide(600, 400, m, speed * (1 - 1e-9), 0).side, 224);
  assert.equal(serverMsFor(600, 400, { ...m, server_ms: 0 }), 0);
});

test("largestSide: the side asked when this device affords it, else the largest whole-patch side it does", () => {
  // DINO ViT-S/8's cost (vitviz.models.device.cost) and a server that runs 480 px in 2.7 s
  const m = { policy: "keep", side: 480, patch: 8, prefix: 1, crop_pct: 1, smallest: 64, server_ms: 2700,
              cost: { token: 21_630_000, pair: 2 * 12 * 384 } };
  const macs = (s, w = s, h = s) => forwardMacs(m.cost, tokensAt(w, h, atSide(m, s)));
  assert.equal(tokensAt(480, 480, m), 1 + 60 * 60);
  assert.equal(tokensAt(600, 400, atSide(m, 200)), 1 + 25 * 37);  // the long side cut to whole patches
  // fast enough for 480: 480
  const fast = 3 * 2700 / macs(480);
  assert.equal(largestSide(480, 480, m, fast, 5000).side, 480);
  // three times slower than allowed at 480: the largest side whose expected time is allowed, and the next is not
  const slow = 3 * fast, got = largestSide(480, 480, m, slow, 5000);
  assert.ok(got.side < 480 && got.side % 8 === 0, JSON.stringify(got));
  const allowed = (s) => Math.max(3 * 2700 * macs(s) / macs(480), 5000);
  assert.ok(slow * macs(got.side) <= allowed(got.side));
  assert.ok(slow * macs(got.side + 8) > allowed(got.side + 8));
  assert.equal(got.allowed, allowed(got.side));
  assert.ok(Math.abs(got.ms - slow * macs(got.side)) < 1e-6 * got.ms);
  // a device so slow that even 64 px takes longer than 5 s: none
  assert.equal(largestSide(480, 480, m, 6000 / macs(64), 5000), null);
  // without the server's time the floor alone decides
  const alone = largestSide(480, 480, { ...m, server_ms: 0 }, 5000 / macs(320), 5000);
  assert.equal(alone.side, 320);
  // atSide is vitviz.models.device.preprocessing's resize
  assert.equal(atSide({ ...m, crop_pct: 0.875 }, 224).resize, 256);
});

test("the forward pass's numbers on the device are the server's view of the same picture", () => {
  const F = V.forward, EPS32 = 2 ** -24;
  for (const [name, short18, short24] of F.names) {
    assert.equal(shortName(name), short18, name);
    assert.equal(shortName(name, 24), short24, name);
  }
  for (const [values, want] of F.ties) assert.deepEqual(largest(values, 5), want, JSON.stringify(values));
  assert.equal(F.cases.length, 2);
  for (const c of F.cases) {
    const N = c.grid[0] * c.grid[1], T = F.prefix + N;
    const got = stagesAt(F.plan, { H: c.H, W: c.W, N, T });
    assert.deepEqual(got.map((s) => [s.name, s.shape, s.axes]), c.stages.map((s) => [s.name, s.shape, s.axes]));
    assert.ok(got.every((s) => s.words && s.link.startsWith("?tab=")), "every stage has its words and its link");
    assert.equal(forwardSummary(F.model, c.grid, F.patch, T, F.width, F.layers), c.summary);
    const out = Object.fromEntries(Object.entries(c.outputs).map(([k, b]) => [k, f32(b)]));
    const n = forwardNumbers(out, { layers: F.layers, prefix: F.prefix, grid: c.grid });
    assert.deepEqual(n.chosen, c.chosen);
    assert.equal(n.target, c.target);
    within(n.probs, c.probs, c.probs.map((p) => 8 * EPS32 * Math.max(p, 1e-30) + 1e-15), "probabilities");
    assert.equal(n.patchNorms.length, F.layers + 1);
    assert.equal(n.patchNorms[0].length, N);
    assert.equal(n.prefixNorms[0].length, F.prefix);
    assert.equal(n.lens.length, F.layers);
    assert.equal(n.lensPatches[F.layers - 1].length, N);
    assert.equal(n.final.length, N);
    // each flattened patch's norm from the picture (float64 sums of float32 values, against torch's float32 norm)
    const norms = patchNorms(f32(c.x_b64), c.H, c.W, F.patch);
    within(norms, c.patch_norms, c.patch_norms.map((v) => 3 * F.patch * F.patch * EPS32 * v), "patch norms");
  }
});
