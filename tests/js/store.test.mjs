// The page's store (render/web/app/store.mjs) and its lessons (app/lessons.mjs) against what the library makes of
// the same links (tests/js/store_vectors.py): each link key's texts as Field.from_link reads them, whole addresses
// read and written back, every shipped lesson step's link, and Python's f"{v:g}". Run by tests/test_page_scripts.py
// ($VITVIZ_STORE_VECTORS), or alone (the vectors are written now with $PYTHON).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { createStore, gText, isDefault, linkOf, readLink, readSetting, settingText, viewSettings }
  from "../../vitviz/render/web/app/store.mjs";
import { lessonBar, stepLink } from "../../vitviz/render/web/app/lessons.mjs";

function storeVectors() {
  if (process.env.VITVIZ_STORE_VECTORS) return JSON.parse(readFileSync(process.env.VITVIZ_STORE_VECTORS, "utf8"));
  const dir = mkdtempSync(join(tmpdir(), "vitviz-store-")), file = join(dir, "store.json");
  try {
    execFileSync(process.env.PYTHON || "python", [new URL("./store_vectors.py", import.meta.url).pathname, file]);
    return JSON.parse(readFileSync(file, "utf8"));
  } finally { rmSync(dir, { recursive: true, force: true }); }
}

const V = storeVectors(), spec = V.spec;
const num = (v) => (typeof v === "string" ? Number(v) : v);
const pairs = (link) => [...new URLSearchParams(String(link).replace(/^\?/, ""))];

test("every link key's texts read as the library's Field.from_link reads them, or are refused with a sentence", () => {
  assert.deepEqual(Object.keys(V.readings).sort(), Object.keys(spec.keys).sort());
  let n = 0;
  for (const [key, cases] of Object.entries(V.readings)) {
    for (const c of cases) {
      const got = readSetting(spec.keys[key], c.in), where = `${key}=${JSON.stringify(c.in)}`;
      assert.equal(got.text, c.text, where);
      if (c.text === null || c.moved) {
        assert.ok(got.why && got.why.startsWith(`${key}=`) && !got.why.includes("\n"), `${where}: ${got.why}`);
      } else {
        assert.equal(got.why, undefined, where);
      }
      n += 1;
    }
  }
  assert.ok(n > 2000, `${n} texts`);
});

test("what the store keeps of a text is itself read back unchanged (the link it writes opens the same)", () => {
  for (const [key, cases] of Object.entries(V.readings)) {
    for (const c of cases.filter((c) => c.text !== null)) {
      assert.deepEqual(readSetting(spec.keys[key], c.text), { text: c.text }, `${key}=${c.text}`);
    }
  }
});

test("gText writes a float as Python's f\"{v:g}\" does (ties to even, 1e+06, -0, inf, nan)", () => {
  assert.ok(V.g.length > 500);
  for (const c of V.g) assert.equal(gText(num(c.v)), c.g, `${c.v}`);
});

test("whole addresses read to the library's state, name each bad part in a notice, and write back its pairs", () => {
  for (const a of V.addresses) {
    const { state, notices } = readLink(a.link, spec);
    for (const k of Object.keys(a.state)) assert.deepEqual(state[k], a.state[k], `${a.link}: ${k}`);
    for (const key of a.noticed) {
      assert.ok(notices.some((t) => t.startsWith(`${key}=`)), `${a.link}: no notice names ${key}: ${notices}`);
    }
    const written = linkOf(state, spec);
    assert.deepEqual(pairs(written), a.pairs, a.link);
    const again = readLink(written, spec), shown = Object.fromEntries(Object.entries(state.settings)
      .filter(([k]) => spec.keys[k].tab === state.tab));  // the address holds the open tab's settings only
    const standIns = Object.fromEntries(Object.entries(spec.keys)  // another tab's model: its stand-in again
      .filter(([, f]) => f.used !== undefined && f.tab !== state.tab).map(([k, f]) => [k, f.used]));
    assert.deepEqual(again.state, { ...state, settings: { ...standIns, ...shown } }, `${a.link} -> ${written}`);
    assert.equal(linkOf(again.state, spec), written);
  }
});

test("a bad text in an address costs its own key only: a good key beside it is read", () => {
  const { state, notices } = readLink("?tab=attention&layer=0&head=bogus&cmap=magma&source=learned", spec);
  assert.equal(state.settings.layer, String(spec.keys.layer.lo));
  assert.equal(state.settings.cmap, "magma");
  assert.ok(!("head" in state.settings) && !("source" in state.settings));
  assert.equal(notices.length, 3, notices.join("\n"));
  assert.ok(!Object.hasOwn(readLink("?constructor=1&toString=2", spec).state.settings, "constructor"));
  assert.equal(readLink("?constructor=1&toString=2", spec).notices.length, 2);
});

