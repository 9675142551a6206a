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

// Python's f"{v:g}" for the numbers a link holds: v's exact binary value rounded to six significant digits, ties to
// even (toPrecision sends a tie up: 1024.125 -> "1024.13" where Python writes "1024.12"), fixed notation for
// exponents -4 to 5, else d.ddddde±XX; trailing zeros dropped. gText(-0) is "-0", the non-finite ones inf and nan.
export function gText(v) {
  if (!Number.isFinite(v)) return Number.isNaN(v) ? "nan" : v > 0 ? "inf" : "-inf";
  const sign = v < 0 || Object.is(v, -0) ? "-" : "";
  if (v === 0) return sign + "0";
  let [digits, exp] = exactDigits(Math.abs(v));
  if (digits.length > 6) {
    const rest = digits.slice(6), head = digits.slice(0, 6);
    const up = rest[0] > "5" || (rest[0] === "5" && (/[1-9]/.test(rest.slice(1)) || Number(head[5]) % 2 === 1));
    digits = up ? String(BigInt(head) + 1n) : head;
    if (digits.length > 6) { digits = digits.slice(0, 6); exp += 1; }
  }
  digits = digits.replace(/0+$/, "");
  if (exp < -4 || exp >= 6) {
    const mant = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${mant}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  }
  if (exp < 0) return `${sign}0.${"0".repeat(-exp - 1)}${digits}`;
  const whole = digits.slice(0, exp + 1).padEnd(exp + 1, "0"), frac = digits.slice(exp + 1);
  return sign + whole + (frac ? "." + frac : "");
}

// a positive finite double's exact decimal digits (no leading zeros) and the power of ten of the first one
function exactDigits(a) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, a);
  const bits = view.getBigUint64(0), field = Number((bits >> 52n) & 0x7ffn), frac = bits & ((1n << 52n) - 1n);
  const mant = field === 0 ? frac : frac | (1n << 52n), shift = (field === 0 ? 1 : field) - 1075;
  if (shift >= 0) { const d = String(mant << BigInt(shift)); return [d, d.length - 1]; }
  const d = String(mant * 5n ** BigInt(-shift));  // a = mant·5^k / 10^k with k = -shift
  return [d, d.length - 1 + shift];
}

// Python's str.strip() and float(text): its whitespace (which is not JavaScript's: \x85 is, \ufeff is not; float()
// keeps \x1c-\x1f, which strip() takes off), digits with single underscores between them, "inf", "infinity" and
// "nan" in any case; no hexadecimal, no empty text (Number() reads "0x10" and "" as numbers). NaN for what float()
// refuses.
const SPACE = "\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const PY_STRIP = new RegExp(`^[${SPACE}\\x1c-\\x1f]+|[${SPACE}\\x1c-\\x1f]+$`, "g");
const FLOAT_STRIP = new RegExp(`^[${SPACE}]+|[${SPACE}]+$`, "g");
const DIGITS = "\\d(?:_?\\d)*";
const PY_FLOAT = new RegExp(`^[+-]?(?:(?:${DIGITS})?\\.${DIGITS}|${DIGITS}\\.?)(?:[eE][+-]?${DIGITS})?$`);
export function pyStrip(text) { return String(text).replace(PY_STRIP, ""); }
export function pyFloat(text) {
  const t = String(text).replace(FLOAT_STRIP, "");
  const named = /^([+-]?)(inf|infinity|nan)$/i.exec(t);
  if (named) return named[2].toLowerCase() === "nan" ? NaN : named[1] === "-" ? -Infinity : Infinity;
  return PY_FLOAT.test(t) ? Number(t.replace(/_/g, "")) : NaN;
}

