// What the device panel says while it works (render/web/device.js): each step in words, as it happens. A first visit
// downloads ONNX Runtime's WebAssembly and the model's graph (counted as they come); a later visit reads both from
// the browser's cache and only prepares and computes. Pure functions, tested under Node (tests/js/device.test.mjs).

export function megabytes(n) {  // bytes as the panel writes them: one decimal, in MB (10^6 bytes)
  return `${(Math.max(0, n) / 1e6).toFixed(1)} MB`;
}

// The status for a step of the device's work. `step`: "runtime" (ONNX Runtime's WebAssembly downloading), "model"
// (the graph downloading), "cached" (the graph read from this browser's cache), "preparing" (ONNX Runtime and the
// model made ready, off the page's main thread), "measuring" (a blank picture run to time this device),
// "computing" (the picture's forward). `got` and `total` are bytes (downloads); `side`, the measuring picture's side;
// `backend`, the words for what runs (say "WebAssembly, 2 threads").
export function deviceStatus(step, { got = 0, total = 0, side = 0, backend = "" } = {}) {
  const of = total > 0 ? `${megabytes(Math.min(got, total)).replace(" MB", "")} of ${megabytes(total)}` : megabytes(got);
  switch (step) {
    case "runtime": return `downloading ONNX Runtime: ${of} (the first time only; this browser keeps it)…`;
    case "model": return `downloading the model: ${of} (the first time only; this browser keeps it)…`;
    case "cached": return `reading the model from this browser's cache (${megabytes(total)}, not downloaded again)…`;
    case "preparing": return `preparing ONNX Runtime and the model${backend ? ` (${backend})` : ""}…`;
    case "measuring": return `measuring this device with a blank ${side}-px picture…`;
    case "computing": return `computing the picture on this device${backend ? ` (${backend})` : ""}…`;
    default: throw new Error(`no words for the step ${step}`);
  }
}
