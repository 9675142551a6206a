// The page's entry module: the page bar (title, tabs, modes, lesson bar, notices) and every view's panel, all drawn
// from the one store (store.mjs). gradio mounts each gr.HTML with one line that imports this module (the same URL
// for all: one copy of the module, one store) and calls mountPage or mountPanel.
//
// A panel asks the server by putting its question in its own value and firing `submit` (one queued event per
// view, vitviz/app/panels.py respond); the answer comes back as its value (`watch("value")`). Nothing is kept
// outside the store but what a panel drew last.

import { createStore, settingText, viewSettings } from "./store.mjs";
import { lessonBar, stepLink } from "./lessons.mjs";
import { under } from "../lib/server.mjs";
import { OWN_PICTURE } from "../lib/lessons.mjs";
import { HELD_IN_BROWSER, PREVIEW, drawInBrowser } from "./views.mjs";

import { provideStore, whenStore } from "./shared.mjs";

export { whenStore };  // the page's store, once the page bar has made it (tests, views): one copy, in shared.mjs

const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

// the little Markdown the views' texts use: paragraphs, "- " lists, **bold**, *italic*, `code`; everything escaped
export function markdown(text) {
  const inline = (s) => esc(s).replace(/\*\*(.+?)\*\*/g, "<strong>$1</strong>").replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/(^|[\s(])\*([^*\s][^*]*?)\*(?=[\s).,;:!?]|$)/g, "$1<em>$2</em>");
  const out = [];
  for (const block of String(text || "").split(/\n{2,}/)) {
    const lines = block.split("\n").filter((l) => l.trim() !== "");
    if (!lines.length) continue;
    if (lines.every((l) => /^\s*[-*] /.test(l))) {
      out.push("<ul>" + lines.map((l) => `<li>${inline(l.replace(/^\s*[-*] /, ""))}</li>`).join("") + "</ul>");
    } else if (/^#{1,4} /.test(lines[0])) {
      out.push(`<p class="vx-md-head"><strong>${inline(lines[0].replace(/^#+ /, ""))}</strong></p>`);
      if (lines.length > 1) out.push(`<p>${lines.slice(1).map(inline).join("<br>")}</p>`);
    } else {
      out.push(`<p>${lines.map(inline).join("<br>")}</p>`);
    }
  }
  return out.join("");
}

function writeAddress(address) {
  const url = new URL(window.location.href);
  url.search = address;
  if (url.href !== window.location.href) history.replaceState(history.state, "", url.href);
}

// ---- the page bar ---------------------------------------------------------------------------------------------

