// The lesson maker on /next (vitviz/app/next_extras.py maker): a collapsed section at the page's bottom where a
// teacher strings the views she opens into a lesson. "Add this view as a step" takes the page's link from the
// store (the picture shown, the tab, its settings, the open section); the steps are edited, reordered and removed
// in a list kept in this browser (localStorage, the same entry as the page at / uses); the lesson is downloaded as
// Markdown (carrying her own picture when a step shows an upload), opened in the page (the store's openLink with
// lesson=md:<base64url>, as vitviz/app/lessons.py encode writes it), or printed as a PDF handout.
//
// The Markdown is lib/lessons.mjs's (the twin of vitviz/tools/lesson.py). Three server functions (gr.HTML's
// `server`, vitviz/app/lessons.py): keep_picture (a lesson file's picture, kept and named as an upload),
// picture_of (an upload as the data: URL a lesson file carries), handout_of (the PDF).

import { linkOf } from "./store.mjs";
import { OWN_PICTURE, cleanCaption, lessonMarkdown, markdownWithImage, moveStep, parseLesson, removeStep,
  stepsWithImage, uploadOf } from "../lib/lessons.mjs";
import { under } from "../lib/server.mjs";

const KEPT = "vitviz-lesson";  // the localStorage entry (the page at / keeps its maker's lesson there too)
const FIRST_TITLE = "My vitviz lesson";
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

// the page's store: main.mjs imported under this module's own ?v= (the URL the panels import, so one module and
// one store; a bare "./main.mjs" would be a second copy whose store never comes)
async function pageStore() {
  const main = await import(new URL("./main.mjs" + new URL(import.meta.url).search, import.meta.url).href);
  return main.whenStore();
}

// the lesson this browser keeps: {title, steps: [{caption, link}]} (an older entry kept the steps alone)
export function readKept(text) {
  try {
    const v = JSON.parse(text || "null");
    if (Array.isArray(v)) return { title: FIRST_TITLE, steps: v };
    if (v && Array.isArray(v.steps)) {
      return { title: String(v.title || FIRST_TITLE), steps: v.steps.filter((s) => s && typeof s.link === "string")
        .map((s) => ({ caption: String(s.caption || ""), link: s.link })) };
    }
  } catch (err) { /* a damaged entry: a new lesson */ }
  return { title: FIRST_TITLE, steps: [] };
}

// the view on screen as a step's link: the page's link without the lesson being followed
export function stepLinkOf(state, spec) {
  return linkOf({ ...state, lesson: null, step: null }, spec) || `?tab=${state.tab}`;
}

// base64url of UTF-8 text, unpadded (lessons.py encode)
export function base64Url(text) {
  const bytes = new TextEncoder().encode(text);
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// the address that starts a lesson's Markdown in the page: its first step's link with lesson=md:… and step=1
export function lessonAddress(text, steps) {
  const q = new URLSearchParams(steps[0].link.replace(/^\?/, ""));
  q.set("lesson", "md:" + base64Url(text));
  q.set("step", "1");
  return "?" + q.toString();
}

// a lesson's file name from its title
export function fileName(title) {
  return (String(title).toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "").slice(0, 60) || "vitviz-lesson") + ".md";
}

// where a step is, in words: its tab, its open section, and whether it shows the teacher's own picture
export function whereOf(link) {
  const q = new URLSearchParams(String(link).replace(/^\?/, ""));
  const open = q.get("open") ? `: ${q.get("open")}` : "";
  const own = (q.get("image") || "").startsWith("upload-") ? ", your picture" : "";
  return `${q.get("tab") || "patches"}${open}${own}`;
}

function template(limits) {
  return `
  <h2 class="vx-maker-head"><button type="button" id="vx-maker-toggle" aria-expanded="false"
    aria-controls="vx-maker-body">Make a lesson from these views (for teachers)</button></h2>
  <div class="vx-maker-body" id="vx-maker-body" hidden>
    <p>Open a view with the settings and picture you want, write what the class should see, and add it as a step;
    repeat for each step. The list keeps your lesson in this browser until you download it (a small Markdown file
    you can edit, carrying your own picture when a step shows one) or open it here.</p>
    <p class="vx-maker-row"><label for="vx-maker-title">Title of the lesson</label>
      <input type="text" id="vx-maker-title" maxlength="120"></p>
    <p class="vx-maker-row"><label for="vx-maker-caption">Caption of this step</label>
      <textarea id="vx-maker-caption" rows="2"></textarea></p>
    <p class="vx-maker-buttons">
      <button type="button" data-do="add">Add this view as a step</button>
      <button type="button" data-do="open">Start the lesson here</button>
      <button type="button" data-do="download">Download the lesson (.md)</button>
      <button type="button" data-do="handout">Print a handout (PDF)</button>
      <button type="button" data-do="clear">Start a new lesson</button></p>
    <p class="vx-maker-row"><label for="vx-maker-file">Open a lesson file</label>
      <input type="file" id="vx-maker-file" accept=".md,.txt,text/markdown"></p>
    <p class="vx-maker-said" role="status" aria-live="polite"></p>
    <ol class="vx-maker-steps" aria-label="the steps of the lesson"></ol>
  </div>`;
}

