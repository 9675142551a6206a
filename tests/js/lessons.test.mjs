// The lesson maker's twin of vitviz/tools/lesson.py (render/web/lib/lessons.mjs) against the lessons the library
// writes (tests/js/vectors.py, section "lessons"). Run by tests/test_page_scripts.py, or alone (tests/js/load.mjs writes the vectors).
import { test } from "node:test";
import assert from "node:assert/strict";
import { vectors } from "./load.mjs";

import { OWN_PICTURE, lessonMarkdown, splitPicture, withImage, stepsWithImage, moveStep, removeStep, uploadOf,
  cleanCaption, parseLesson, markdownWithImage, base64Decodes } from "../../vitviz/render/web/lib/lessons.mjs";

const L = vectors().lessons;

test("the maker writes a lesson's Markdown as the library does, its own picture included", () => {
  assert.equal(OWN_PICTURE, L.own);
  for (const c of L.cases) assert.equal(lessonMarkdown(c.title, c.steps, c.picture), c.markdown, c.title);
});

test("the picture's line is taken out as the library's parser takes it, and a second one is refused", () => {
  for (const c of L.cases) {
    const { text, picture } = splitPicture(c.markdown, L.limits);
    assert.equal(picture, c.picture);
    assert.ok(!text.includes("data:image"));
    assert.equal(text.split("\n").length, c.markdown.split("\n").length);  // line numbers kept, as lesson.py does
  }
  const withOne = L.cases.find((c) => c.picture).markdown, line = withOne.split("\n")[2];
  assert.throws(() => splitPicture(withOne.replace(line, line + "\n" + line), L.limits), /line 4: a lesson carries one picture/);
});

test("steps move, go and change their picture; a lesson holds one upload", () => {
  const steps = [{ caption: "a", link: "?tab=patches&image=upload-ab12&patch=16" }, { caption: "b", link: "?tab=positions" },
    { caption: "c", link: "?tab=attention&image=cat" }];
  assert.deepEqual(moveStep(steps, 0, 1).map((s) => s.caption), ["b", "a", "c"]);
  assert.deepEqual(moveStep(steps, 2, -1).map((s) => s.caption), ["a", "c", "b"]);
  assert.equal(moveStep(steps, 0, -1), steps);
  assert.equal(moveStep(steps, 2, 1), steps);
  assert.deepEqual(removeStep(steps, 1).map((s) => s.caption), ["a", "c"]);
  assert.equal(uploadOf(steps), "upload-ab12");
  assert.equal(uploadOf(removeStep(steps, 0)), null);
  assert.throws(() => uploadOf([...steps, { caption: "d", link: "?tab=patches&image=upload-cd34" }]), /one picture/);
  const own = stepsWithImage(steps, "upload-ab12", OWN_PICTURE);
  assert.equal(own[0].link, "?tab=patches&image=lesson&patch=16");
  assert.equal(own[2].link, steps[2].link);  // an example step keeps its example
  assert.equal(withImage("?tab=x&image=lesson", "lesson", "upload-ff00"), "?tab=x&image=upload-ff00");
  assert.equal(cleanCaption("two\nlines ](?x"), "two lines ] (?x");
});

test("a lesson's title and steps are read back as the library reads them", () => {
  for (const c of L.cases) {
    const back = parseLesson(c.markdown, L.limits);
    assert.equal(back.title, c.title.trim());
    assert.deepEqual(back.steps, c.parsed_steps);
    assert.equal(back.picture, c.picture);
  }
  const own = L.cases.find((c) => c.picture).markdown;
  const named = markdownWithImage(own, OWN_PICTURE, "upload-0123456789ab");
  assert.ok(named.includes("image=upload-0123456789ab") && !named.includes("image=lesson"));
  assert.equal(named.split("\n").length, own.split("\n").length);
});

test("the page's reader accepts and refuses each lesson as the library's parser does, in its words", () => {
  // issue 68 item 15: one check, lesson.py's parse; its twin here says what it says, for every lesson of the vectors
  assert.ok(L.checks.length >= 25);
  for (const c of L.checks) {
    if (c.error) {
      assert.throws(() => parseLesson(c.text, L.limits), (e) => e.message === c.error, `${c.name}: ${c.error}`);
    } else {
      const got = parseLesson(c.text, L.limits);
      assert.equal(got.title, c.title, c.name);
      assert.deepEqual(got.steps, c.steps, c.name);
      assert.equal(got.picture, c.picture, c.name);
    }
  }
  const named = new Set(L.checks.filter((c) => c.error).map((c) => c.name));
  for (const n of ["41 steps", "601-character caption", "SVG picture line", "javascript: step",
    "bad base64 (Incorrect padding)"]) assert.ok(named.has(n), n);
  assert.ok(!L.checks.some((c) => /Incorrect padding|Data too large/.test(c.error || "")));
});

test("base64 that decodes: whole groups of four, padded", () => {
  for (const [body, ok] of [["", true], ["QQ==", true], ["QUI=", true], ["QUJD", true], ["QQ", false], ["QQ=", false],
    ["Q===", false], ["QU=I", false], ["QUJD\n", false]]) assert.equal(base64Decodes(body), ok, body);
});
