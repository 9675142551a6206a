// vitviz page script (given to launch(js=...)): the permalink helpers and projector mode. Light mode needs no
// reload: the theme's dark palette is the light one (app.light_only), and the class is dropped here too.
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
