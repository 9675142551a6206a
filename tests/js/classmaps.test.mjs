// The explorer's class maps (relevance, AttnLRP, LeGrad) in its strip: their top patch and share as the library's
// vitviz.analyses.relevance.top_patch, and the strip's cells from the server's payload (render/browser.py
// class_maps_payload), against vectors the library writes (tests/js/vectors.py class_maps).
import { test } from "node:test";
import assert from "node:assert/strict";
import { vectors } from "./load.mjs";

import { floats } from "../../vitviz/render/web/lib/numbers.mjs";
import { topPatch, classCells } from "../../vitviz/render/web/lib/maps.mjs";

const V = vectors().class_maps;

test("topPatch is relevance.top_patch: the first largest patch, its share of the positive total", () => {
  assert.ok(V.cases.length >= 6);
  for (const c of V.cases) {
    const got = topPatch(floats(c.b64, "f4"), c.gw);
    assert.deepEqual([got.row, got.col], [c.row, c.col], `top of ${c.b64.length} chars`);
    assert.ok(Math.abs(got.share - c.share) <= c.bound, `share ${got.share} vs ${c.share} (bound ${c.bound})`);
  }
  assert.equal(V.cases.find((c) => c.share === 0 && c.row === 0 && c.col === 0 && c.gw === 3).share, 0);  // zeros
});

test("classCells: one cell per class map for the class named, a refused map says why, none without classes", () => {
  const base = { model: "some model", parts: { rollout: "rollout.f4" } };
  const cells = classCells({ ...base, class_maps: V.payloads.classes });
  assert.deepEqual(cells.map((c) => c.name), ["relevance", "attnlrp", "legrad"]);
  assert.deepEqual(cells.map((c) => c.label), ["relevance", "AttnLRP", "LeGrad"]);
  assert.deepEqual(cells.map((c) => c.part), ["class-relevance.f4", "class-attnlrp.f4", "class-legrad.f4"]);
  assert.ok(cells.every((c) => c.title.includes("for class “star”")), cells.map((c) => c.title).join(" | "));
  const refused = classCells({ ...base, class_maps: V.payloads.refused });
  assert.equal(refused[1].part, null);
  assert.equal(refused[1].title, "AttnLRP: not these layers.");
  assert.ok(refused[0].part && refused[2].part && refused[0].title.includes("“class 0”"));
  const none = classCells({ ...base, class_maps: V.payloads.none });
  assert.equal(none.length, 1);
  assert.equal(none[0].part, null);
  assert.equal(none[0].label, "no class to explain");
  assert.match(none[0].title, /^some model has no classes/);
  const device = classCells({ ...base });  // computed on this device: the payload has no class maps
  assert.equal(device.length, 1);
  assert.equal(device[0].part, null);
  assert.match(device[0].label, /on the server/);
});