export async function mountMaker({ element, props, server }) {
  const store = await pageStore();
  const spec = store.spec;
  const limits = props.limits || {};
  if (!document.querySelector("link[data-vx-maker]")) {
    const css = document.createElement("link");
    css.rel = "stylesheet";
    css.href = under(`vitviz/web/app/maker.css?v=${props.version}`);
    css.dataset.vxMaker = "1";
    document.head.appendChild(css);
  }
  const root = element.querySelector(".vx-maker") || element;
  root.innerHTML = template(limits);
  const $ = (sel) => root.querySelector(sel);
  const toggle = $("#vx-maker-toggle"), body = $("#vx-maker-body"), list = $(".vx-maker-steps");
  const titleBox = $("#vx-maker-title"), captionBox = $("#vx-maker-caption"), said = $(".vx-maker-said");
  let editing = -1;  // the step whose caption is being edited

  const say = (text) => { said.textContent = text; };
  const mine = () => readKept(localStorage.getItem(KEPT));
  const keep = (lesson) => { localStorage.setItem(KEPT, JSON.stringify(lesson)); draw(); };

  const stepButton = (label, act, k, name) =>
    `<button type="button" data-act="${act}" data-k="${k}" aria-label="${esc(name)} step ${k + 1}">${label}</button>`;
  function draw() {
    const { title, steps } = mine();
    if (document.activeElement !== titleBox) titleBox.value = title;
    list.innerHTML = steps.map((s, k) => (k === editing
      ? `<li data-k="${k}"><textarea class="vx-step-edit" rows="2" aria-label="caption of step ${k + 1}">${esc(s.caption)}</textarea>
          ${stepButton("Save", "save", k, "Save")} ${stepButton("Cancel", "cancel", k, "Cancel editing")}</li>`
      : `<li data-k="${k}"><span class="vx-step-caption">${esc(s.caption)}</span>
          <span class="vx-step-where">(${esc(whereOf(s.link))})</span>
          <span class="vx-step-acts">${stepButton("Edit", "edit", k, "Edit")}
          <button type="button" data-act="up" data-k="${k}" aria-label="Move up step ${k + 1}"${k === 0 ? " disabled" : ""}>Up</button>
          <button type="button" data-act="down" data-k="${k}" aria-label="Move down step ${k + 1}"${k === steps.length - 1 ? " disabled" : ""}>Down</button>
          ${stepButton("Remove", "remove", k, "Remove")}</span></li>`)).join("");
    if (editing >= 0) requestAnimationFrame(() => list.querySelector(".vx-step-edit")?.focus());
    for (const act of ["open", "download", "handout"]) root.querySelector(`[data-do=${act}]`).disabled = !steps.length;
  }

  // a lesson's Markdown started in this page (no reload): the store reads its first step's link, the lesson bar
  // shows it; the browser's Back returns to the view before it
  const start = (text) => {
    let steps;
    try { ({ steps } = parseLesson(text, limits)); } catch (err) { say(err.message); return false; }
    const address = lessonAddress(text, steps);
    if (address.length > limits.link) {
      say(`This lesson is ${address.length.toLocaleString("en")} characters as a link; a lesson link holds at most ` +
        `${limits.link.toLocaleString("en")}. Shorten its captions or make two lessons of it.`);
      return false;
    }
    history.pushState(history.state, "", window.location.href);  // the entry Back returns to
    store.openLink(address);
    window.scrollTo({ top: 0, behavior: "instant" });
    requestAnimationFrame(() => document.querySelector("#vx-page nav.vx-lesson:not([hidden])")?.focus());
    return true;
  };

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
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    say(`Downloaded ${a.download}` + (picture ? ", with your picture inside it." : "."));
  }

  async function handout() {
    const { title, steps } = mine();
    say("Printing the handout: the server draws each step's view (a few seconds a step)…");
    const got = await server.handout_of({ markdown: lessonMarkdown(title, steps),
      base_url: window.location.origin + window.location.pathname });
    if (got.error) { say(got.error); return; }
    const a = document.createElement("a");
    a.href = under(`gradio_api/file=${got.path}`);
    a.download = got.name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    say(`Printed ${got.name}: a page per step, each with its link and QR code.` +
      (got.notes.length ? ` But: ${got.notes.join("; ")}` : ""));
  }

  function add() {
    const lesson = mine();
    const caption = cleanCaption(captionBox.value || "") || `Step ${lesson.steps.length + 1}`;
    if ([...caption].length > limits.caption) { say(`A step's caption holds at most ${limits.caption} characters.`); return; }
    if (lesson.steps.length >= limits.steps) { say(`A lesson has at most ${limits.steps} steps.`); return; }
    const steps = [...lesson.steps, { caption, link: stepLinkOf(store.get(), spec) }];
    try { uploadOf(steps); } catch (err) {
      say("A lesson carries one picture of its own, and another step already shows a different upload: use that " +
        "picture or an example for this step.");
      return;
    }
    keep({ ...lesson, steps });
    captionBox.value = "";
    say(`Added step ${steps.length} (${whereOf(steps.at(-1).link)}).` + (uploadOf([steps.at(-1)])
      ? " It shows your picture: the downloaded lesson will carry it." : ""));
  }

  toggle.addEventListener("click", () => {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", String(open));
    body.hidden = !open;
  });
  root.addEventListener("click", (ev) => {
    const b = ev.target.closest("button");
    if (!b || b === toggle) return;
    const lesson = mine(), k = Number(b.dataset.k), act = b.dataset.do || b.dataset.act;
    if (act === "add") add();
    else if (act === "open") start(lessonMarkdown(lesson.title, lesson.steps));
    else if (act === "download") download().catch((err) => say(`The lesson could not be downloaded: ${err.message || err}`));
    else if (act === "handout") handout().catch((err) => say(`The handout could not be printed: ${err.message || err}`));
    else if (act === "clear") { editing = -1; keep({ title: FIRST_TITLE, steps: [] }); say("A new lesson: add the views you want."); }
    else if (act === "edit") { editing = k; draw(); }
    else if (act === "cancel") { editing = -1; draw(); list.querySelector(`[data-act=edit][data-k="${k}"]`)?.focus(); }
    else if (act === "save") {
      const caption = cleanCaption(b.parentElement.querySelector("textarea").value);
      if (!caption) { say("A step needs a caption."); return; }
      if ([...caption].length > limits.caption) { say(`A step's caption holds at most ${limits.caption} characters.`); return; }
      editing = -1;
      keep({ ...lesson, steps: lesson.steps.map((s, i) => (i === k ? { ...s, caption } : s)) });
      say(`Step ${k + 1} changed.`);
      list.querySelector(`[data-act=edit][data-k="${k}"]`)?.focus();
    } else if (act === "up" || act === "down") {
      const by = act === "up" ? -1 : 1;
      keep({ ...lesson, steps: moveStep(lesson.steps, k, by) });
      say(`Step ${k + 1} is now step ${k + 1 + by}.`);
      (list.querySelector(`[data-act=${act}][data-k="${k + by}"]:not(:disabled)`)
        || list.querySelector(`[data-act=edit][data-k="${k + by}"]`))?.focus();
    } else if (act === "remove") {
      keep({ ...lesson, steps: removeStep(lesson.steps, k) });
      say(`Step ${k + 1} removed.`);
      (list.querySelector(`[data-act=remove][data-k="${Math.min(k, lesson.steps.length - 2)}"]`) || captionBox).focus();
    }
  });
  root.addEventListener("keydown", (ev) => {  // in a caption being edited: Enter saves, Escape leaves it as it was
    if (!ev.target.classList?.contains("vx-step-edit")) return;
    if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); ev.target.parentElement.querySelector("[data-act=save]").click(); }
    if (ev.key === "Escape") { ev.preventDefault(); editing = -1; draw(); }
  });
  titleBox.addEventListener("change", () => {
    keep({ ...mine(), title: titleBox.value.replace(/\s+/g, " ").trim() || FIRST_TITLE });
  });
  $("#vx-maker-file").addEventListener("change", async (ev) => {
    const file = ev.target.files && ev.target.files[0];
    if (!file) return;
    ev.target.value = "";
    if (file.size > limits.file_bytes) {
      say(`${file.name} is ${(file.size / 2 ** 20).toFixed(1)} MiB; a lesson holds at most ` +
        `${Math.round(limits.bytes / 1024)} KiB of text and a picture of ${limits.picture_bytes / 2 ** 20} MiB. Is it the right file?`);
      return;
    }
    let text, picture;
    try { ({ text, picture } = parseLesson(await file.text(), limits)); } catch (err) { say(`${file.name}: ${err.message}`); return; }
    if (picture && store.get().device && !window.confirm(`${file.name} carries its own picture, and "Compute on ` +
        "this device\" is on, so pictures stay on this device. Send the lesson's picture to the server to open the lesson?")) {
      say(`${file.name} was not opened: its picture stayed on this device. Switch "Compute on this device" off and ` +
        "open the file again to open the lesson.");
      return;
    }
    if (picture) {
      say("Sending the lesson's picture to the server…");
      const got = await server.keep_picture(picture).catch((err) => ({ error: `The server did not take the picture (${err.message || err}).` }));
      if (got.error) { say(got.error); return; }
      text = markdownWithImage(text, OWN_PICTURE, got.image);
    }
    let title, steps;
    try { ({ title, steps } = parseLesson(text, limits)); } catch (err) { say(`${file.name}: ${err.message}`); return; }
    if (start(text)) {
      editing = -1;
      keep({ title, steps });
      say(`Opened ${file.name}: ${steps.length} step${steps.length === 1 ? "" : "s"}` +
        (picture ? ", with its own picture." : ".") + " It is in the list to edit.");
    }
  });
  window.addEventListener("storage", (ev) => { if (ev.key === KEPT) draw(); });  // another tab changed it
  draw();
}