export function mountPage({ element, props }) {
  const spec = props.spec;
  if (!document.querySelector("link[data-vx-page]")) {  // the page's styles, from the package as its modules are
    const css = document.createElement("link");
    css.rel = "stylesheet";
    css.href = under(`vitviz/web/app/page.css?v=${spec.version}`);
    css.dataset.vxPage = "1";
    document.head.appendChild(css);
    const away = document.createElement("style");  // each tab's panels shown while it is the store's tab
    away.textContent = spec.tabs.map((t) => spec.tabs.filter((o) => o.id !== t.id).flatMap((o) => o.views)
      .map((v) => `body[data-vx-tab="${t.id}"] #panel-${v}`).join(",") + " { display: none !important; }").join("\n");
    document.head.appendChild(away);
  }
  const store = createStore(spec, window.location.search, writeAddress);
  const root = element.querySelector(".vx-page") || element;
  const tour = stepLink(spec, "tour", 1, store.get());
  root.innerHTML = `
    <div class="vx-head">
      <div class="vx-title">
        <h1>vitviz: how a Vision Transformer sees an image</h1>
        <p><span class="vx-intro-more">From pixels to patch tokens, position embeddings, attention and a prediction.
        Pick a tab, then an example or your own picture: it stays the page's picture in every tab. The address bar
        always holds a link to what you see.</span> New here? <a class="vx-tour" href="${esc(tour)}">Start the guided tour</a>: ten steps through one
        picture's forward pass.</p>
      </div>
      <div class="vx-modes">
        <label><input type="checkbox" data-mode="projector"> Projector mode (large text)</label>
        <label><input type="checkbox" data-mode="contrast"> High contrast</label>
      </div>
    </div>
    <p class="vx-link-notice" role="status" hidden></p>
    <nav class="vx-lesson" aria-label="lesson" hidden tabindex="-1"></nav>
    <div class="vx-tabs" role="tablist" aria-label="the page's tabs">
      ${spec.tabs.map((t) => `<button type="button" role="tab" id="vx-tab-${t.id}" data-tab="${t.id}" aria-controls="vx-panels">${esc(t.title)}</button>`).join("")}
    </div>`;
  const notice = root.querySelector(".vx-link-notice");
  const bar = root.querySelector(".vx-lesson");
  const tabButtons = [...root.querySelectorAll("[role=tab]")];

  const open = (link, focus) => {  // a link of this page, opened within it (no reload)
    history.pushState(history.state, "", window.location.href);  // a new entry, which the link then fills:
    store.openLink(link, { keepPicture: true });  // the browser's Back returns to the page as it was
    if (focus) requestAnimationFrame(() => focus());
  };
  root.querySelector(".vx-tour").addEventListener("click", (e) => {
    e.preventDefault();
    open(stepLink(spec, "tour", 1, store.get()), () => bar.focus({ preventScroll: true }));
  });
  for (const box of root.querySelectorAll("[data-mode]")) {
    box.addEventListener("change", () => store.set({ [box.dataset.mode]: box.checked }));
  }
  for (const b of tabButtons) {
    b.addEventListener("click", () => store.set({ tab: b.dataset.tab, open: null, show: null }));
    b.addEventListener("keydown", (e) => {
      const i = tabButtons.indexOf(b), n = tabButtons.length;
      const to = e.key === "ArrowRight" ? (i + 1) % n : e.key === "ArrowLeft" ? (i + n - 1) % n : null;
      if (to === null) return;
      e.preventDefault();
      tabButtons[to].focus();
      tabButtons[to].click();
    });
  }
  bar.addEventListener("click", (e) => {
    const go = e.target.closest("[data-go]");
    if (!go) return;
    e.preventDefault();
    if (go.dataset.go === "leave") {
      store.set({ lesson: null, step: null });
      return;
    }
    open(go.dataset.link, () => {  // the step's content takes the focus (its tab's main panel, or the section)
      const s = store.get();
      const view = s.open || mainOf(spec, s.tab);
      const target = document.querySelector(`[data-view="${view}"] .vx-panel-title`)
        || document.querySelector(`[data-section="${s.open}"] button`);
      (target || bar).focus({ preventScroll: true });  // (focus alone would scroll it to the middle)
      const panel = document.getElementById(`panel-${view}`) || document.querySelector(`[data-section="${s.open}"]`);
      if (panel) panel.scrollIntoView({ block: "start" });  // under the lesson bar (page.css's scroll-padding-top)
    });
  });
  window.addEventListener("popstate", () => store.openLink(window.location.search, { keepPicture: true }));

  const draw = (s) => {
    document.body.dataset.vxTab = s.tab;
    document.body.classList.toggle("vx-projector", !!s.projector);
    document.body.classList.toggle("vx-contrast", !!s.contrast);
    for (const box of root.querySelectorAll("[data-mode]")) box.checked = !!s[box.dataset.mode];
    for (const b of tabButtons) {
      const on = b.dataset.tab === s.tab;
      b.setAttribute("aria-selected", on ? "true" : "false");
      b.tabIndex = on ? 0 : -1;
    }
    const said = store.notices();
    notice.hidden = !said.length;
    notice.textContent = said.join(" ");
    const html = lessonBar(spec, s);
    bar.hidden = !html;
    bar.innerHTML = html;
    document.body.classList.toggle("vx-in-lesson", !!html);
  };
  store.subscribe(draw);
  draw(store.get());
  provideStore(store);
}

function mainOf(spec, tab) {
  return ((spec.tabs.find((t) => t.id === tab) || {}).views || [])[0];
}

// whether the device computes `spec`'s view now: its tab's "compute on this device" is on (app/device.mjs)
export function onDevice(page, s, spec) {
  return !!s.device && (page.device || []).includes(spec.tab) && spec.main;
}

// ---- a view's panel ---------------------------------------------------------------------------------------------

// a number's text as its control shows it: a special value by its word ("mean" for the head mean)
export function numberWord(f, v) {
  const hit = Object.entries(f.words || {}).find(([, x]) => Number(x) === Number(v));
  return hit ? hit[0] : String(v);
}

