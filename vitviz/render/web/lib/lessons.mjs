// A lesson as the lesson maker holds it: a title, captioned links, and at most one picture of its own. The twin of
// vitviz/tools/lesson.py's Markdown (write and the picture line of parse); an ES module, joined into page.js.

// the line that carries a lesson's own picture (lesson.py's PICTURE)
const PICTURE_LINE = /^\s*!\[[^\]]*\]\((data:image\/(?:png|jpeg|webp|gif);base64,[A-Za-z0-9+/=]+)\)\s*$/;
// a step's image= for the lesson's own picture (lesson.py's OWN)
export const OWN_PICTURE = "lesson";

// one line of caption: no line breaks, and no "](" that would end the caption early
export function cleanCaption(text) {
  return String(text).replace(/\s*\n\s*/g, " ").replace(/\]\(/g, "] (").trim();
}

// the lesson's Markdown, as lesson.write prints it: "# title", the picture's line, "1. [caption](?link)" per step
export function lessonMarkdown(title, steps, pictureUrl = null) {
  const own = pictureUrl ? [`![the lesson's picture](${pictureUrl})`, ""] : [];
  return [`# ${title}`, "", ...own, ...steps.map((s, i) => `${i + 1}. [${cleanCaption(s.caption)}](${s.link})`)]
    .join("\n") + "\n";
}

// {text: the lesson without its picture's line, picture: that line's data: URL or null}; throws for a second one
export function splitPicture(text) {
  let picture = null;
  const lines = String(text).split(/\r?\n/).map((line, n) => {
    const m = line.trimStart().startsWith("![") ? line.match(PICTURE_LINE) : null;
    if (!m) return line;
    if (picture !== null) throw new Error(`line ${n + 1}: a lesson carries one picture of its own; this is a second one.`);
    picture = m[1];
    return "";
  });
  return { text: lines.join("\n"), picture };
}

// the link with its image= set to `to` wherever it is `from`
export function withImage(link, from, to) {
  const q = new URLSearchParams(String(link).replace(/^\?/, ""));
  if (q.get("image") !== from) return link;
  q.set("image", to);
  return "?" + q.toString();
}

// every step's link with image `from` shown as `to` (the same steps otherwise)
export function stepsWithImage(steps, from, to) {
  return steps.map((s) => ({ ...s, link: withImage(s.link, from, to) }));
}

// the steps with step i moved by `by` places (kept within the list); the same array when it cannot move
export function moveStep(steps, i, by) {
  const j = i + by;
  if (i < 0 || i >= steps.length || j < 0 || j >= steps.length) return steps;
  const out = steps.slice();
  [out[i], out[j]] = [out[j], out[i]];
  return out;
}

// the steps without step i
export function removeStep(steps, i) {
  return steps.filter((_, k) => k !== i);
}

// the upload a lesson's steps show (image=upload-…): null when none does; throws when two different ones do
export function uploadOf(steps) {
  const names = new Set(steps.map((s) => new URLSearchParams(String(s.link).replace(/^\?/, "")).get("image"))
    .filter((v) => v && v.startsWith("upload-")));
  if (names.size > 1) throw new Error("A lesson carries one picture of its own: these steps show two uploads.");
  return names.size ? [...names][0] : null;
}

// a lesson's title and steps as lesson.py's parse reads them (the picture's line taken out first: splitPicture);
// lines that are not steps are left out here (the server names them when the lesson is opened)
export function parseLesson(text) {
  let title = "";
  const steps = [];
  for (const line of String(text).split(/\r?\n/)) {
    if (!title && line.startsWith("# ")) { title = line.slice(2).trim(); continue; }
    const m = line.match(/^\s*(?:\d+[.)]|[-*])\s*\[(.+)\]\((\?[^)\s]*)\)\s*$/);
    if (m) steps.push({ caption: m[1].trim(), link: m[2] });
  }
  return { title: title || "A vitviz lesson", steps };
}

// the lesson's Markdown with every step's image `from` shown as `to`
export function markdownWithImage(text, from, to) {
  return String(text).replace(/\]\((\?[^)\s]*)\)/g, (_, link) => `](${withImage(link, from, to)})`);
}