// Python's round() to a whole number: halves go to the even neighbour (round(2.5) is 2, Math.round gives 3)
function roundEven(v) {
  const r = Math.round(v);
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

// a patch "row,column" as vitviz.specs.state.Field reads it ([row, col], whole numbers 0..1023), or null
function pyCell(text) {
  const parts = String(text).replace(/ /g, "").split(",");
  if (parts.length !== 2) return null;
  const out = parts.map(pyFloat);
  return out.every((f) => Number.isFinite(f) && f === Math.round(f) && f >= 0 && f <= 1023) ? out.map((f) => f + 0) : null;
}

const MAX_CELLS = 4096;  // vitviz.specs.state.MAX_CELLS
const own = (o, k) => o !== null && o !== undefined && Object.prototype.hasOwnProperty.call(o, k);

// What a link's text for `field` can be used as, as the server's Field.from_link reads it and Field.to_link
// writes it back: {text} (numbers brought into range, whole numbers rounded half to even, words and cells written
// as the link writes them) and, when the text was moved or cannot be read, `why` (one sentence naming the setting
// and what it accepts). A refused text comes back as {text: null, why}.
export function readSetting(field, text) {
  const key = field.link, raw = String(text);
  const words = field.words || {};
  const word = pyStrip(raw);
  if (own(words, word)) return { text: word };
  if (field.kind === "int" || field.kind === "float") {
    const v = pyFloat(raw);
    const range = `${gText(field.lo)} to ${gText(field.hi)}`;
    const named = Object.keys(words).length ? ` (or ${Object.keys(words).join(", ")})` : "";
    const takes = `${field.label} takes ${field.kind === "int" ? "a whole number" : "a number"} from ${range}${named}`;
    if (!Number.isFinite(v)) return { text: null, why: `${key}=${raw} is not a number: ${takes}.` };
    let used = v;  // Python's min(max(v, lo), hi): a value equal to a bound stays itself (-0 stays -0)
    if (field.lo > used) used = field.lo;
    if (field.hi < used) used = field.hi;
    const clamped = used !== v;
    if (field.kind === "int") used = roundEven(used) + 0;
    if (field.multiple && used % field.multiple !== 0) {
      return { text: null, why: `${key}=${raw}: ${takes}, a multiple of ${field.multiple}; the usual one is used.` };
    }
    const hit = Object.entries(words).find(([, w]) => w === used);
    const out = hit ? hit[0] : field.kind === "int" ? String(used) : gText(used);
    if (used === v) return { text: out };
    const moved = clamped ? `outside ${field.label}'s range (${range})` : "not a whole number";
    return { text: out, why: `${key}=${raw} is ${moved}: ${out} is used.` };
  }
  if (field.kind === "choice") {
    const values = (field.choices || []).map((c) => c[1]);
    const whole = values.length > 0 && values.every((c) => /^-?\d+$/.test(c));  // a choice of whole numbers
    const v = whole ? pyFloat(raw) : NaN;
    const got = whole ? (Number.isInteger(v) ? values.find((c) => Number(c) === v) : undefined)
      : values.find((c) => c === raw);
    if (got !== undefined) return { text: got };
    const listed = values.length <= 8 ? values.join(", ") : `${values.slice(0, 8).join(", ")}, …`;
    return { text: null, why: `${key}=${raw} is not one of ${field.label}'s choices (${listed}): the usual one is used.` };
  }
  if (field.kind === "bool") {
    const t = word.toLowerCase();
    if (["1", "true", "yes"].includes(t)) return { text: "1" };
    if (["0", "false", "no"].includes(t)) return { text: "0" };
    return { text: null, why: `${key}=${raw}: ${field.label} is 1 (on) or 0 (off).` };
  }
  if (field.kind === "cell") {
    if (raw === "") return { text: "" };
    const cell = pyCell(raw);
    if (cell) return { text: cell.join(",") };
    return { text: null, why: `${key}=${raw}: ${field.label} is a patch as row,column (0,0 is the top left).` };
  }
  if (field.kind === "cells") {
    const items = raw.length > 12 * MAX_CELLS ? null : raw.replace(/ /g, "").split(";").filter((p) => p);
    const cells = items && items.length <= MAX_CELLS ? items.map(pyCell) : [null];
    if (cells.every((c) => c)) {
      const seen = [...new Map(cells.map((c) => [c.join(","), c])).values()];
      seen.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
      return { text: seen.map((c) => c.join(",")).join(";") };
    }
    return { text: null, why: `${key}=${raw}: ${field.label} is a list of patches as row,column;row,column.` };
  }
  return { text: raw };
}

// whether a setting's text stands for its default (numbers by value, as Field.to_link compares: "-0" is 0)
export function isDefault(field, text) {
  if (text === field.default) return true;
  const number = (field.kind === "int" || field.kind === "float") && !own(field.words, text) && !own(field.words, field.default);
  return number && Number(text) === Number(field.default);
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
    const field = own(spec.keys, key) ? spec.keys[key] : null;
    if (!field) {
      notices.push(`${key}= is not a setting vitviz knows: it is left out.`);
      continue;
    }
    const got = readSetting(field, text);
    if (got.why) notices.push(got.why);
    if (got.text !== null && !isDefault(field, got.text)) settings[key] = got.text;
  }
  for (const [key, field] of Object.entries(spec.keys)) {  // a model this server cannot have: its stand-in, named
    if (field.used !== undefined && !q.has(key)) settings[key] = field.used;
  }
  let picture = q.get("image");
  if (picture !== null && !(spec.examples || []).includes(picture) && !/^upload-[0-9a-f]{8,64}$/.test(picture)
      && picture !== "lesson") {
    notices.push(`image=${picture} is not one of the examples (${(spec.examples || []).join(", ")}): the page opens on ${spec.picture}.`);
    picture = null;
  }
  // image=lesson: a lesson's own picture, which travels in the lesson, never in a step's link: kept in the state
  // (the lesson bar says so and offers the lesson); the panels show the page's picture meanwhile (main.mjs)
  const views = (spec.tabs.find((t) => t.id === tab) || { views: [] }).views;
  const sections = (spec.tabs.find((t) => t.id === tab) || { sections: [] }).sections || [];
  let open = q.get("open");
  if (open !== null && !views.includes(open) && !sections.includes(open)) {
    notices.push(`open=${open} is not a section of the ${tab} tab (${views.slice(1).join(", ")}): none is opened.`);
    open = null;
  }
  let device = q.get("device") === "1";
  if (device && !(spec.device || []).includes(tab)) device = false;
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
  write(linkOf(state, spec));  // the address as the store holds it: what a notice says was left out leaves it
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
      if (patch.tab && !(spec.device || []).includes(patch.tab)) patch = { ...patch, device: false };  // as readLink
      const changed = Object.keys(patch).filter((k) => JSON.stringify(state[k]) !== JSON.stringify(patch[k]));
      if (!changed.length) return;
      notices = [];  // what the link's notice said is past once the page changes
      state = { ...state, ...patch };
      emit(changed);
    },
    setting(key, text) {
      const field = spec.keys[key];
      const settings = { ...state.settings };
      if (text === null || text === undefined || String(text) === field.default) delete settings[key];
      else settings[key] = String(text);
      if (JSON.stringify(settings) === JSON.stringify(state.settings)) return;
      notices = [];
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
