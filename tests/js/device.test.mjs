// The device panel's words for each step of its work (render/web/lib/device.mjs). Run by tests/test_page_scripts.py.
import { test } from "node:test";
import assert from "node:assert/strict";

import { deviceStatus, megabytes } from "../../vitviz/render/web/lib/device.mjs";

test("a download says how much of how much has come, and that it happens once", () => {
  assert.equal(megabytes(43_300_000), "43.3 MB");
  assert.equal(deviceStatus("model", { got: 12_340_000, total: 43_300_000 }),
               "downloading the model: 12.3 of 43.3 MB (the first time only; this browser keeps it)…");
  assert.equal(deviceStatus("runtime", { got: 0, total: 14_239_897 }),
               "downloading ONNX Runtime: 0.0 of 14.2 MB (the first time only; this browser keeps it)…");
  // more than announced (a size the manifest did not know) never reads as more than the whole
  assert.match(deviceStatus("model", { got: 5e7, total: 43_300_000 }), /43\.3 of 43\.3 MB/);
});

test("a later visit says the model comes from the cache, then what is being done, never a download", () => {
  const later = [deviceStatus("cached", { total: 43_300_000 }), deviceStatus("preparing", { backend: "WebAssembly, 2 threads" }),
                 deviceStatus("computing")];
  assert.deepEqual(later, ["reading the model from this browser's cache (43.3 MB, not downloaded again)…",
                           "preparing ONNX Runtime and the model (WebAssembly, 2 threads)…",
                           "computing the picture on this device…"]);
  assert.ok(later.every((s) => !s.includes("download") || s.includes("not downloaded")));
  assert.equal(deviceStatus("measuring", { side: 224 }), "measuring this device with a blank 224-px picture…");
  assert.throws(() => deviceStatus("waiting"), /no words for the step waiting/);
});
