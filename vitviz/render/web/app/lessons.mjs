// A lesson in the page: its bar (caption, step k of n, Back and Next) and each step's link. The lessons shipped
// with vitviz come in the page's spec (vitviz/app/panels.py page_spec: name -> {title, steps: [{caption, link}]});
// a teacher's lesson travels in the link itself (lesson=md:<its Markdown, base64url>, as vitviz/app/lessons.py
// encode writes it) and is read with the lesson maker's parser (lib/lessons.mjs parseLesson, lesson.py's twin).
// Pure functions of the spec and the store's state (tests/js/store.test.mjs).

import { OWN_PICTURE, parseLesson } from "../lib/lessons.mjs";

const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

// lesson.py's limits() when the spec does not bring them (spec.lessonLimits wins)
export const LIMITS = { bytes: 32768, steps: 40, caption: 600, link: 8000, file_bytes: 5625429, picture_bytes: 4194304 };

// base64url (padding optional) as UTF-8 text; throws on text that is not base64url
function fromBase64Url(raw) {
  if (!/^[A-Za-z0-9_-]*$/.test(raw)) throw new Error("not base64url");
  const b64 = raw.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (raw.length % 4)) % 4);
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
}

let lastRead = { name: null, got: null };  // the last md: lesson read (the bar redraws at every change)

// {lesson: {title, steps, picture}} for the lesson a link's lesson= names, or {error: a sentence for the student}
export function lessonOf(spec, name) {
  if (!name) return { error: "This link names no lesson." };
  const shipped = (spec.lessons || {})[name];
  if (shipped) return { lesson: { picture: null, ...shipped } };
  const limits = spec.lessonLimits || LIMITS;
  if (!String(name).startsWith("md:")) {
    return { error: `This link names a lesson this page does not have (${String(name).slice(0, 40)}).` };
  }
  if (name.length > limits.link) {
    return { error: `This link's lesson is ${name.length.toLocaleString("en")} characters; a lesson link holds at most ${limits.link.toLocaleString("en")}.` };
  }
  if (lastRead.name === name) return lastRead.got;
  let text = null, got;
  try {
    text = fromBase64Url(name.slice(3));
  } catch {
    got = { error: "This link's lesson cannot be read (it was cut short?)." };
  }
  if (text !== null) {
    try {
      got = { lesson: parseLesson(text, limits) };
    } catch (err) {
      got = { error: `This link's lesson cannot be read: ${err.message}` };
    }
  }
  lastRead = { name, got };
  return got;
}

// the link of step k (1 = first) of lesson `name`, keeping the page's modes (projector, contrast, device)
export function stepLink(spec, name, k, state) {
  const { lesson } = lessonOf(spec, name);
  if (!lesson || k < 1 || k > lesson.steps.length) return null;
  const q = new URLSearchParams(lesson.steps[k - 1].link.replace(/^\?/, ""));
  q.set("lesson", name);
  q.set("step", String(k));
  for (const mode of spec.kept || []) if (state && state[mode]) q.set(mode, "1");
  return "?" + q.toString();
}

// the notice for a step that shows its lesson's own picture (image=lesson) when no lesson in the link carries one
// (a handout's QR code of one step, a copied step link): what is shown instead, and a link to a lesson to open
export function ownPictureNotice(spec, state) {
  if (state.picture !== OWN_PICTURE) return "";
  const { lesson } = lessonOf(spec, state.lesson);
  if (lesson && lesson.picture) return "";
  const shown = String(spec.picture || "an example").replace(/_/g, " ");
  const first = lesson ? stepLink(spec, state.lesson, 1, state) : stepLink(spec, "tour", 1, state);
  const offer = lesson ? "Open the lesson from its first step" : "Open the guided tour";
  return `<p class="vx-own-picture" role="status">This step shows its lesson's own picture, and the link came ` +
    `without a lesson that carries one, so the views show ${esc(shown)} instead. Open the lesson's own link (the ` +
    `handout's first QR code) to see its picture. <a href="${esc(first)}" data-go="link" data-link="${esc(first)}">` +
    `${offer}</a></p>`;
}

// the lesson bar's HTML for `state` ("" when no lesson is open and nothing is to be said); a lesson this page
// cannot read says so
export function lessonBar(spec, state) {
  const own = ownPictureNotice(spec, state);
  if (!state.lesson) return own;
  const { lesson, error } = lessonOf(spec, state.lesson);
  if (!lesson) {
    return `<p class="vx-lesson-error">${esc(error)}</p>` +
      `<button type="button" data-go="leave">Leave the lesson</button>${own}`;
  }
  const total = lesson.steps.length;
  const k = Math.min(Math.max(parseInt(state.step, 10) || 1, 1), total);
  const step = lesson.steps[k - 1];
  const back = k > 1 ? `<button type="button" data-go="back" data-link="${esc(stepLink(spec, state.lesson, k - 1, state))}">Back</button>` : "";
  const next = k < total ? `<button type="button" data-go="next" data-link="${esc(stepLink(spec, state.lesson, k + 1, state))}">Next</button>` : "";
  return `<div class="vx-lesson-head"><h2 class="vx-lesson-title">${esc(lesson.title)}</h2>` +
    `<span class="vx-lesson-count">step ${k} of ${total}</span></div>` +
    `<div class="vx-caption" tabindex="0" role="region" aria-label="step ${k}'s caption">${esc(step.caption)}</div>` +
    `<div class="vx-lesson-go">${back}${next}<button type="button" data-go="leave">Leave the lesson</button></div>${own}`;
}
