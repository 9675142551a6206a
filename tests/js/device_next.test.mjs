// The page at /next's device module (render/web/app/device.mjs): its pure parts, under Node.
import { test } from "node:test";
import assert from "node:assert/strict";
import { base64, explorerPayload, topFive } from "../../vitviz/render/web/app/device.mjs";

const f32 = (b64) => new Float32Array(Uint8Array.from(Buffer.from(b64, "base64")).buffer);

test("base64 writes bytes as the explorer reads them, across chunks", () => {
  assert.equal(base64(new Uint8Array([1, 2, 3, 250])), "AQID+g==");
  const big = Uint8Array.from({ length: 70000 }, (_, i) => i % 251);
  assert.deepEqual(Uint8Array.from(Buffer.from(base64(big), "base64")), big);
});

test("the explorer's payload holds each layer's heads, then their mean, and each layer's queries then keys", () => {
  const m = { layers: 2, heads: 2, prefix: 1, patch: 8, model: "m", state: {}, fields: {}, colormaps: {} };
  const grid = [1, 2], n = 2, T = 3, d = 4;
  const cls = Float32Array.from({ length: 2 * 2 * n }, (_, i) => i);  // (L, H, N)
  const out = { cls };
  for (let l = 0; l < 2; l++) {
    out[`q${l}`] = new Float32Array(2 * T * d).fill(l + 1);
    out[`k${l}`] = new Float32Array(2 * T * d).fill(-(l + 1));
  }
  const p = explorerPayload(m, out, new Uint8Array([9]), "t", grid);
  const all = f32(p.data["cls.f4"]);
  // layer 0: head 0 [0, 1], head 1 [2, 3], mean [1, 2]; layer 1: [4, 5], [6, 7], [5, 6]
  assert.deepEqual(Array.from(all), [0, 1, 2, 3, 1, 2, 4, 5, 6, 7, 5, 6]);
  assert.equal(p.head_dim, d);
  assert.equal(p.tokens, T);
  assert.deepEqual(p.parts.keys, ["keys-0.f4", "keys-1.f4"]);
  const k1 = f32(p.data["keys-1.f4"]);
  assert.equal(k1.length, 4 * T * d);
  assert.equal(k1[0], 2);
  assert.equal(k1[k1.length - 1], -2);
});

test("the top 5 is the softmax's five largest, said as nearest shapes for a photo", () => {
  const top = topFive(Float32Array.from([0, 3, 1, 2, 5, 4]), ["a", "b", "c", "d", "e", "f"], false);
  assert.deepEqual(top.map(([l]) => l), ["e", "f", "b", "d", "c"]);
  assert.ok(Math.abs(top.reduce((s, [, p]) => s + p, 0) - 0.9957) < 1e-3);
  assert.equal(topFive([1, 2], ["x", "y"], true)[0][0], "nearest shape: y");
});
