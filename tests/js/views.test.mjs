// The pure parts of the views drawn in the browser on /next (vitviz/render/web/app/views/): reading and writing
// the settings they hold, the writer that waits for a burst to end, the similarity caption's numbers, a patch's
// embedding, the picker's marks. Run: node --test tests/js/
import { test } from "node:test";
import assert from "node:assert/strict";

import { cellsText, explorerSettings, explorerText, readCell, readCells, settleWriter } from "../../vitviz/render/web/app/views/held.mjs";
import { similarityWords } from "../../vitviz/render/web/app/views/posembed.mjs";
import { embedPatch } from "../../vitviz/render/web/app/views/inspector.mjs";
import { marksWords } from "../../vitviz/render/web/app/views/picker.mjs";
import { tokenName } from "../../vitviz/render/web/app/views/inside.mjs";

const P = { layers: 4, heads: 3, grid: [8, 8], colormaps: { inferno: "", viridis: "" },
            fields: { layer: {}, head: { words: { mean: -1 } }, keep: {}, alpha: {}, cmap: {}, query: {} } };

test("cells read from the link stay inside the grid and come back in the server's order", () => {
  assert.deepEqual(readCell("3,4", [8, 8]), [3, 4]);
  assert.deepEqual(readCell("30,4", [8, 8]), [7, 4]);
  assert.equal(readCell("", [8, 8]), null);
  assert.equal(readCell("a,b", [8, 8]), null);
  const cells = readCells("5,1;0,2;9,9;0,2;x", [8, 8]);
  assert.deepEqual([...cells].sort(), ["0,2", "5,1"]);
  assert.equal(cellsText(new Set(["5,1", "0,2", "0,10"])), "0,2;0,10;5,1");
  assert.equal(cellsText(new Set()), "");
});

test("the explorer's settings: layer from 1 in the link, from 0 here, within the model; head's word", () => {
  const texts = { layer: "12", head: "mean", keep: "0.75", alpha: "0.3", cmap: "viridis", query: "2,9" };
  const got = explorerSettings((n) => texts[n], P);
  assert.deepEqual(got, { layer: 3, head: -1, keep: 0.75, alpha: 0.3, cmap: "viridis", query: [2, 7] });
  const other = explorerSettings((n) => ({ ...texts, head: "7", cmap: "jet", layer: "x", query: "" })[n], P, { layer: 1, cmap: "inferno" });
  assert.equal(other.head, 2);
  assert.equal(other.cmap, "inferno");
  assert.equal(other.layer, 1);
  assert.equal(other.query, null);
  for (const [name, v] of Object.entries(got)) {  // written back, read again: the same
    const again = explorerSettings((n) => (n === name ? explorerText(name, v, P) : texts[n]), P);
    assert.deepEqual(again[name], v, name);
  }
  assert.equal(explorerText("head", -1, P), "mean");
  assert.equal(explorerText("query", null, P), "");
  assert.equal(explorerText("keep", 0.35000000000000003, P), "0.35");
});

test("the settle writer hands a burst over once, after the last change has waited", () => {
  let now = 0, timers = [];
  const clock = { set: (f, ms) => { const t = { f, at: now + ms }; timers.push(t); return t; },
                  clear: (t) => { timers = timers.filter((x) => x !== t); } };
  const tick = (ms) => { now += ms; for (const t of timers.filter((x) => x.at <= now)) { clock.clear(t); t.f(); } };
  const written = [];
  const w = settleWriter((patch) => written.push(patch), 400, clock);
  for (let i = 0; i < 10; i++) { w.put({ query: `${i},0` }); tick(100); }  // ten presses, 100 ms apart
  assert.equal(written.length, 0);
  assert.deepEqual(w.pending(), { query: "9,0" });
  tick(299);
  assert.equal(written.length, 0);
  tick(1);
  assert.deepEqual(written, [{ query: "9,0" }]);
  w.put({ head: "2" }); w.put({ layer: "3" });
  w.flush();
  assert.deepEqual(written[1], { head: "2", layer: "3" });
  w.put({ head: "1" }); w.cancel(); tick(1000);
  assert.equal(written.length, 2);
});

test("the similarity caption's numbers: itself, the right neighbour, the least similar", () => {
  const row = Float32Array.from([0.2, 1, 0.5, -0.3, 0.9, 0.1]);  // a 2×3 grid, position (0, 1)
  assert.deepEqual(similarityWords(row, [0, 1], [2, 3]), { self: 1, right: Float32Array.from([0.5])[0], low: Float32Array.from([-0.3])[0], lowAt: [1, 0] });
  assert.equal(similarityWords(row, [0, 2], [2, 3]).right, null);
});

test("a patch's embedding is W·flat + b with the pixels flattened channel by channel", () => {
  const P = 2, cols = 2, pix = new Uint8ClampedArray(4 * 4 * 2 * 4);  // a 2×2 grid of 2-pixel patches (4×4 px)
  for (let i = 0; i < pix.length; i++) pix[i] = (i * 37) % 256;
  const D = 3, n = 3 * P * P, W = Float32Array.from({ length: D * n }, (_, i) => ((i % 7) - 3) / 10), b = Float32Array.from([0.5, -1, 2]);
  const { flat, emb } = embedPatch(pix, cols, P, W, b, 1, 1);
  assert.equal(flat.length, 12);
  assert.equal(flat[0], pix[((2 * 4) + 2) * 4] / 255);  // red of the patch's top-left pixel
  assert.equal(flat[4], pix[((2 * 4) + 2) * 4 + 1] / 255);  // then green
  for (let d = 0; d < D; d++) {
    let want = b[d];
    for (let i = 0; i < n; i++) want += W[d * n + i] * flat[i];
    assert.ok(Math.abs(emb[d] - want) < 1e-12);
  }
});

test("the picker says what is marked", () => {
  assert.equal(marksWords(new Set()), "No patch marked yet: click or drag on the picture.");
  assert.equal(marksWords(new Set(["2,3"])), "1 patch marked: 2,3");
  assert.equal(marksWords(new Set(["2,3", "0,1"])), "2 patches marked: 0,1; 2,3");
});

test("inside one head names the query token as the caption does", () => {
  assert.equal(tokenName(0, 1, 8), "[CLS]");
  assert.equal(tokenName(2, 5, 8), "a register");
  assert.equal(tokenName(1 + 8 * 3 + 5, 1, 8), "patch (3, 5)");
});
