// Layout audit for the browser tests: what text is on screen, how large, whether any overlaps, and the figures.
() => {
  const panel = [...document.querySelectorAll(".tabitem")].find((t) => t.offsetParent !== null);
  const roots = [document.querySelector("#intro"), document.querySelector("#projector"),
                 document.querySelector("#link-notice"), document.querySelector("[role=tablist]"), panel].filter(Boolean);
  const shown = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.display === "none" || cs.visibility === "hidden" || Number(cs.opacity) === 0) return false;
      if (e.classList.contains("visually-hidden") || e.getAttribute("aria-hidden") === "true") return false;
    }
    return true;
  };
  const clipOf = (el) => {  // the part of the page an element can show: its ancestors' overflow clips, intersected
    let c = [-1e9, -1e9, 1e9, 1e9];
    for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
      const cs = getComputedStyle(e);
      if (cs.overflowX !== "visible" || cs.overflowY !== "visible") {
        const b = e.getBoundingClientRect();
        c = [Math.max(c[0], b.left + scrollX), Math.max(c[1], b.top + scrollY), Math.min(c[2], b.right + scrollX),
             Math.min(c[3], b.bottom + scrollY)];
      }
    }
    return c;
  };
  const texts = [];
  for (const root of roots) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      if (!n.textContent.trim() || !el || !shown(el) || el.closest("svg, button[aria-label], .icon-button-wrapper, select, option, textarea, input, .wrap.default"))
        continue;
      if (el.closest("details:not([open]) > :not(summary)")) continue;
      const range = document.createRange();
      range.selectNodeContents(n);
      const clip = clipOf(el);
      const rects = [...range.getClientRects()]
        .map((r) => [Math.max(r.left + scrollX, clip[0]), Math.max(r.top + scrollY, clip[1]),
                     Math.min(r.right + scrollX, clip[2]), Math.min(r.bottom + scrollY, clip[3])])
        .filter((r) => r[2] - r[0] > 0.5 && r[3] - r[1] > 0.5);  // what can be seen of each line
      if (!rects.length) continue;
      texts.push({ text: n.textContent.trim().slice(0, 60), px: parseFloat(getComputedStyle(el).fontSize),
                   rects, node: texts.length, el });
    }
  }
  const overlaps = [];
  for (let i = 0; i < texts.length; i++)
    for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i], b = texts[j];
      if (a.el === b.el) continue;
      for (const r of a.rects) for (const s of b.rects) {
        const w = Math.min(r[2], s[2]) - Math.max(r[0], s[0]), h = Math.min(r[3], s[3]) - Math.max(r[1], s[1]);
        if (w > 2 && h > 2) overlaps.push([a.text, b.text, Math.round(w), Math.round(h)]);
      }
    }
  const figures = [...(panel || document).querySelectorAll(".vx-fig img")].filter((i) => shown(i) && i.naturalWidth > 0)
    .map((i) => { const b = i.getBoundingClientRect();
      const s = Math.min(1, b.width / i.naturalWidth, b.height / i.naturalHeight);  // object-fit: scale-down
      return { id: i.closest(".vx-fig").id, src: i.src, nw: i.naturalWidth, nh: i.naturalHeight, scale: s,
               shownH: i.naturalHeight * s, shownW: i.naturalWidth * s, boxes: [b.left, b.top + scrollY, b.right, b.bottom + scrollY] }; });
  const onFigures = [];  // text drawn over a figure's picture (a component label, a caption)
  for (const f of figures) for (const t of texts) for (const r of t.rects) {
    const w = Math.min(r[2], f.boxes[2]) - Math.max(r[0], f.boxes[0]), h = Math.min(r[3], f.boxes[3]) - Math.max(r[1], f.boxes[1]);
    const cx = (f.boxes[0] + f.boxes[2]) / 2, half = f.shownW / 2;  // the picture itself, centred in its box
    const wi = Math.min(r[2], cx + half) - Math.max(r[0], cx - half);
    if (w > 2 && h > 2 && wi > 2) onFigures.push([t.text, f.id]);
  }
  const canvases = [...(panel || document).querySelectorAll("canvas[data-text-px]")].filter(shown)
    .map((c) => ({ id: c.closest("[id]")?.id, px: parseFloat(c.dataset.textPx) }));
  const tabs = [...document.querySelectorAll("[role=tab]")].filter((t) => shown(t) && t.getBoundingClientRect().width > 0)
    .map((t) => t.textContent.trim());
  return { texts: texts.map(({ text, px }) => ({ text, px })), overlaps, figures, onFigures, canvases, tabs,
           viewport: [innerWidth, innerHeight], pageHeight: document.documentElement.scrollHeight };
}