function control(f, text, id) {
  const label = `<label for="${id}">${esc(f.label)}</label>`;
  const info = f.info ? `<small class="vx-info">${esc(f.info)}</small>` : "";
  if (f.kind === "int" || f.kind === "float") {
    const word = text in (f.words || {});
    const v = word ? f.words[text] : Number(text);
    const lo = Math.min(f.lo, ...Object.values(f.words || {}).map(Number).filter(Number.isFinite));
    return `<div class="vx-field vx-number">${label}<output for="${id}">${esc(numberWord(f, v))}</output>
      <input type="range" id="${id}" data-key="${f.link || ""}" data-name="${f.name}" min="${lo}" max="${f.hi}"
        step="${f.step}" value="${esc(v)}" aria-valuetext="${esc(numberWord(f, v))}">${info}</div>`;
  }
  if (f.kind === "choice") {
    const opts = (f.choices || []).map(([l, v]) => `<option value="${esc(v)}"${v === text ? " selected" : ""}>${esc(l)}</option>`).join("");
    return `<div class="vx-field">${label}<select id="${id}" data-key="${f.link || ""}" data-name="${f.name}">${opts}</select>${info}</div>`;
  }
  if (f.kind === "bool") {
    return `<div class="vx-field vx-bool"><input type="checkbox" id="${id}" data-key="${f.link || ""}" data-name="${f.name}"${text === "1" ? " checked" : ""}>${label}${info}</div>`;
  }
  return `<div class="vx-field">${label}<input type="text" id="${id}" data-key="${f.link || ""}" data-name="${f.name}" value="${esc(text)}" spellcheck="false">${info}</div>`;
}

function pictureControl(spec, picture, id) {
  const known = spec.examples.includes(picture);
  const opts = spec.examples.map((n) => `<option value="${n}"${n === picture ? " selected" : ""}>${n.replace(/_/g, " ")}</option>`).join("");
  const own = known ? "" : `<option value="${esc(picture)}" selected>your picture</option>`;
  return `<div class="vx-field vx-picture"><label for="${id}">The page's picture (every tab shows it)</label>
    <select id="${id}" data-picture="1">${own}${opts}</select>
    <label class="vx-upload">Upload your own picture <input type="file" accept="image/*" data-upload="1"></label></div>`;
}

