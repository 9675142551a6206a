// vitviz page script (given to launch(js=...)): the permalink helpers and projector mode. Light mode needs no
// reload: the theme's dark palette is the light one (the theme made light-only on the server), and the class is dropped here too.
() => {
  const link = {
    get: (key) => new URL(window.location.href).searchParams.get(key),
    set(values) {
      const url = new URL(window.location.href);
      for (const [k, v] of Object.entries(values)) v === null || v === undefined || v === "" ? url.searchParams.delete(k) : url.searchParams.set(k, v);
      if (url.href !== window.location.href) history.replaceState(history.state, "", url.href);
    },
    projector(on) {  // large page text (theme.css's body.vx-projector rules); remembered in the link
      document.body.classList.toggle("vx-projector", !!on);
      link.set({ projector: on ? "1" : null });
    },
    setting(key, value, fallback) {  // one declared setting: left out of the link while it is the default
      const text = value === null || value === undefined ? "" : typeof value === "boolean" ? (value ? "1" : "0")
        : Array.isArray(value) ? value.join(",") : String(value);
      link.set({ [key]: text === String(fallback ?? "") ? null : text });
    },
    settings(fields, values) {  // several, as vitviz/render/browser.py describes them (link key, default, words)
      const word = (f, v) => (Object.entries(f.words || {}).find(([, x]) => x === v) || [v])[0];
      for (const [name, f] of Object.entries(fields)) {
        if (f.link && name in values) link.setting(f.link, word(f, values[name]), word(f, f.default));
      }
    },
    images: {},  // tab -> image key ("cat" for an example, "upload-<hash>" for an upload)
    image(tab, key) { link.images[tab] = key || null; if (link.get("tab") === tab) link.set({ image: key || null }); },
    tab(name) { link.set({ tab: name, image: link.images[name] || null }); },
    reveal(selector) {  // on a narrow screen, bring a result into view after the control that asked for it
      if (window.innerWidth > 760) return;
      const el = document.querySelector(selector);
      if (el) el.scrollIntoView({ block: "start", behavior: "instant" });
    },
  };
  window.vitvizLink = link;
  document.body.classList.remove("dark");
  link.projector(link.get("projector") === "1");
}
