// The lesson maker (vitviz/app/lessons.py's maker; lib/lessons.mjs is its Markdown): a teacher strings the views
// she opens into a lesson kept in this browser (localStorage), edits, reorders and removes its steps, opens it, and
// downloads it as a Markdown file that may carry her own picture; a lesson file opened here is opened in the page
// and put in the maker. Two server functions (gr.HTML's `server`): keep_picture (a lesson file's picture, kept and
// named as an upload), picture_of (an upload a step shows, as the data: URL the file carries) and handout_of (the
// lesson printed as a PDF, its links and QR codes starting with this page's address).
const maker = element.querySelector("#lesson-maker");
const LIMITS = JSON.parse(maker.dataset.limits);  // vitviz/tools/lesson.py's bounds
const STORE = "vitviz-lesson";
const FIRST_TITLE = "My vitviz lesson";
const mine = () => {  // {title, steps: [{caption, link}]} (an older browser kept the steps alone)
  try {
    const v = JSON.parse(localStorage.getItem(STORE) || "null");
    if (Array.isArray(v)) return { title: FIRST_TITLE, steps: v };
    if (v && Array.isArray(v.steps)) return { title: String(v.title || FIRST_TITLE), steps: v.steps };
  } catch (e) { /* a broken entry: a new lesson */ }
  return { title: FIRST_TITLE, steps: [] };
};
const say = (text) => { maker.querySelector("#lesson-said").textContent = text; };
let editing = -1;  // the step whose caption is being edited
const keep = (lesson) => { localStorage.setItem(STORE, JSON.stringify(lesson)); draw(); };
const here = () => {  // this view's link without the lesson's own parameters
  const url = new URL(window.location.href);
  for (const k of ["lesson", "step"]) url.searchParams.delete(k);
  return "?" + url.searchParams.toString();
};
const b64 = (text) => btoa(unescape(encodeURIComponent(text))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const button = (label, act, k, name) => {
  const b = document.createElement("button");
  b.type = "button"; b.textContent = label; b.dataset.act = act; b.dataset.k = k;
  b.setAttribute("aria-label", `${name} step ${k + 1}`);
  return b;
};
function draw() {
  const { title, steps } = mine();
  const box = maker.querySelector("#lesson-title");
  if (document.activeElement !== box) box.value = title;
  const list = maker.querySelector("#lesson-steps");
  list.replaceChildren(...steps.map((s, k) => {
    const li = document.createElement("li");
    if (k === editing) {
      const input = document.createElement("textarea");
      input.rows = 2; input.value = s.caption; input.className = "vx-step-edit";
      input.setAttribute("aria-label", `caption of step ${k + 1}`);
      li.append(input, button("Save", "save", k, "Save"), button("Cancel", "cancel", k, "Cancel editing"));
      requestAnimationFrame(() => input.focus());
    } else {
      const text = document.createElement("span");
      text.className = "vx-step-caption"; text.textContent = s.caption;
      const shows = new URLSearchParams(s.link.slice(1));
      const where = document.createElement("span");
      where.className = "vx-step-where";
      where.textContent = ` (${shows.get("tab") || "patches"}${shows.get("open") ? ": " + shows.get("open") : ""}` +
        `${(shows.get("image") || "").startsWith("upload-") ? ", your picture" : ""})`;
      li.append(text, where, " ", button("Edit", "edit", k, "Edit"), button("Up", "up", k, "Move up"),
        button("Down", "down", k, "Move down"), button("Remove", "remove", k, "Remove"));
      li.querySelector('[data-act="up"]').disabled = k === 0;
      li.querySelector('[data-act="down"]').disabled = k === steps.length - 1;
    }
    return li;
  }));
  for (const id of ["lesson-open", "lesson-download", "lesson-handout"]) maker.querySelector("#" + id).disabled = !steps.length;
}
const openLesson = (text) => {  // the lesson opened in this page, its steps' links under the lesson's own
  let steps;
  try { ({ steps } = parseLesson(text, LIMITS)); } catch (e) { say(e.message); return false; }  // the bar's own check
  const address = steps[0].link + "&" + new URLSearchParams({ lesson: "md:" + b64(text), step: "1" }).toString();
  if (address.length > LIMITS.link) {  // a proxy would refuse it (or the browser block it): said, not opened
    say(`This lesson is ${address.length.toLocaleString("en")} characters as a link; a lesson link holds at most ` +
        `${LIMITS.link.toLocaleString("en")}. Shorten its captions or split it into two lessons.`);
    return false;
  }
  window.vitvizLink ? window.vitvizLink.go(address) : (window.location.href = address);
  return true;
};
const fileName = (title) => (title.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "").slice(0, 60) || "vitviz-lesson") + ".md";
async function download() {
  const { title, steps } = mine();
  let picture = null, shown = steps;
  const upload = uploadOf(steps);
  if (upload) {
    say("Fetching your picture from the server…");
    const got = await server.picture_of(upload);
    if (got.error) { say(got.error); return; }
    picture = got.url;
    shown = stepsWithImage(steps, upload, OWN_PICTURE);
  }
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([lessonMarkdown(title, shown, picture)], { type: "text/markdown" }));
  a.download = fileName(title);
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  say(`Downloaded ${a.download}` + (picture ? " (your picture is inside it)." : "."));
}
async function handout() {
  const { title, steps } = mine();
  say("Printing the handout: each step's view is drawn on the server (a few seconds a step)…");
  const got = await server.handout_of({ markdown: lessonMarkdown(title, steps),
    base_url: window.location.origin + window.location.pathname });
  if (got.error) { say(got.error); return; }
  const a = document.createElement("a");
  a.href = under(`gradio_api/file=${got.path}`);
  a.download = got.name;
  a.click();
  say(`Printed ${got.name}: a page per step, each with its link and QR code.` +  // notes name their step, and
      (got.notes.length ? ` But: ${got.notes.join("; ")}` : ""));  // say what it could not have (a QR code included)
}
maker.addEventListener("click", (ev) => {
  const b = ev.target.closest("button");
  if (!b) return;
  const lesson = mine(), k = Number(b.dataset.k);
  if (b.id === "lesson-add") {
    const box = maker.querySelector("#lesson-caption");
    const caption = cleanCaption(box.value || "") || `Step ${lesson.steps.length + 1}`;
    if ([...caption].length > LIMITS.caption) { say(`A step's caption holds at most ${LIMITS.caption} characters.`); return; }
    if (lesson.steps.length >= LIMITS.steps) { say(`A lesson has at most ${LIMITS.steps} steps.`); return; }
    const steps = [...lesson.steps, { caption, link: here() }];
    try { uploadOf(steps); } catch (e) {
      say("A lesson carries one picture of its own, and another step already shows a different upload: use that " +
          "picture or an example for this step.");
      return;
    }
    keep({ ...lesson, steps });
    say(`Added: step ${steps.length}.` + (uploadOf([steps.at(-1)]) ? " It shows your picture: the downloaded " +
        "lesson will carry it." : ""));
    box.value = "";
  } else if (b.id === "lesson-open") {
    openLesson(lessonMarkdown(lesson.title, lesson.steps));
  } else if (b.id === "lesson-download") {
    download().catch((e) => say(`The lesson could not be downloaded: ${e.message || e}`));
  } else if (b.id === "lesson-handout") {
    handout().catch((e) => say(`The handout could not be printed: ${e.message || e}`));
  } else if (b.id === "lesson-clear") {
    editing = -1;
    keep({ title: FIRST_TITLE, steps: [] });
    say("A new lesson: add the views you want.");
  } else if (b.dataset.act === "edit") {
    editing = k; draw();
  } else if (b.dataset.act === "cancel") {
    editing = -1; draw();
  } else if (b.dataset.act === "save") {
    const caption = cleanCaption(b.parentElement.querySelector("textarea").value);
    if (!caption) { say("A step needs a caption."); return; }
    if ([...caption].length > LIMITS.caption) { say(`A step's caption holds at most ${LIMITS.caption} characters.`); return; }
    editing = -1;
    keep({ ...lesson, steps: lesson.steps.map((s, i) => (i === k ? { ...s, caption } : s)) });
    say(`Step ${k + 1} changed.`);
  } else if (b.dataset.act === "up" || b.dataset.act === "down") {
    const by = b.dataset.act === "up" ? -1 : 1;
    keep({ ...lesson, steps: moveStep(lesson.steps, k, by) });
    say(`Step ${k + 1} is now step ${k + 1 + by}.`);
    maker.querySelector(`[data-act="${b.dataset.act}"][data-k="${k + by}"]:not(:disabled)`)?.focus();
  } else if (b.dataset.act === "remove") {
    keep({ ...lesson, steps: removeStep(lesson.steps, k) });
    say(`Step ${k + 1} removed.`);
  }
});
maker.addEventListener("keydown", (ev) => {  // in a caption being edited: Enter saves, Escape leaves it as it was
  if (!ev.target.classList?.contains("vx-step-edit")) return;
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); ev.target.parentElement.querySelector('[data-act="save"]').click(); }
  if (ev.key === "Escape") { ev.preventDefault(); editing = -1; draw(); }
});
maker.querySelector("#lesson-title").addEventListener("change", (ev) => {
  const title = ev.target.value.replace(/\s+/g, " ").trim() || FIRST_TITLE;
  keep({ ...mine(), title });
});
// a "Compute on this device" switch is on (device.js's body class: vx-device-on, vx-classify-device-on, ...): no
// picture leaves the device then
const deviceOn = () => [...document.body.classList].some((c) => /^vx-(?:.+-)?device-on$/.test(c));
function pictureFile(dataUrl, name) {  // a lesson's picture line (a data: URL, checked by parseLesson) as a File
  const comma = dataUrl.indexOf(","), type = dataUrl.slice(5, dataUrl.indexOf(";"));
  const bytes = Uint8Array.from(atob(dataUrl.slice(comma + 1)), (c) => c.charCodeAt(0));
  return new File([bytes], `${name.replace(/\.[^.]*$/, "")}.${type.split("/")[1]}`, { type });
}
maker.querySelector("#lesson-file").addEventListener("change", async (ev) => {
  if (!ev.target.files?.length) return;
  const file = ev.target.files[0];
  ev.target.value = "";
  if (file.size > LIMITS.file_bytes) {  // not read: a lesson is text and at most one picture
    say(`${file.name} is ${(file.size / 2 ** 20).toFixed(1)} MiB; a lesson holds at most ` +
        `${Math.round(LIMITS.bytes / 1024)} KiB of text and a picture of ${LIMITS.picture_bytes / 2 ** 20} MiB. Is it the right file?`);
    return;
  }
  let { text, picture } = { text: "", picture: null };
  // the one check of a lesson (lesson.py's parse, its twin): what the lesson bar would refuse is said here, before
  // the lesson's picture is sent or the lesson opened
  try { ({ text, picture } = parseLesson(await file.text(), LIMITS)); } catch (e) { say(`${file.name}: ${e.message}`); return; }
  if (picture && deviceOn() && !window.confirm(`${file.name} carries its own picture. "Compute on this device" is ` +
      "on, so pictures stay on this device. Send the lesson's picture to the server to open the lesson?")) {
    window.vitvizDevicePicture = pictureFile(picture, file.name);  // the device panels compute it, as a dropped one
    window.dispatchEvent(new CustomEvent("vitviz-device-picture", { detail: { from: "lesson" } }));
    say(`${file.name} was not opened: its picture stayed on this device, where it is computed now. To open the ` +
        "lesson, switch \"Compute on this device\" off and open the file again (its picture is then sent to the server).");
    return;
  }
  if (picture) {
    say("Sending the lesson's picture to the server…");
    const got = await server.keep_picture(picture).catch((e) => ({ error: `The server did not take the picture (${e.message || e}).` }));
    if (got.error) { say(got.error); return; }
    text = markdownWithImage(text, OWN_PICTURE, got.image);
  }
  let title, steps;
  try { ({ title, steps } = parseLesson(text, LIMITS)); } catch (e) { say(`${file.name}: ${e.message}`); return; }
  if (openLesson(text)) {
    editing = -1;
    keep({ title, steps });  // in the maker too: to edit, reorder, download again
    say(`Opened ${file.name}: ${steps.length} step${steps.length === 1 ? "" : "s"}` +
        (picture ? ", with its own picture." : ".") + " It is in the list below to edit.");
  }
});
window.addEventListener("storage", (ev) => { if (ev.key === STORE) draw(); });  // another tab of this page changed it
draw();