test("every shipped lesson step's link, as the lesson bar makes it, reads and writes back its keys and values", () => {
  let steps = 0;
  for (const [name, lesson] of Object.entries(spec.lessons)) {
    for (let k = 1; k <= lesson.steps.length; k++, steps++) {
      const link = stepLink(spec, name, k, {});
      const want = V.addresses.find((a) => a.link === `${lesson.steps[k - 1].link}&lesson=${name}&step=${k}`);
      assert.ok(want, link);
      assert.deepEqual(Object.fromEntries(pairs(link)), Object.fromEntries(pairs(want.link)));
      const { state } = readLink(link, spec);
      assert.deepEqual(pairs(linkOf(state, spec)), want.pairs, link);
      // every key the step names comes back with its value, but for a value at the page's default
      const back = Object.fromEntries(pairs(linkOf(state, spec)));
      for (const [key, text] of pairs(lesson.steps[k - 1].link)) {
        if (key === "image" && text === spec.picture) continue;
        if (key in spec.keys && isDefault(spec.keys[key], text)) continue;
        assert.equal(back[key], text, `${link}: ${key}`);
      }
    }
  }
  assert.ok(steps >= 10);
});

// open=residual and open=lens (tour steps 5 and 8) name sections of the forward_pass view (views/forward.py's
// Shown.sections), which page_spec lists with its tab: the step opens with its section open and no notice.
test("every shipped lesson step opens without a notice", () => {
  for (const [name, lesson] of Object.entries(spec.lessons)) {
    for (let k = 1; k <= lesson.steps.length; k++) {
      const link = stepLink(spec, name, k, {});
      assert.deepEqual(readLink(link, spec).notices, [], link);
    }
  }
});

// Field.to_link leaves a value out only at its declared default; page_spec gives the store the page's default (a
// model list's offline stand-in), so a link made here without the model's name shows another model on a server
// that has the declared one. Nothing to check where every model can be had.
test("a model list at the page's stand-in stays in the address, as Field.to_link writes it", () => {
    for (const [key, d] of Object.entries(V.declared)) {
      const { state } = readLink(`?tab=${spec.keys[key].tab}&${new URLSearchParams({ [key]: d.default })}`, spec);
      assert.equal(Object.fromEntries(pairs(linkOf(state, spec)))[key], d.link, key);
    }
  });

test("a step link keeps the page's modes, and the lesson bar links Back and Next to the steps beside it", () => {
  const tour = spec.lessons.tour, total = tour.steps.length;
  const projected = readLink(stepLink(spec, "tour", 2, { projector: true, contrast: true }), spec).state;
  assert.equal(projected.projector, true);
  assert.equal(projected.contrast, true);
  assert.equal(projected.step, "2");
  assert.equal(stepLink(spec, "tour", 0, {}), null);
  assert.equal(stepLink(spec, "tour", total + 1, {}), null);
  const bar = lessonBar(spec, projected);
  assert.match(bar, new RegExp(`step 2 of ${total}`));
  const links = [...bar.matchAll(/data-link="([^"]*)"/g)].map((m) => m[1].replace(/&amp;/g, "&"));
  assert.deepEqual(links, [stepLink(spec, "tour", 1, projected), stepLink(spec, "tour", 3, projected)]);
  assert.ok(!lessonBar(spec, readLink(stepLink(spec, "tour", total, {}), spec).state).includes('data-go="next"'));
  assert.match(lessonBar(spec, { lesson: "nowhere" }), /does not have/);
});

test("the store writes the address at every change, drops a setting set back to its default, reads a link once", () => {
  const written = [];
  // (the link names the model at its declared default: else a server without it holds its stand-in, named)
  const store = createStore(spec, "?tab=attention&layer=3&" + new URLSearchParams({ model: spec.keys.model.default }),
    (a) => written.push(a));
  assert.equal(store.get().settings.layer, "3");
  store.setting("layer", "5");
  assert.deepEqual(Object.fromEntries(pairs(written.at(-1))), { tab: "attention", layer: "5" });
  store.setting("layer", spec.keys.layer.default);
  assert.equal(written.at(-1), "?tab=attention");
  assert.equal(settingText(store.get(), spec, "layer"), spec.keys.layer.default);
  store.set({ tab: "patches" });
  store.setting("layer", "2");  // another tab's setting: kept, not in this tab's address
  assert.equal(written.at(-1), "?tab=patches");
  store.set({ tab: "attention" });
  assert.equal(written.at(-1), "?tab=attention&layer=2");
  const before = written.length;
  store.setting("layer", "2");
  assert.equal(written.length, before, "no change, no write");
  store.openLink("?tab=classify&image=cat", { keepPicture: true });
  assert.equal(store.get().picture, "cat");
  store.openLink("?tab=patches", { keepPicture: true });
  assert.equal(store.get().picture, "cat", "a link naming no picture keeps the page's");
  store.openLink("?tab=patches");
  assert.equal(store.get().picture, spec.picture);
});

test("a view's settings reach its server function as numbers, words, flags and cells", () => {
  const state = readLink("?tab=attention&layer=4&head=mean&alpha=0.25&query=3,4&ih_cls=1", spec).state;
  const fields = ["layer", "head", "alpha", "query", "ih_cls"].map((k) => ({ ...spec.keys[k], name: k }));
  assert.deepEqual(viewSettings(state, spec, fields), { layer: 4, head: "mean", alpha: 0.25, query: "3,4", ih_cls: true });
});
