// The page's one store, handed from the page bar (which makes it) to every module that needs it. Imported by its
// bare relative path from every module (main.mjs, maker.mjs, device.mjs, views/*), so the browser keeps one copy
// of it whatever address the importing module itself was loaded under (main.mjs?v=..., say).

let provide;
const ready = new Promise((resolve) => { provide = resolve; });

// the store, once the page bar has made it
export const whenStore = () => ready;

// the page bar hands over the store it made (once)
export function provideStore(store) { provide(store); }
