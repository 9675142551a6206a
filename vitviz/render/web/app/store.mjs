// The page's one store: everything the page is showing, and the address written from it.
//
// A state: {tab, picture, settings: {link key: text}, open, show, lesson, step, projector, contrast, device}.
// `picture` is the page's one picture (an example's name or "upload-<fingerprint>"): every tab shows it until the
// student picks another. `settings` holds every tab's settings by their link keys, as the link writes them, with
// each default left out; the address shows the open tab's. `open` is a section of the tab (a view's name).
//
// The store reads an address once (when the page opens, and when a link of this page is opened within it: a
// lesson's Back and Next, the browser's history) and writes the address at every change. Nothing in it touches the
// DOM: tests/js/store.test.mjs runs it under Node against vectors the library writes. The spec it is made from is
// the server's (vitviz/app/panels.py page_spec): every link key's field (kind, range or choices, default, tab),
// the tabs and their views, the examples and the picture a link without one opens on.

export const PAGE_KEYS = ["tab", "image", "open", "show", "lesson", "step", "projector", "contrast", "device"];
const FLAGS = ["projector", "contrast", "device"];

// Python's f"{v:g}" for the numbers a link holds (six significant digits, no trailing zeros)
export function gText(v) {
  if (!Number.isFinite(v)) return String(v);
  if (v === 0) return "0";
  const exp = Math.floor(Math.log10(Math.abs(v)));
  if (exp < -4 || exp >= 6) {
    const [m, e] = v.toExponential(5).split("e");
    const mant = m.includes(".") ? m.replace(/0+$/, "").replace(/\.$/, "") : m;
    const n = Number(e);
    return `${mant}e${n < 0 ? "-" : "+"}${String(Math.abs(n)).padStart(2, "0")}`;
  }
  const s = v.toPrecision(6);
  return s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s;
}

// What a link's text for `field` can be used as: {text} (the text to keep, brought into range as the server's
// Field.from_link does) and, when the text was changed or cannot be read, `why` (one sentence naming the
// setting and what it accepts).
export function readSetting(field, text) {
  const key = field.link, raw = String(text);
  const words = field.words || {};
  if (raw in words) return { text: raw };
  if (field.kind === "int" || field.kind === "float") {
    const v = raw.trim() === "" ? NaN : Number(raw);
    const range = `${gText(field.lo)} to ${gText(field.hi)}`;
    const named = Object.keys(words).length ? ` (or ${Object.keys(words).join(", ")})` : "";
    if (!Number.isFinite(v)) {
      return { text: null, why: `${key}=${raw} is not a number: ${field.label} takes ${field.kind === "int" ? "a whole number" : "a number"} from ${range}${named}.` };
    }
    let used = Math.min(Math.max(v, field.lo), field.hi);
    if (field.kind === "int") used = Math.round(used);
    if (field.multiple) used = Math.max(field.lo, Math.round(used / field.multiple) * field.multiple);
    const out = field.kind === "int" ? String(used) : gText(used);
    if (used !== v) return { text: out, why: `${key}=${raw} is outside ${field.label}'s range (${range}): ${out} is used.` };
    return { text: out };
  }
  if (field.kind === "choice") {
    const values = (field.choices || []).map((c) => c[1]);
    if (values.includes(raw)) return { text: raw };
    const listed = values.length <= 8 ? values.join(", ") : `${values.slice(0, 8).join(", ")}, …`;
    return { text: null, why: `${key}=${raw} is not one of ${field.label}'s choices (${listed}): the usual one is used.` };
  }
  if (field.kind === "bool") {
    if (raw === "1" || raw === "0") return { text: raw };
    return { text: null, why: `${key}=${raw}: ${field.label} is 1 (on) or 0 (off).` };
  }
  if (field.kind === "cell") {
    if (raw === "" || /^\d{1,4},\d{1,4}$/.test(raw)) return { text: raw };
    return { text: null, why: `${key}=${raw}: ${field.label} is a patch as row,column (0,0 is the top left).` };
  }
  if (field.kind === "cells") {
    if (raw === "" || /^\d{1,4},\d{1,4}(;\d{1,4},\d{1,4})*$/.test(raw)) return { text: raw };
    return { text: null, why: `${key}=${raw}: ${field.label} is a list of patches as row,column;row,column.` };
  }
  return { text: raw };
}

