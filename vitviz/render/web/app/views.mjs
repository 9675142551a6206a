// The views drawn in the browser, by view name: each is a function the view's panel calls with its answer
// ({root, figs, answer, store, spec, page}); what it draws follows the store (hover, sliders) with no server call.
// (The explorer, the similarity map's hover, the patch inspector, inside one head, predict's picker.)

export const BROWSER = {};

export function drawInBrowser(args) {
  const draw = BROWSER[args.spec.view];
  if (draw) draw(args);
}
