// vitviz page script (given to launch(js=...) as one function's body): the page's one state, its address, and
// projector mode. The server puts before it the library's modules (lib/address.mjs: the state and its address) and
// five constants: TAB_KEYS (each setting's link key -> its tab), SETTINGS (the device link's settings set here:
// link key -> range), SHOWS (what each tab shows once answered, TabSpec.shows: a CSS selector), FIGURES (each
// tab's other figures a link can name with show=: name -> CSS selector, TabSpec.figures) and DEVICE_TABS (the tabs
// with a "compute on this device" switch, TabSpec.device). Light mode needs no reload: the theme's dark palette is
// the light one (the theme made light-only on the server), and the class is dropped here too.
//
// The page's state lives in `state` (lib/address.mjs says what it holds: the tab, each tab's picture, every tab's
// settings by link key, the open section, the lesson and its step, projector, contrast, device). Every change goes
// through it and the address is written from it; it is read from the address once when the page opens, and when a
// link of this page is opened within it. The server's opener reads the same address.
  let state = readAddress(window.location.search, TAB_KEYS);
  // The browser views' own settings, by view and field name, as their carriers take them to the server (the
  // explorer's layer, head, threshold…), are part of this state too: `state.views`. window.vitvizState is the
  // views' door to them (carrier.js, explorer.js, picker.js, device.js); a carrier made before this script ran
  // kept what it was given, which is taken in here.
  const views = window.vitvizState || {};
  state.views = { ...(views.held || {}) };
  window.vitvizState = Object.assign(views, {
    carriers: views.carriers || {}, values: views.values || {},
    set(view, values, opts) {  // a view's settings changed (quiet: as the server used them already: nothing asked)
      state = { ...state, views: { ...state.views, [view]: { ...(state.views[view] || {}), ...values } } };
      const carrier = this.carriers[view];
      if (carrier && !(opts && opts.quiet)) carrier(state.views[view]);
    },
    get(view) { return state.views[view] || null; },
  });
  delete views.held;
  const write = () => {  // the address follows the state (this history entry replaced, none added)
    const url = new URL(window.location.href);
    url.search = addressOf(state, TAB_KEYS, url.search);
    if (url.href !== window.location.href) history.replaceState(history.state, "", url.href);
  };
  const change = (patch) => { state = { ...state, ...patch }; write(); };
  const MODES = ["projector", "contrast", "device"];
  const asked = {};  // when each tab's answer was last asked (performance.now(); its event's script says so)
  const hands = new Set();  // the link keys a hand set since the last link's settings were put in
  const waiting = {};  // by tab: the doors its work waits behind until it is shown, each with its
  // condition (link.whenShown)
  const opening = { asked: 0, settled: 0 };  // when the server's opener was last asked, and its settings last put in
  const link = {
    get: (key) => new URL(window.location.href).searchParams.get(key),
    state: () => state,  // the page's state, as it is now
    asked(tab) { asked[tab] = performance.now(); },  // a tab's answer was asked (the script of its event)
    askedAt: (tab) => asked[tab] ?? -1e9,
    askOpen() {  // the server's opener asked to open the address as it is (its door): its settings follow
      opening.asked = performance.now();
      window.vitvizDoors?.["page-open"]?.();
    },
    settled() {  // the opener's settings are in the controls (links.settle_script); the browser views take theirs
      opening.settled = performance.now();  // from their carriers, which the same answer set (explorer.js)
      hands.clear();
      setTimeout(() => document.dispatchEvent(new CustomEvent("vitviz-settled")), 0);
    },
    settling: () => opening.asked > opening.settled && performance.now() - opening.asked < 5000,
    set(values) {  // the page's own keys (the device switch's, say): {key: text or null}
      const patch = {};
      for (const [k, v] of Object.entries(values)) patch[k] = MODES.includes(k) ? v === "1" || v === true : v || null;
      change(patch);
    },
    projector(on) {  // large page text (theme.css's body.vx-projector rules); remembered in the link
      document.body.classList.toggle("vx-projector", !!on);
      change({ projector: !!on });
    },
    setting(key, value, fallback) {  // one declared setting: left out of the link while it is the default
      hands.add(key);  // (set by a hand or for one: a link that sets it back asks its answer again)
      change({ settings: withSetting(state.settings, key, value, fallback) });
    },
    touched: (key) => hands.has(key),  // a hand set it since the last link's settings went in
    putIn: {},  // what the settle script last put into each control it sets (by its index there): links.settle_script
    settings(fields, values) {  // several, as vitviz/render/browser.py describes them (link key, default, words)
      const word = (f, v) => (Object.entries(f.words || {}).find(([, x]) => x === v) || [v])[0];
      let settings = state.settings;
      for (const [name, f] of Object.entries(fields)) {
        if (f.link && name in values) settings = withSetting(settings, f.link, word(f, values[name]), word(f, f.default));
      }
      change({ settings });
    },
    image(tab, key) { change({ images: { ...state.images, [tab]: key || null } }); },  // "cat", "upload-<hash>"
    tab(name) {  // its picture and settings shown; a section left closes; what waited for it is asked now
      state = withTab(state, name);
      write();
      const doors = waiting[name] || [];
      delete waiting[name];
      for (const w of doors) link.askWaiting(w);
    },
    askWaiting(w) {  // a door that waited for its tab, once a link that shows the tab has put its settings in
      // (the tab's own answer is asked then): opened if its condition still holds and the tab's answer was not
      // asked since the door began to wait (that answer draws the same figures after it: not asked twice)
      if (link.settling()) return setTimeout(() => link.askWaiting(w), 20);
      setTimeout(() => {
        if ((!w.when || w.when()) && link.askedAt(w.tab) < w.since) window.vitvizDoors?.[w.door]?.();
      }, 50);
    },
    named(picture, keyBox) {  // whether a tab's new picture, set while a link opens, is the example the link's
      // opener named (its hidden box `keyBox`, among the link's settings): then it needs no check. A promise, kept
      // once the settings are in (an upload, or a picture the opener did not name, is checked)
      return new Promise((ok) => {
        const read = () => {
          if (link.settling()) return setTimeout(read, 20);
          const key = document.querySelector(`#${keyBox} textarea, #${keyBox} input`)?.value || "";
          const file = picture && (picture.orig_name || picture.path || picture.url || "");
          ok(!!key && !!file && !key.startsWith("upload-") && file.split("/").pop().replace(/\.[^.]*$/, "") === key);
        };
        read();
      });
    },
    whenShown(tab, door, when, since = performance.now()) {  // a door of tab `tab`'s work, asked at `since`:
      // opened now while the tab is shown, else when it is next, if `when()` (read again then) still holds (a link
      // within the page sets every tab's settings: the tabs out of sight ask nothing until opened); never when
      // the tab's answer was asked since (it draws the same figures after it)
      if ((state.tab || FIRST_TAB) !== tab) {  // one wait per door, since its latest trigger
        waiting[tab] = [...(waiting[tab] || []).filter((w) => w.door !== door), { tab, door, when, since }];
      } else if (link.askedAt(tab) < since) window.vitvizDoors?.[door]?.();
    },
    openedAt: () => opening.asked,  // when the link being opened (or the last one) was asked
    bring(find, open, drawnOf = mainFigure) {  // keep what find() gives (once it is there) just under a lesson's
      // bar (which stays on screen), else at the top of the screen, while what is above it is still being drawn
      // (figures arriving move it down), until the page settles (15 s after its main figure, drawnOf(it), is
      // drawn; a busy page draws late) or the reader scrolls, clicks or presses a key. `open`: what keeps it open
      // meanwhile (a section: gradio may close it again as its tab finishes mounting)
      const started = performance.now(), mine = {};
      link.leave();
      link.leave = () => { mine.left = true; };  // another link opened: this one is no longer kept
      brought = mine;
      const tryBring = () => {
        if (mine.left) return;
        const el = find();
        if (!el || !el.offsetParent) {
          if (performance.now() - started < 30000) setTimeout(tryBring, 200);
          else mine.left = true;
          return;
        }
        if (open) open();
        const pin = () => {  // its top under the bar; further down if that shows the whole of its main figure
          const bar = document.getElementById("lesson-bar"), below = bar?.offsetParent ? bar.offsetHeight + 20 : 0;
          const now = find() || el;  // (found again: an element mounted anew is another one)
          const drawn = drawnOf(now), fig = drawn?.getBoundingClientRect();
          if (drawn && !settling) settling = setTimeout(unpin, 15000);
          const top = now.getBoundingClientRect().top - below;
          const more = fig ? Math.min(fig.top - below, fig.bottom + 8 - window.innerHeight) : 0;
          window.scrollTo({ top: Math.max(top, more) + window.scrollY, behavior: "instant" });
        };
        let settling = null;
        setTimeout(pin, 300);
        const again = open ? setInterval(open, 250) : null;
        const grown = new ResizeObserver(pin), moves = ["wheel", "touchstart", "keydown", "mousedown"];
        const unpin = () => grown.disconnect();
        const stop = () => {
          mine.left = true;
          clearInterval(again); unpin();
          for (const m of moves) removeEventListener(m, stop, true);
        };
        link.leave = stop;
        grown.observe(document.body);
        for (const m of moves) addEventListener(m, stop, true);
        setTimeout(stop, 60000);
      };
      tryBring();
    },
    section(name) {  // open a tab's section (an accordion: <name>-box) and bring it to the top of the screen; opened
      // once the link's settings are in (its answer, asked as it opens, reads them; the settle script asks again
      // only for a section already open: links.settle_script)
      const box = () => document.getElementById(`${name}-box`);
      const head = () => box()?.querySelector(":scope > .label-wrap");
      let waiting = false;
      const open = () => {
        const h = head();
        if (!h || !h.offsetParent || h.classList.contains("open")) return;
        if (!link.settling()) { h.click(); return; }
        if (!waiting) {  // the moment they are in (not at the next of bring's retries)
          waiting = true;
          document.addEventListener("vitviz-settled", () => { waiting = false; open(); }, { once: true });
        }
      };
      link.bring(() => (head() ? box() : null), open);
    },
    restore(text) {  // settings set back by the server (a refused value): {"keys": {link key: text or null}}
      let got = {};
      try { got = JSON.parse(text || "{}").keys || {}; } catch (e) { return; }
      const settings = { ...state.settings };
      for (const [key, value] of Object.entries(got)) { if (value === null) delete settings[key]; else settings[key] = String(value); }
      change({ settings });
    },
    reveal(selector) {  // on a narrow screen, bring a result into view after the control that asked for it (not
      // while what a link names is being brought up: the link asked, not a control)
      if (window.innerWidth > 760 || (brought && !brought.left)) return;
      const el = document.querySelector(selector);
      if (el) el.scrollIntoView({ block: "start", behavior: "instant" });
    },
  };
  let brought = null;  // what the last link.bring keeps in view ({left: true} once it no longer does)
  // What a section or a tab's figure is about: its first picture or drawing of some size (a figure, a browser
  // view's canvas), once drawn
  const mainFigure = (el) => [...el.querySelectorAll("img, canvas")].find((f) => f.getBoundingClientRect().height > 60);
  link.leave = () => {};  // what a link brought up (link.bring) is kept open and in view until this is called
  link.contrast = (on) => {  // high contrast for washed-out projectors (theme.css's body.vx-contrast rules)
    document.body.classList.toggle("vx-contrast", !!on);
    change({ contrast: !!on });
  };
  // Opening the page as its link says. A device link (the Attention tab computed on this device, perhaps with
  // projector or contrast) is opened here and the server hears nothing; any other link goes to the server's opener
  // (its door: components.door in vitviz/app). `held`: the browser views' settings carriers as built, set back as
  // the server's opener sets them on every load (links.opener says why).
  const HERE = ["tab", "device", "projector", "contrast"];
  const whole = (key, text) => {  // a whole number in range, read as the server reads it; else null (the server's)
    const r = SETTINGS[key];
    return r && /^[0-9]{1,6}$/.test(text) && Number(text) >= r.lo && Number(text) <= r.hi ? Number(text) : null;
  };
  link.open = (held) => {
    const q = new URL(window.location.href).searchParams;
    const here = q.get("tab") === "attention" && q.get("device") === "1"
      && [...q.keys()].every((k) => HERE.includes(k) || whole(k, q.get(k)) !== null);
    if (!here) { link.askOpen(); link.choose(link.opening); return []; }
    link.choose("attention");
    return [q.get("projector") === "1" || undefined,
      q.get("contrast") === "1" || undefined, ...Object.keys(SETTINGS).map((k) => whole(k, q.get(k)) ?? undefined),
      true, ...held];
  };
  // A tab was selected. gradio selects the first tab by itself as a page mounts, and the page's opening selects
  // the link's: a select of another tab than the one being opened counts only when a person's pointer or key on a
  // tab came before it and no select has answered that yet (else the server hears nothing of it: no time window,
  // which a busy page's late select would miss). A tab with a picture then asks the server for its example (its
  // door `press`), unless the page computes on this device and the tab can too (DEVICE_TABS): then true is
  // returned, and the tab's select event (Tab.opens) turns its switch on, so its panel computes the page's picture.
  let touched = false;
  for (const kind of ["pointerdown", "keydown"]) {
    document.addEventListener(kind, (ev) => { if (ev.target?.closest?.("[role=tab]")) touched = true; }, true);
  }
  link.opening = state.tab || FIRST_TAB;
  let choosing = null;  // the tab this script selected (its button), until gradio's select of it comes
  link.choose = (name) => {  // the link's tab shown: its button pressed as a person would (the server's opener
    // sets the tab's picture and settings; gradio's tab set from an answer would make every later answer's status
    // refresh every component inside the tabs)
    const started = performance.now();
    const press = () => {
      const b = document.querySelector(`[role=tab][data-tab-id="${name}"]`);
      if (!b) { if (performance.now() - started < 30000) setTimeout(press, 50); return; }
      if (b.getAttribute("aria-selected") === "true") return;
      choosing = name;
      b.click();
    };
    press();
  };
  link.selected = (name, press) => {
    if (choosing === name) {  // selected by link.choose
      choosing = null;
      link.opening = name;
      link.tab(name);
      return;  // the server's opener gives it its picture
    }
    if (name !== link.opening && !touched) return;
    touched = false;
    link.opening = name;
    link.tab(name);
    if (state.device && DEVICE_TABS.includes(name)) return true;  // its select event turns its switch on
    if (press) window.vitvizDoors?.[press]?.();
    return false;
  };
  const readLink = () => {  // the state, as the address says (the pictures the tabs show now stay theirs)
    const read = readAddress(window.location.search, TAB_KEYS);
    state = { ...read, images: { ...state.images, ...read.images }, views: state.views };
    link.projector(state.projector);
    link.contrast(state.contrast);
  };
  const openView = () => {  // ?open=<section>: that section opened and brought up; else ?show=<figure> (one its
    // tab declares, TabSpec.figures) brought up, or on a lesson's step what its tab shows once answered
    // (TabSpec.shows: the step's figure). True when any
    const section = state.open || "", tab = state.tab || FIRST_TAB;
    if (section) {
      if (/^[a-z_]{1,40}$/.test(section)) link.section(section);
      return true;
    }
    const named = Object.hasOwn(FIGURES[tab] || {}, state.show || "") ? FIGURES[tab][state.show] : null;
    const figure = named || (state.lesson && SHOWS[tab]);
    // (a named figure that is no picture, Classify's top 5, is its own main figure once it has some size)
    const itself = (el) => (el.querySelector("img, canvas") || el.offsetHeight <= 60 ? null : el);
    const drawn = named ? (el) => mainFigure(el) || itself(el) : mainFigure;
    if (figure) link.bring(() => document.querySelector(figure)?.closest(".block"), null, drawn);
    return !!figure;
  };
  // A link of this page opened within it (a lesson's Back and Next, the arrow keys, the browser's history): the
  // address moves, and the server's opener (its door; gradio's client sends it the address as it is now)
  // sets what the link says and every other setting back to its default. No reload: the page, its scripts and
  // the analyses the server and the browser already hold stay.
  // A lesson link that names only the lesson and its step (`?lesson=tour&step=7`, as one is written on a board)
  // opens that step's own link once the server's bar says what it is (its data-here), in place of this address:
  // the view then matches the caption.
  const bareLesson = () => {
    const keys = [...new URLSearchParams(window.location.search).keys()];
    return keys.includes("lesson") && keys.every((k) => ["lesson", "step", ...MODES].includes(k));
  };
  let bare = bareLesson();
  const completeLesson = () => {
    const here = bare && document.getElementById("lesson-bar")?.dataset.here;
    if (!here) return;
    bare = false;
    link.go(here, true);
  };
  const reopen = () => {
    bare = bareLesson();
    link.leave();
    readLink();
    link.opening = state.tab || FIRST_TAB;
    link.askOpen();
    link.choose(link.opening);
    if (!openView()) window.scrollTo({ top: 0, behavior: "instant" });
  };
  link.go = (to, replace) => {  // replace: this history entry becomes the link (none added)
    const url = new URL(to, window.location.href);
    if (url.origin !== window.location.origin || url.pathname !== window.location.pathname) {
      window.location.href = url.href;
      return;
    }
    history[replace ? "replaceState" : "pushState"]({ vitviz: true }, "", url.href);
    link.moves = (link.moves || 0) + 1;  // how many links were opened within this page (the tests read it)
    reopen();
  };
  window.addEventListener("popstate", reopen);
  // A link of this page moves within it: a lesson's own (Back, Next, Leave) and any that names a tab (a
  // forward-pass card's "the view that explains it"). A link with a modifier key or another target opens as usual.
  document.addEventListener("click", (ev) => {
    const a = ev.target?.closest?.("a[href]");
    if (!a || ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey) return;
    if ((a.target && a.target !== "_self") || a.hasAttribute("download")) return;
    const url = new URL(a.getAttribute("href"), window.location.href);
    const here = url.origin === window.location.origin && url.pathname === window.location.pathname;
    if (!here || !(a.closest("#lesson-bar") || url.searchParams.has("tab"))) return;
    ev.preventDefault();
    link.go(url.href);
  }, true);
  window.vitvizLink = link;
  document.body.classList.remove("dark");
  readLink();  // the link opened
  write();
  openView();

  // names and keyboard reach for what gradio draws without them (WCAG 2.1: 4.1.2 names, 2.1.1 keyboard)
  const words = (file) => {  // an example's file name as a person would say it
    const stem = decodeURIComponent(file.split("/").pop().split("?")[0]).replace(/\.[a-z0-9]+$/i, "");
    if (stem.startsWith("scene_")) return `example: ${stem.slice(6)} shape scene`;
    if (stem.startsWith("toy_")) return "example: the 8 by 8 toy image";
    return `example photo: ${stem.replace(/_/g, " ")}`;
  };
  const name = () => {
    for (const b of document.querySelectorAll(".gallery-item:not([aria-label])")) {
      const img = b.querySelector("img");
      if (img && img.getAttribute("src")) { b.setAttribute("aria-label", words(img.getAttribute("src"))); img.alt = ""; }
    }
    for (const t of document.querySelectorAll(".vx-table")) {  // a table wider than the screen scrolls: reachable by keys
      const wide = t.scrollWidth > t.clientWidth + 1;
      if (wide && !t.hasAttribute("tabindex")) {
        t.setAttribute("tabindex", "0"); t.setAttribute("role", "region"); t.setAttribute("aria-label", "table (scrolls sideways)");
      } else if (!wide && t.getAttribute("tabindex") === "0") {
        t.removeAttribute("tabindex"); t.removeAttribute("role"); t.removeAttribute("aria-label");
      }
    }
  };
  let queued = false;
  new MutationObserver((changes) => {  // not for the browser views' own redraws (a caption per pointer move)
    if (queued || changes.every((c) => c.target.closest?.(".vx"))) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; name(); completeLesson(); });
  }).observe(document.body, { childList: true, subtree: true });
  window.addEventListener("resize", name);
  name();

  // A model list opened by tabbing into it closes when focus moves on (gradio's keeps it open over the next label).
  document.addEventListener("focusout", (ev) => {
    const input = ev.target;
    if (!(input instanceof HTMLInputElement) || input.getAttribute("role") !== "combobox") return;
    setTimeout(() => {
      const wrap = input.closest(".wrap");
      if (wrap && wrap.contains(document.activeElement)) return;
      input.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
    }, 0);
  }, true);

  // A lesson: ← and → go to the previous and next step (not while typing, on a slider or in a browser view,
  // which use the arrows themselves).
  document.addEventListener("keydown", (ev) => {
    const bar = document.querySelector("#lesson-bar");
    if (!bar || ev.altKey || ev.ctrlKey || ev.metaKey || (ev.key !== "ArrowLeft" && ev.key !== "ArrowRight")) return;
    const at = document.activeElement;
    if (at && at !== document.body && !bar.contains(at)) return;
    const to = ev.key === "ArrowLeft" ? bar.dataset.prev : bar.dataset.next;
    if (to) { ev.preventDefault(); link.go(to); }
  });
