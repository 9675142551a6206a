// Where this page's server answers: gradio serves the app under a root (a Space, a proxy's sub-path), which every
// request of the page's own routes starts with. An ES module; the page gets its text with `export` taken off.

// the app's root URL without a trailing slash ("" when gradio has not said one)
export function appRoot() {
  const config = globalThis.gradio_config;
  return ((config && config.root) || "").replace(/\/$/, "");
}

// the URL of `path` (without a leading slash) under the app's root
export function under(path) { return `${appRoot()}/${path.replace(/^\//, "")}`; }
