// The page's one state and the address that follows from it (page.js keeps the state; every change goes through it
// and the address is written from it). The address is read into a state once, when the page opens or a link of
// this page is opened within it; the server's opener reads the same address (vitviz/app/links.py).
//
// A state: {tab, images: {tab: picture's name}, settings: {link key: text}, open, show, lesson, step, projector,
// contrast, device} (`open`: a section of the tab to open; `show`: a figure of the tab, by its declared name, to
// bring into view) (null or absent: not set). `settings` holds every tab's (what a person set, defaults left out);
// the address shows the open tab's only. `images` holds each tab's picture; the address shows the open tab's.

// the keys of the page's own (not a view's setting), in the order a new address lists them
export const PAGE_KEYS = ["tab", "image", "open", "show", "lesson", "step", "projector", "contrast", "device"];
export const FIRST_TAB = "patches";

// the state an address says: `tabKeys` maps each setting's link key to its tab
export function readAddress(search, tabKeys) {
  const q = new URLSearchParams(String(search || "").replace(/^\?/, ""));
  const tab = q.get("tab"), settings = {};
  for (const key of Object.keys(tabKeys)) if (q.get(key) !== null) settings[key] = q.get(key);
  return {
    tab, images: q.get("image") !== null ? { [tab || FIRST_TAB]: q.get("image") } : {}, settings,
    open: q.get("open"), show: q.get("show"), lesson: q.get("lesson"), step: q.get("step"),
    projector: q.get("projector") === "1", contrast: q.get("contrast") === "1", device: q.get("device") === "1",
  };
}

// the address of `state` ("?..." or ""), written over `current` (its keys kept in place, keys this page does not
// know left as they are)
export function addressOf(state, tabKeys, current = "") {
  const q = new URLSearchParams(String(current || "").replace(/^\?/, ""));
  const open = state.tab || FIRST_TAB, flag = (on) => (on ? "1" : null);
  const want = {
    tab: state.tab, image: (state.images || {})[open] ?? null, open: state.open, show: state.show,
    lesson: state.lesson, step: state.step,
    projector: flag(state.projector), contrast: flag(state.contrast), device: flag(state.device),
  };
  for (const [key, tab] of Object.entries(tabKeys)) {
    want[key] = tab === open && key in (state.settings || {}) ? state.settings[key] : null;
  }
  for (const [key, value] of Object.entries(want)) {
    if (value === null || value === undefined || value === "") q.delete(key); else q.set(key, String(value));
  }
  const text = q.toString();
  return text ? "?" + text : "";
}

// a setting's value as its link writes it: booleans as 1/0, lists joined by commas, nothing as ""
export function linkText(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "boolean") return value ? "1" : "0";
  return Array.isArray(value) ? value.join(",") : String(value);
}

// `settings` with one setting set: left out while it is its default (or empty)
export function withSetting(settings, key, value, fallback) {
  const text = linkText(value), out = { ...settings };
  if (text === String(fallback ?? "") || text === "") delete out[key]; else out[key] = text;
  return out;
}

// the state after the tab `name` is shown: a section or figure of the tab left behind is no longer named; the
// tab's picture and settings are those it holds
export function withTab(state, name) {
  return name === state.tab ? state : { ...state, tab: name, open: null, show: null };
}