export async function mountPanel({ element, props, trigger, watch, upload }) {
  const store = await whenStore();
  const spec = props.spec, page = store.spec;
  const root = element.querySelector(".vx-panel") || element;
  const id = (name) => `vx-${spec.view}-${name}`;
  const fields = spec.fields;
  let n = 0, asked = null, shownKey = null, previewKey = null, pending = null, lastAnswer = null;

  root.innerHTML = `
    ${spec.main
      ? `<h2 class="vx-panel-title" tabindex="-1">${esc(spec.title)}</h2>`
      : `<h3 class="vx-section-head"><button type="button" class="vx-panel-title" aria-expanded="false" aria-controls="${id("body")}">${esc(spec.title)}</button></h3>`}
    <div class="vx-body" id="${id("body")}">
      <div class="vx-controls"></div>
      <div class="vx-out">
        <p class="vx-state" role="status" aria-live="polite"></p>
        <div class="vx-notice" hidden></div>
        <div class="vx-figures"></div>
        <div class="vx-texts"></div>
      </div>
    </div>`;
  const controls = root.querySelector(".vx-controls");
  const body = root.querySelector(".vx-body");
  const status = root.querySelector(".vx-state");
  const noticeBox = root.querySelector(".vx-notice");
  const figs = root.querySelector(".vx-figures");
  const texts = root.querySelector(".vx-texts");

  const isOpen = (s) => spec.main || s.open === spec.view;
  const shown = (s) => s.tab === spec.tab;
  // the page's picture as a view takes it: a lesson's own picture (image=lesson) is not in hand until its lesson
  // is open, so the page's usual picture meanwhile (the lesson bar says so)
  const pictureOf = (s) => (s.picture === OWN_PICTURE ? page.picture : s.picture);
  // what the view's answer depends on: its picture and its settings, less those its browser drawing holds
  const held = new Set(HELD_IN_BROWSER[spec.view] || []);
  const key = (s) => JSON.stringify([spec.picture ? pictureOf(s) : null, Object.fromEntries(
    Object.entries(viewSettings(s, page, fields)).filter(([name]) => !held.has(name)))]);
  const sectionOf = {};  // figure name -> the section of the panel it belongs to (Record.sections)
  for (const [name, figures] of Object.entries(spec.sections || {})) for (const f of figures) sectionOf[f] = name;

  const drawControls = (s) => {
    const parts = [];
    if (spec.picture && spec.main) parts.push(pictureControl(page, pictureOf(s), id("picture")));
    for (const f of fields) parts.push(control(f, f.link ? settingText(s, page, f.link) : f.default, id(f.name)));
    const run = spec.long || spec.view === "predict";
    if (run) parts.push(`<button type="button" class="vx-run" data-run="1">${spec.view === "predict" ? "Test my choice" : "Run"}</button>`);
    if (spec.bundle) parts.push(`<button type="button" class="vx-download" data-download="1">Download this view</button>`);
    controls.innerHTML = parts.join("");
  };

  // One question in flight at a time: a question asked meanwhile waits and goes when the answer comes (only the
  // latest of them, and a download after it), each with the store as it is then. (gradio's own "always_last"
  // would send the panel's value as it is when the event finally goes: by then an answer, not the question.)
  let inflight = null, wantAnswer = null, wantBundle = false;  // wantAnswer: the waiting question's extra
  const send = (extra) => {
    const s = store.get();
    n += 1;
    const question = { n, picture: spec.picture ? pictureOf(s) : null, settings: viewSettings(s, page, fields), ...extra };
    if (!extra.bundle) { asked = key(s); pending = n; }
    inflight = { n, at: performance.now(), key: key(s), upload: !!extra.picture, bundle: !!extra.bundle };
    props.value = { ask: question };
    trigger("submit");
    root.setAttribute("aria-busy", "true");
    status.textContent = extra.bundle ? "Making the download…" : "Working…";
    root.dispatchEvent(new CustomEvent("vx-asked", { bubbles: true, detail: { view: spec.view, n, at: performance.now() } }));
  };
  const syncControls = (s) => {
    for (const input of controls.querySelectorAll("[data-name]")) {
      const f = fields.find((x) => x.name === input.dataset.name);
      if (!f) continue;
      const text = f.link ? settingText(s, page, f.link) : f.default;
      if (input.type === "checkbox") input.checked = text === "1";
      else if (input.type === "range") {
        const v = text in (f.words || {}) ? f.words[text] : Number(text);
        if (Number(input.value) !== Number(v)) input.value = v;
        input.setAttribute("aria-valuetext", numberWord(f, v));
        const out = input.parentElement.querySelector("output");
        if (out) out.textContent = numberWord(f, v);
      } else if (input.value !== text) input.value = text;
    }
    const pick = controls.querySelector("[data-picture]");
    const picture = pictureOf(s);
    if (pick && pick.value !== picture) {
      if (![...pick.options].some((o) => o.value === picture)) {
        const own = document.createElement("option");
        own.value = picture;
        own.textContent = "your picture";
        pick.prepend(own);
      }
      pick.value = picture;
    }
  };

  const ask = (extra = {}) => {
    const stuck = inflight && performance.now() - inflight.at > (spec.long ? 900e3 : 180e3);
    if (inflight && !stuck) {
      if (extra.bundle) wantBundle = true;
      else if (!(wantAnswer && wantAnswer.picture)) wantAnswer = extra;  // an upload waiting is not dropped
      return;
    }
    send(extra);
  };
  const next = () => {  // an answer came: the question that waited, if any
    inflight = null;
    if (wantAnswer) {
      const extra = wantAnswer;
      wantAnswer = null;
      if (extra.picture || extra.preview || key(store.get()) !== shownKey) { send(extra); return; }
    }
    if (wantBundle) { wantBundle = false; send({ bundle: true }); return; }
    update(store.get());  // anything the store changed meanwhile (a preview of another picture, say)
  };

  const drawAnswer = (got) => {
    const a = got.answer;
    root.removeAttribute("aria-busy");
    if (a.preview) {  // the browser drawing's data before the view answers (predict's picker): no answer yet
      if (status.textContent === "Working…") status.textContent = "";
      drawInBrowser({ root, figs, answer: a, store, spec, page });
      return;
    }
    lastAnswer = a;
    status.textContent = a.model ? `Shown with ${a.model}.` : "";
    const notes = [a.notice].filter(Boolean);
    noticeBox.hidden = !notes.length;
    noticeBox.innerHTML = notes.map(markdown).join("");
    const figure = ([name, url]) =>
      `<figure data-figure="${esc(name)}"><img src="${esc(under(url))}" alt="${esc((a.alt || {})[name] || name)}" loading="lazy"></figure>`;
    const all = Object.entries(a.figures || {});
    const parts = Object.keys(spec.sections || {}).map((sec) => {  // a part of the panel a link can open (open=)
      const mine = all.filter(([name]) => sectionOf[name] === sec);
      if (!mine.length) return "";
      const opened = store.get().open === sec;
      return `<div class="vx-part" data-section="${esc(sec)}"><h3 class="vx-section-head"><button type="button"
        aria-expanded="${opened}" aria-controls="${id("part-" + sec)}">${esc(sec.replace(/_/g, " "))}</button></h3>
        <div class="vx-figures" id="${id("part-" + sec)}"${opened ? "" : " hidden"}>${mine.map(figure).join("")}</div></div>`;
    }).join("");
    figs.innerHTML = all.filter(([name]) => !sectionOf[name]).map(figure).join("") + parts;
    texts.innerHTML = Object.values(a.texts || {}).filter(Boolean).map((t) => `<div class="vx-text">${markdown(t)}</div>`).join("");
    const s = store.get();
    const current = shownKey === key(s);  // (an answer to an older question: its controls are not redrawn)
    for (const f of current ? fields : []) {  // a control shows the value used when the view could not use the one asked
      const used = (a.settings || {})[f.name];
      const input = controls.querySelector(`[data-name="${f.name}"]`);
      if (used === undefined || !input || input.type !== "range" || !f.link) continue;
      const out = input.parentElement.querySelector("output");
      const text = settingText(s, page, f.link);
      const want = text in (f.words || {}) ? Number(f.words[text]) : Number(text);
      const usedNumber = typeof used === "number" ? used : Number((f.words || {})[used] ?? used);
      if (!Number.isFinite(usedNumber)) continue;
      input.value = usedNumber;
      if (out) out.textContent = usedNumber !== want ? `${numberWord(f, usedNumber)} (used; asked ${numberWord(f, want)})` : numberWord(f, usedNumber);
    }
    try {
      drawInBrowser({ root, figs, answer: a, store, spec, page });
    } catch (err) {
      console.error("vitviz: the view drawn in the browser failed", err);
    }
    root.dispatchEvent(new CustomEvent("vx-answered", { bubbles: true, detail: { view: spec.view, n: got.n, at: performance.now() } }));
  };

  watch("value", () => {
    const got = props.value;
    if (!got || got.ask || got.n === undefined) return;
    if (!inflight || got.n !== inflight.n) return;  // not the answer to the question in flight
    let answered = inflight.key;
    const { upload, bundle } = inflight;
    queueMicrotask(next);
    if (bundle && got.error) {  // a download refused: said where it was asked
      root.removeAttribute("aria-busy");
      status.textContent = lastAnswer && lastAnswer.model ? `Shown with ${lastAnswer.model}.` : "";
      noticeBox.hidden = false;
      noticeBox.innerHTML = `<p class="vx-error" role="alert">${esc(got.error)}</p>`;
      return;
    }
    if (got.bundle) {
      status.textContent = lastAnswer && lastAnswer.model ? `Shown with ${lastAnswer.model}.` : "";
      root.removeAttribute("aria-busy");
      const a = document.createElement("a");
      a.href = under(got.bundle);
      a.download = "";
      document.body.appendChild(a);
      a.click();
      a.remove();
      return;
    }
    if (got.n !== pending) return;  // an older question's answer: a newer one is on its way
    if (upload && got.picture && spec.picture && got.picture !== pictureOf(store.get())) {
      // an upload, named now: every tab shows it (this answer is already for it)
      answered = JSON.stringify([got.picture, JSON.parse(answered)[1]]);
      shownKey = answered;
      store.set({ picture: got.picture });
    }
    if (got.error) {
      root.removeAttribute("aria-busy");
      status.textContent = "";
      noticeBox.hidden = false;
      noticeBox.innerHTML = `<p class="vx-error" role="alert">${esc(got.error)}</p>`;
      figs.innerHTML = "";  // what was drawn for other settings is not this question's answer
      texts.innerHTML = "";
      shownKey = answered;
      return;
    }
    if (got.answer && got.answer.preview) previewKey = answered; else shownKey = answered;
    drawAnswer(got);
  });

  controls.addEventListener("input", (e) => {
    const t = e.target;
    if (t.type === "range") {
      const out = t.parentElement.querySelector("output");
      const f = page.keys[t.dataset.key] || fields.find((x) => x.name === t.dataset.name);
      if (out) out.textContent = f ? numberWord(f, t.value) : t.value;
      t.setAttribute("aria-valuetext", f ? numberWord(f, t.value) : t.value);
    }
  });
  controls.addEventListener("change", async (e) => {
    const t = e.target;
    if (t.dataset.upload) {
      const file = t.files && t.files[0];
      if (!file) return;
      status.textContent = "Uploading…";
      try {
        const { path } = await upload(file);
        ask({ picture: { path } });
      } catch (err) {
        status.textContent = "";
        noticeBox.hidden = false;
        noticeBox.innerHTML = `<p class="vx-error" role="alert">The upload did not arrive: ${esc(err && err.message)}</p>`;
      }
      return;
    }
    if (t.dataset.picture) { store.set({ picture: t.value }); return; }
    const k = t.dataset.key;
    if (!k) return;
    const f = page.keys[k];
    const text = t.type === "checkbox" ? (t.checked ? "1" : "0") : t.type === "range" ? numberWord(f, Number(t.value)) : t.value;
    store.setting(k, text);
  });
  controls.addEventListener("click", (e) => {
    if (e.target.closest("[data-download]")) ask({ bundle: true });
    if (e.target.closest("[data-run]")) ask();
  });
  figs.addEventListener("click", (e) => {  // a part of the panel opened or closed: the store says which is open
    const part = e.target.closest(".vx-part .vx-section-head button");
    if (!part) return;
    const sec = part.closest(".vx-part").dataset.section;
    store.set({ open: store.get().open === sec ? null : sec });
  });
  if (!spec.main) {
    root.querySelector(".vx-section-head button").addEventListener("click", () => {
      store.set({ open: store.get().open === spec.view ? null : spec.view });
    });
  }

  // what a link names is brought into view once its answer is drawn: its section (open=), or on a lesson's step
  // the step's view; a page opened without either stays at the top (a phone too)
  const named = (s) => s.tab === spec.tab && (s.open === spec.view || (s.open in (spec.sections || {}))
    || (!!s.lesson && spec.main && !s.open));
  let bring = named(store.get());
  root.addEventListener("vx-answered", () => {
    if (!bring) return;
    bring = false;
    const s = store.get();
    // a section the link opens; on a lesson's step what the view shows (its figures under the caption); else the panel
    const target = (s.open && root.querySelector(`[data-section="${s.open}"]`))
      || (s.lesson && root.querySelector(".vx-out")) || root;
    target.scrollIntoView({ block: "start" });  // under the lesson bar (page.css's scroll-padding-top)
  });

  let drawnFor = null;
  const update = (s, changed) => {
    if ((changed || []).includes("link")) bring = named(s);
    const opened = isOpen(s);
    body.hidden = !opened;
    if (!spec.main) root.querySelector(".vx-section-head button").setAttribute("aria-expanded", String(opened));
    const mine = JSON.stringify([s.picture, ...fields.map((f) => f.link && settingText(s, page, f.link))]);
    if (drawnFor === null) drawControls(s);
    else if (mine !== drawnFor) syncControls(s);  // in place: a control in a hand (focus, a drag) stays as it is
    drawnFor = mine;
    if (!shown(s) || !opened) return;
    for (const part of figs.querySelectorAll(".vx-part")) {
      const on = s.open === part.dataset.section;
      part.querySelector("button").setAttribute("aria-expanded", String(on));
      part.querySelector(".vx-figures").hidden = !on;
    }
    if (onDevice(page, s, spec)) return;  // the device computes this tab's view (app/device.mjs draws it)
    const k = key(s);
    if (PREVIEW.includes(spec.view) && k !== shownKey && k !== previewKey && !inflight) ask({ preview: true });
    const manual = spec.long || spec.view === "predict";
    if (k !== shownKey && k !== asked && !manual) ask();
    if (manual && k !== shownKey && lastAnswer === null && status.textContent === "") {
      status.textContent = spec.view === "predict" ? "Mark the patches you think the model needs, then press Test my choice." : "Press Run: this test sends many forwards through the model.";
    }
  };
  store.subscribe(update);
  update(store.get());
}