// The state an address says, and a sentence for each part of it this page cannot use.
export function readLink(search, spec) {
  const q = new URLSearchParams(String(search || "").replace(/^\?/, ""));
  const notices = [];
  const tabs = spec.tabs.map((t) => t.id);
  let tab = q.get("tab");
  if (tab !== null && !tabs.includes(tab)) {
    notices.push(`tab=${tab} is not a tab of this page (${tabs.join(", ")}): it opens on ${tabs[0]}.`);
    tab = null;
  }
  tab = tab || spec.first || tabs[0];
  const settings = {};
  for (const [key, text] of q.entries()) {
    if (PAGE_KEYS.includes(key)) continue;
    const field = spec.keys[key];
    if (!field) {
      notices.push(`${key}= is not a setting vitviz knows: it is left out.`);
      continue;
    }
    const got = readSetting(field, text);
    if (got.why) notices.push(got.why);
    if (got.text !== null && got.text !== field.default) settings[key] = got.text;
  }
  let picture = q.get("image");
  if (picture !== null && !(spec.examples || []).includes(picture) && !/^upload-[0-9a-f]{8,64}$/.test(picture)
      && picture !== "lesson") {
    notices.push(`image=${picture} is not one of the examples (${(spec.examples || []).join(", ")}): the page opens on ${spec.picture}.`);
    picture = null;
  }
  if (picture === "lesson") {  // a lesson's own picture travels in the lesson's file, never in a step's link
    notices.push("This step shows its lesson's own picture, which travels in the lesson (its file or its link), not " +
      `in this step's link: it opens on ${spec.picture} instead. Open the whole lesson to see its picture.`);
    picture = null;
  }
  const views = (spec.tabs.find((t) => t.id === tab) || { views: [] }).views;
  let open = q.get("open");
  if (open !== null && !views.includes(open)) {
    notices.push(`open=${open} is not a section of the ${tab} tab (${views.slice(1).join(", ")}): none is opened.`);
    open = null;
  }
  let device = q.get("device") === "1";
  if (device && !(spec.device || []).includes(tab)) device = false;
  if (device) {
    notices.push("device=1: computing on this device is not on this page yet (the page at / has it); here the " +
      "server computes every view.");
    device = false;
  }
  const state = {
    tab, picture: picture || spec.picture, settings, open, show: q.get("show"),
    lesson: q.get("lesson"), step: q.get("step"),
    projector: q.get("projector") === "1", contrast: q.get("contrast") === "1", device,
  };
  return { state, notices };
}

// The address of `state` ("?..." or ""): the page's keys, then the open tab's settings (defaults left out).
export function linkOf(state, spec) {
  const q = new URLSearchParams();
  const put = (k, v) => { if (v !== null && v !== undefined && v !== "" && v !== false) q.set(k, v === true ? "1" : String(v)); };
  put("tab", state.tab);
  if (state.picture !== spec.picture) put("image", state.picture);
  put("open", state.open);
  put("show", state.show);
  put("lesson", state.lesson);
  put("step", state.step);
  for (const f of FLAGS) put(f, state[f]);
  for (const [key, text] of Object.entries(state.settings)) {
    if (spec.keys[key] && spec.keys[key].tab === state.tab) put(key, text);
  }
  const text = q.toString();
  return text ? "?" + text : "";
}

// A setting's text now: what the state holds, else the field's default.
export function settingText(state, spec, key) {
  return key in state.settings ? state.settings[key] : spec.keys[key].default;
}

// A view's settings by field name, as its server function checks them (numbers as numbers, words and the rest as
// the link writes them).
export function viewSettings(state, spec, fields) {
  const out = {};
  for (const f of fields) {
    const text = f.link ? settingText(state, spec, f.link) : f.default;
    if ((f.kind === "int" || f.kind === "float") && !(text in (f.words || {}))) out[f.name] = Number(text);
    else if (f.kind === "bool") out[f.name] = text === "1";
    else if (f.kind === "cell") out[f.name] = text === "" ? null : text;
    else out[f.name] = text;
  }
  return out;
}

// The store: get, set (a patch of the state), setting (one link key's text), openLink (read an address into it),
// subscribe (called with the new state and what changed). `write(address)` is called at every change.
export function createStore(spec, search, write = () => {}) {
  let { state, notices } = readLink(search, spec);
  const listeners = new Set();
  const emit = (changed) => {
    write(linkOf(state, spec));
    for (const fn of [...listeners]) fn(state, changed);
  };
  return {
    spec,
    get: () => state,
    notices: () => notices,
    set(patch) {
      const changed = Object.keys(patch).filter((k) => JSON.stringify(state[k]) !== JSON.stringify(patch[k]));
      if (!changed.length) return;
      state = { ...state, ...patch };
      emit(changed);
    },
    setting(key, text) {
      const field = spec.keys[key];
      const settings = { ...state.settings };
      if (text === null || text === undefined || String(text) === field.default) delete settings[key];
      else settings[key] = String(text);
      if (JSON.stringify(settings) === JSON.stringify(state.settings)) return;
      state = { ...state, settings };
      emit(["settings:" + key]);
    },
    openLink(search, { keepPicture = false } = {}) {  // keepPicture: a link naming no picture keeps the one shown
      const read = readLink(search, spec);
      const named = new URLSearchParams(String(search || "").replace(/^\?/, "")).get("image");
      if (keepPicture && (named === null || read.state.picture !== named)) read.state.picture = state.picture;
      notices = read.notices;
      const changed = Object.keys(read.state).filter((k) => JSON.stringify(state[k]) !== JSON.stringify(read.state[k]));
      state = read.state;
      emit(changed.length ? [...changed, "link"] : ["link"]);
    },
    subscribe(fn) { listeners.add(fn); return () => listeners.delete(fn); },
  };
}
