// The page's one state and its address (render/web/lib/address.mjs) against the tour's links and the link keys the
// server gives the page (tests/js/vectors.py, section "addresses"). Run by tests/test_page_scripts.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { vectors } from "./load.mjs";

import { FIRST_TAB, addressOf, readAddress, withSetting, withTab } from "../../vitviz/render/web/lib/address.mjs";

const A = vectors().addresses;
const params = (address) => Object.fromEntries(new URLSearchParams(address.replace(/^\?/, "")));

test("every step of the tour is read into one state and written back with the same parameters", () => {
  assert.ok(A.links.length >= 10 && Object.keys(A.tab_keys).length > 20);
  for (const link of A.links) {
    const state = readAddress(link, A.tab_keys);
    assert.deepEqual(params(addressOf(state, A.tab_keys)), params(link), link);
    assert.deepEqual(params(addressOf(state, A.tab_keys, link)), params(link), link);  // over itself: unchanged
    assert.equal(addressOf(state, A.tab_keys, link), link, link);  // and in the same order
  }
});

test("the address shows the open tab's settings and picture only, and every tab's again when it is opened", () => {
  const [forward, patches] = [A.links[0], A.links[1]];
  let state = readAddress(forward, A.tab_keys);
  const fp = Object.keys(state.settings);
  assert.ok(fp.length >= 1 && fp.every((k) => A.tab_keys[k] === "forward"));
  state = withTab(state, "patches");
  state = { ...state, settings: withSetting(state.settings, "patch", 8, 16) };
  const shown = params(addressOf(state, A.tab_keys));
  assert.equal(shown.tab, "patches");
  assert.equal(shown.patch, "8");
  for (const k of fp) assert.equal(shown[k], undefined, k);  // the forward pass's settings are held, not shown
  assert.equal(shown.image, undefined);  // the patches tab has no picture of its own yet
  const back = params(addressOf(withTab(state, "forward"), A.tab_keys));
  for (const k of fp) assert.equal(back[k], params(forward)[k], k);
  assert.equal(back.image, params(forward).image);
  assert.equal(back.patch, undefined);
  assert.equal(params(patches).patch, "8");
});

test("a setting at its default, or empty, is left out; booleans and lists are written as the server reads them", () => {
  let s = withSetting({}, "layer", 6, 6);
  assert.deepEqual(s, {});
  s = withSetting(s, "layer", 4, 6);
  assert.deepEqual(s, { layer: "4" });
  s = withSetting(s, "layer", "", 6);
  assert.deepEqual(s, {});
  assert.deepEqual(withSetting({}, "flag", true, "0"), { flag: "1" });
  assert.deepEqual(withSetting({}, "marks", [3, 7, 12], ""), { marks: "3,7,12" });
});

test("a section closes when its tab is left; the modes and keys this page does not know stay in the address", () => {
  const state = readAddress("?tab=attention&open=inside_head&projector=1&utm=x", A.tab_keys);
  assert.equal(state.open, "inside_head");
  const left = withTab(state, "classify");
  assert.equal(left.open, null);
  assert.equal(withTab(state, "attention"), state);
  const written = params(addressOf(left, A.tab_keys, "?tab=attention&open=inside_head&projector=1&utm=x"));
  assert.deepEqual(written, { tab: "classify", projector: "1", utm: "x" });
  assert.equal(readAddress("", A.tab_keys).tab, null);
  assert.deepEqual(readAddress("?image=cat", A.tab_keys).images, { [FIRST_TAB]: "cat" });
});

test("a figure a link names (show=) is kept in the address with its tab and dropped when the tab is left", () => {
  const state = readAddress("?tab=classify&image=cat&show=top5&lesson=tour&step=9", A.tab_keys);
  assert.equal(state.show, "top5");
  assert.deepEqual(params(addressOf(state, A.tab_keys)),
                   { tab: "classify", image: "cat", show: "top5", lesson: "tour", step: "9" });
  const left = withTab(state, "attention");
  assert.equal(left.show, null);
  assert.equal("show" in params(addressOf(left, A.tab_keys, "?tab=classify&show=top5")), false);
  assert.equal(readAddress("?tab=classify", A.tab_keys).show, null);
});
