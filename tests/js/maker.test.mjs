// The lesson maker on /next (render/web/app/maker.mjs): its pure parts. The lesson link it starts must be the one
// vitviz/app/lessons.py encode writes (the vector below is encode's output for that lesson), and a step's link is
// the page's link without the lesson being followed.
import { test } from "node:test";
import assert from "node:assert/strict";

import { base64Url, fileName, lessonAddress, readKept, stepLinkOf, whereOf } from "../../vitviz/render/web/app/maker.mjs";
import { lessonMarkdown } from "../../vitviz/render/web/lib/lessons.mjs";

const STEPS = [{ caption: "Look: é ü 🚀", link: "?tab=attention&layer=3" }, { caption: "Patches", link: "?tab=patches" }];
const ENCODED = "md:IyBPw7kg4oCUIHRoZSBbQ0xTXSB0b2tlbgoKMS4gW0xvb2s6IMOpIMO8IPCfmoBdKD90YWI9YXR0ZW50aW9uJmxheWVyPTMpCjIuIFtQYXRjaGVzXSg_dGFiPXBhdGNoZXMpCg";

test("maker: a lesson travels in the link as lessons.py encode writes it, from its first step", () => {
  const text = lessonMarkdown("Où — the [CLS] token", STEPS);
  assert.equal("md:" + base64Url(text), ENCODED);
  const q = new URLSearchParams(lessonAddress(text, STEPS).slice(1));
  assert.deepEqual([q.get("tab"), q.get("layer"), q.get("lesson"), q.get("step")], ["attention", "3", ENCODED, "1"]);
});

test("maker: a step's link is the page's link without its lesson, and says where it is", () => {
  const spec = { picture: "scene_star", keys: { layer: { tab: "attention" }, patch: { tab: "patches" } } };
  const state = { tab: "attention", picture: "upload-0123abcd", settings: { layer: "3", patch: "32" }, open: "rollout",
    show: null, lesson: "tour", step: "4", projector: false, contrast: false, device: false };
  const link = stepLinkOf(state, spec);
  const q = new URLSearchParams(link.slice(1));
  assert.equal(q.get("lesson"), null);
  assert.equal(q.get("step"), null);
  assert.deepEqual([q.get("tab"), q.get("image"), q.get("open"), q.get("layer"), q.get("patch")],
    ["attention", "upload-0123abcd", "rollout", "3", null]);
  assert.equal(whereOf(link), "attention: rollout, your picture");
  assert.equal(stepLinkOf({ ...state, tab: "patches", picture: "scene_star", settings: {}, open: null }, spec), "?tab=patches");
});

test("maker: the kept lesson is read back, an older or damaged entry as a lesson too", () => {
  assert.deepEqual(readKept(JSON.stringify({ title: "T", steps: STEPS })), { title: "T", steps: STEPS });
  assert.deepEqual(readKept(JSON.stringify(STEPS)).steps, STEPS);
  assert.deepEqual(readKept("{broken"), { title: "My vitviz lesson", steps: [] });
  assert.deepEqual(readKept(JSON.stringify({ steps: [null, { caption: 1 }, STEPS[1]] })).steps, [STEPS[1]]);
  assert.equal(fileName("Où — the [CLS] token!"), "o-the-cls-token.md");
  assert.equal(fileName("???"), "vitviz-lesson.md");
});
