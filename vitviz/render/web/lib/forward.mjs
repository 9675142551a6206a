// The Forward-pass view's numbers from the device graph's outputs (vitviz/models/device.py, output_names), each the
// twin of what vitviz.views.forward shows from the server's forward (tests/js checks them against vectors the
// library writes). An ES module; the page gets its text with `export` taken off.

// The stages of the manifest's plan (views.forward.device_plan) at a picture's sizes: "H", "W" (pixels), "N"
// (patches), "T" (tokens) replaced by their numbers. sizes: {H, W, N, T}
export function stagesAt(plan, sizes) {
  return plan.stages.map((s) => ({ ...s, shape: s.shape.map((n) => (typeof n === "string" ? sizes[n] : n)) }));
}

// the view's first sentence, as show_forward_pass writes it
export function forwardSummary(model, grid, patch, tokens, width, layers) {
  return `One forward of ${model} on this picture: ${grid[0]}×${grid[1]} = ${grid[0] * grid[1]} patches of ` +
    `${patch}×${patch} pixels become ${tokens} tokens of width ${width}, which pass through ${layers} blocks.`;
}

// the indices of the k largest values, ties by index (numpy's argsort(-p, kind="stable")[:k])
export function largest(p, k) {
  return Array.from(p, (v, i) => i).sort((a, b) => (p[b] - p[a]) || (a - b)).slice(0, k);
}

// a class name as the figures shorten it (views.forward._short): before its first comma, cut to n characters
export function shortName(name, n = 18) {
  const first = String(name).split(",")[0];
  return first.length <= n ? first : `${first.slice(0, n - 1)}…`;
}

// the classes the lens's table shows (views.forward.lens_classes): each layer's top 5, then the model's own, in
// order of first appearance, at most 10
export function lensClasses(lens, probs, k = 5, most = 10) {
  const chosen = [];
  for (const row of [...lens, probs]) for (const i of largest(row, k)) if (!chosen.includes(i)) chosen.push(i);
  return chosen.slice(0, most);
}

// softmax in float64 (the server's probabilities: softmax of the logits as float64)
function softmax64(z) {
  let mx = -Infinity;
  for (const v of z) mx = Math.max(mx, v);
  const e = Float64Array.from(z, (v) => Math.exp(v - mx));
  let s = 0;
  for (const v of e) s += v;
  return e.map((v) => v / s);
}

// The graph's outputs (flat Float32Arrays, as ONNX Runtime gives them) as the view's numbers.
// out: {norms (L+1, T), updates (2, L), cosine (L+1), embedded (N), final (T), [logits (C), lens (L, C),
// lens_patches (L, N)]}; dims: {layers, prefix, grid}
// -> {patchNorms: (L+1) × (N), prefixNorms: (L+1) × (P), attn, mlp, cosine, embedded (N), final (N), and with a
//     head: probs (C, float64), target, lens: L × (C), lensPatches: L × (N), chosen: the lens table's classes}
export function forwardNumbers(out, dims) {
  const L = dims.layers, P = dims.prefix, N = dims.grid[0] * dims.grid[1], T = P + N;
  const rows = (a, n, count) => Array.from({ length: count }, (_, i) => a.subarray(i * n, (i + 1) * n));
  const norms = rows(out.norms, T, L + 1);
  const got = {
    patchNorms: norms.map((r) => r.subarray(P)), prefixNorms: norms.map((r) => Array.from(r.subarray(0, P))),
    attn: Array.from(out.updates.subarray(0, L)), mlp: Array.from(out.updates.subarray(L, 2 * L)),
    cosine: Array.from(out.cosine), embedded: out.embedded, final: out.final.subarray(P), probs: null,
  };
  if (!out.logits || !out.lens) return got;
  const C = out.logits.length;
  got.probs = softmax64(out.logits);
  got.target = largest(got.probs, 1)[0];
  got.lens = rows(out.lens, C, L);
  got.lensPatches = rows(out.lens_patches, N, L);
  got.chosen = lensClasses(got.lens, got.probs);
  return got;
}

// each patch's norm of a (1, 3, H, W) picture's P×P patches (the flattened patches' glimpse): (gh·gw) float64
export function patchNorms(x, H, W, patch) {
  const gh = H / patch, gw = W / patch, out = new Float64Array(gh * gw);
  for (let c = 0; c < 3; c++) {
    for (let y = 0; y < H; y++) {
      const row = (c * H + y) * W, o = Math.floor(y / patch) * gw;
      for (let xx = 0; xx < W; xx++) { const v = x[row + xx]; out[o + Math.floor(xx / patch)] += v * v; }
    }
  }
  return out.map(Math.sqrt);
}
