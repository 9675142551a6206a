// A lesson as the lesson maker holds it: a title, captioned links, and at most one picture of its own. The twin of
// vitviz/tools/lesson.py's Markdown (write and the picture line of parse); an ES module, joined into page.js.

// The one check of a lesson is lesson.py's parse; parseLesson below is its twin, with the same messages (tests/js
// lessons.test.mjs reads both against the same lessons). Spaces and line breaks are spelled out as lesson.py spells
// them (SPACE, LINE_BREAKS): JavaScript's \s and Python's differ.
const LESSON_SPACE = "[\\t\\x1f \\xa0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000]*";
const LESSON_BREAKS = /\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]/;
const LESSON_PICTURE_LINE = new RegExp(`^${LESSON_SPACE}!\\[[^\\]]*\\]\\(([^)]*)\\)${LESSON_SPACE}$`);
const LESSON_PICTURE = /^data:image\/(?:png|jpeg|webp|gif);base64,(.*)$/;
const LESSON_STEP_LIKE = new RegExp(`^${LESSON_SPACE}(?:[0-9]+[.)]|[-*])${LESSON_SPACE}\\[(.+)\\]\\((.*)\\)${LESSON_SPACE}$`);
const LESSON_STEP = new RegExp(`^${LESSON_SPACE}(?:[0-9]+[.)]|[-*])${LESSON_SPACE}\\[(.+)\\]\\((\\?[^)\\t\\x1f \\xa0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000]*)\\)${LESSON_SPACE}$`);
const lessonStrip = (text) => text.replace(new RegExp(`^${LESSON_SPACE}|${LESSON_SPACE}$`, "g"), "");
const lessonCount = (n) => n.toLocaleString("en");  // Python's f"{n:,}" for a whole number
const lessonChars = (text) => [...text];  // code points, as Python's len and slices count

// base64 that decodes: whole groups of four, the last padded with "=" (lesson.py's decodes)
export function base64Decodes(body) {
  return body.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(body);
}

function pictureDamaged(n) {
  return new Error(`line ${n}: the lesson's picture is damaged or cut short (its base64 text does not decode). ` +
    "Download the lesson again from the lesson maker, or add the picture anew.");
}

// the picture's base64 on line n (its url: url), else the error lesson.py's picture_line raises
function lessonPictureBody(n, url) {
  const m = url.match(LESSON_PICTURE);
  if (m) return m[1];
  const kind = url.match(/^data:([^;,]*)/);
  if (!kind) {
    throw new Error(`line ${n}: a lesson's picture travels inside its file, as a data: URL ` +
      "(![the lesson's picture](data:image/png;base64,...)); this one points elsewhere. Open the " +
      "lesson in the page's lesson maker and download it again: it writes the line.");
  }
  if (!["image/png", "image/jpeg", "image/webp", "image/gif"].includes(kind[1])) {
    const shown = lessonChars(kind[1]).slice(0, 40).join("") || "not named";
    throw new Error(`line ${n}: the lesson's picture is ${shown}; a lesson carries a PNG, JPEG, WebP or GIF picture, in ` +
      "base64 (a drawing in SVG can hold a script). Save it as PNG or JPEG and add it again.");
  }
  throw pictureDamaged(n);
}

// {text: the lesson without its picture's line (the lines keep their numbers), picture: that line's data: URL or
// null}; throws as lesson.py's parse does for a picture line (not a picture a lesson carries, a second one, too
// large, damaged). `limits`: lesson.py's limits() (the maker's data-limits).
export function splitPicture(text, limits) {
  let picture = null;
  const lines = String(text).replace(/^\ufeff/, "").split(LESSON_BREAKS).map((line, k) => {
    const m = line.match(LESSON_PICTURE_LINE), n = k + 1;
    if (!m) return line;
    const body = lessonPictureBody(n, m[1]);
    if (picture !== null) throw new Error(`line ${n}: a lesson carries one picture of its own; this is a second one.`);
    if (body.length > Math.floor(limits.picture_bytes * 4 / 3) + 4) {
      throw new Error(`line ${n}: the lesson's picture is over ${Math.floor(limits.picture_bytes / 2 ** 20)} MiB; save it ` +
        "smaller (1600 pixels a side is plenty for every view).");
    }
    if (!base64Decodes(body)) throw pictureDamaged(n);
    picture = m[1];
    return "";
  });
  return { text: lines.join("\n"), picture };
}

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

// {title, steps, text, picture}: the lesson lesson.py's parse reads (text: without its picture's line; picture: that
// line's data: URL or null); throws lesson.py's message, naming the line and what to do, for what it refuses
export function parseLesson(source, limits) {
  const { text, picture } = splitPicture(source, limits);
  const size = new TextEncoder().encode(text).length;
  if (size > limits.bytes) {
    throw new Error(`This lesson is ${lessonCount(Math.ceil(size / 1024))} KiB; a lesson holds at most ` +
      `${Math.floor(limits.bytes / 1024)} KiB (${limits.steps} steps of a few sentences each). Split it into shorter lessons.`);
  }
  let title = "";
  const steps = [];
  text.split("\n").forEach((line, k) => {
    const n = k + 1;
    if (!lessonStrip(line)) return;
    if (line.startsWith("# ") && !title) { title = lessonStrip(line.slice(2)); return; }
    const m = line.match(LESSON_STEP);
    if (!m) {
      const like = line.match(LESSON_STEP_LIKE);
      if (like && like[2].startsWith("?")) {
        throw new Error(`line ${n}: a step's link holds a space or a ')'; write a space as + and a ')' as ` +
          "%29 (as the page's own links do).");
      }
      if (like) {
        throw new Error(`line ${n}: a step's link is a vitviz link's query, starting with '?' (as ` +
          `'?tab=attention&layer=6', spaces written as +); this one starts with '${lessonChars(like[2]).slice(0, 24).join("")}'.`);
      }
      throw new Error(`line ${n} is not a step: write '1. [caption](?tab=...)' (a caption in brackets, then ` +
        "a vitviz link's query in parentheses).");
    }
    const caption = lessonStrip(m[1]);
    if (lessonChars(caption).length > limits.caption) {
      throw new Error(`line ${n}: the caption is ${lessonCount(lessonChars(caption).length)} characters; a step's caption holds at most ` +
        `${limits.caption} (a few sentences).`);
    }
    steps.push({ caption, link: m[2] });
    if (steps.length > limits.steps) throw new Error(`line ${n}: a lesson has at most ${limits.steps} steps. Split it into shorter lessons.`);
  });
  if (!steps.length) throw new Error("A lesson needs at least one step: '1. [caption](?tab=...)'.");
  return { title: title || "A vitviz lesson", steps, text, picture };
}

// the lesson's Markdown with every step's image `from` shown as `to`
export function markdownWithImage(text, from, to) {
  return String(text).replace(/\]\((\?[^)\s]*)\)/g, (_, link) => `](${withImage(link, from, to)})`);
}
