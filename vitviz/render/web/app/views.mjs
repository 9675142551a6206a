// The views drawn in the browser, by view name: each is a function the view's panel calls with its answer
// ({root, figs, answer, store, spec, page}); what it draws follows the store (hover, sliders) with no server call.
// (The explorer, the similarity map's hover, the patch inspector, predict's picker, inside one head.) Each lives
// in its own module under views/, importing the library's twins (../lib) and the store; none puts anything on `window`.

import { drawExplorer } from "./views/explorer.mjs";
import { drawInside } from "./views/inside.mjs";
import { drawInspector } from "./views/inspector.mjs";
import { drawPicker } from "./views/picker.mjs";
import { drawSimilarity } from "./views/posembed.mjs";

// The forward pass's diagram (views/forward.py diagram: the model's stages as cards, made on the server with this
// picture's shapes and values), above the panel's figures; its links to other views open within the page.
function drawForward({ root, answer, store }) {
  let box = root.querySelector(".vx-diagram");
  if (!box) {
    box = document.createElement("div");
    box.className = "vx-diagram";
    root.querySelector(".vx-figures").before(box);
    box.addEventListener("click", (e) => {
      const a = e.target.closest("a[href^='?']");
      if (!a) return;
      e.preventDefault();
      history.pushState(history.state, "", window.location.href);
      store.openLink(a.getAttribute("href"), { keepPicture: true });
    });
  }
  box.innerHTML = (answer.data && answer.data.diagram) || "";
}

export const BROWSER = {
  forward_pass: drawForward,
  explorer: drawExplorer,
  position_embeddings: drawSimilarity,
  patches: drawInspector,
  predict: drawPicker,
  inside_head: drawInside,
};

// The settings, by view, whose change the browser draws by itself: a panel need not ask its server function again
// for them (the explorer's layer, head, threshold, opacity, colours and pinned patch; predict's marks).
export const HELD_IN_BROWSER = {
  explorer: ["layer", "head", "keep", "alpha", "cmap", "query"],
  predict: ["patches"],
};

// The views whose browser drawing needs data before the view has answered (predict's picker: the picture and its
// grid before the test is run): their panel asks {preview: true} while open with nothing drawn for its picture
// and settings (vitviz/app/browser_views.py preview answers it).
export const PREVIEW = ["predict"];

export function drawInBrowser(args) {
  const draw = BROWSER[args.spec.view];
  if (draw) draw(args);
}
