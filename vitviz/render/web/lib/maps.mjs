// The attention maths the page redoes from data sent once, each the twin of a library function (tests/js checks
// them against vectors the library writes). An ES module; the page gets its text with `export` taken off.

// matplotlib's lookup: v between lo and hi -> t in [0, 1] -> entry floor(256 t) of a 256-entry table; returned as
// the offset of that entry's red in a flat RGB table (3 bytes an entry)
export function colourIndex(v, lo, hi) {
  const t = hi - lo > 1e-12 ? Math.min(1, Math.max(0, (v - lo) / (hi - lo))) : 0;
  return 3 * Math.min(255, Math.floor(t * 256));
}

// DINO's threshold, as vitviz.core.attention.mass_mask: the fewest patches holding `keep` of the mass (largest
// first, ties by index), the running sum in float64 in the same order, so every digit is the library's. A native
// sort of the values finds the k-th largest; the mask is every value above it and the first ties.
// a: (N,) Float32Array -> {mask: (N,) Uint8Array, mass, frac, count}
const scratch = { n: 0, sorted: null, run: null };
export function massMask(a, keep) {
  const n = a.length;
  if (scratch.n !== n) Object.assign(scratch, { n, sorted: new Float32Array(n), run: new Float64Array(n) });
  const sorted = scratch.sorted, run = scratch.run;
  sorted.set(a);
  sorted.sort();  // ascending, numeric
  let acc = 0;
  for (let i = 0; i < n; i++) run[i] = acc += sorted[n - 1 - i];
  const total = run[n - 1], mask = new Uint8Array(n);
  if (!(total > 0)) return { mask: mask.fill(1), mass: 1, frac: 1, count: n };
  let k = n;
  for (let i = 0; i < n; i++) if (run[i] / total >= keep - 1e-12) { k = i + 1; break; }
  const v = sorted[n - k];
  let taken = 0;
  for (let i = 0; i < n; i++) if (a[i] > v) { mask[i] = 1; taken++; }
  for (let i = 0; i < n && taken < k; i++) if (a[i] === v) { mask[i] = 1; taken++; }
  return { mask, mass: run[k - 1] / total, frac: k / n, count: k };
}

// One query token's attention rows in every head, as vitviz.core.attention.LayerKeys.rows: softmax_j(q_i · k_j)
// over all T tokens in float64 (q arrives already scaled), then the patch keys kept (the `prefix` keys dropped, not
// renormalised). q, k: (H, T, d) flat; qi: the query's index among the patches.
// -> (H + 1, N) Float32Array, the last row the head mean.
export function queryRows(q, k, heads, tokens, d, prefix, qi) {
  const H = heads, T = tokens, P = prefix, n = T - P;
  const out = new Float32Array((H + 1) * n), s = new Float64Array(T), mean = new Float64Array(n), qv = new Float64Array(d);
  for (let h = 0; h < H; h++) {
    const qo = (h * T + P + qi) * d, kb = h * T * d;
    for (let c = 0; c < d; c++) qv[c] = q[qo + c];
    let mx = -Infinity;
    for (let j = 0, ko = kb; j < T; j++, ko += d) {
      let acc = 0;
      for (let c = 0; c < d; c++) acc += qv[c] * k[ko + c];
      s[j] = acc;
      if (acc > mx) mx = acc;
    }
    let sum = 0;
    for (let j = 0; j < T; j++) { s[j] = Math.exp(s[j] - mx); sum += s[j]; }
    for (let j = P; j < T; j++) { const v = s[j] / sum; out[h * n + j - P] = v; mean[j - P] += v; }
  }
  for (let i = 0; i < n; i++) out[H * n + i] = mean[i] / H;
  return out;
}

// One head's arithmetic for token t as the query, as vitviz.analyses.heads.trace: scores_j = q·k_j·scale,
// weights = softmax(scores), mixed = Σ_j weights_j v_j (float64), and the largest gap to the model's own output.
// q, k, v, out: (T, d) flat. -> {scores: (T,), weights: (T,), mixed: (d,), error}
export function headTrace(q, k, v, out, tokens, d, scale, t) {
  const T = tokens, qo = t * d, scores = new Float64Array(T);
  let mx = -Infinity;
  for (let j = 0; j < T; j++) {
    let acc = 0;
    for (let c = 0; c < d; c++) acc += q[qo + c] * k[j * d + c];
    scores[j] = acc * scale;
    if (scores[j] > mx) mx = scores[j];
  }
  const weights = new Float64Array(T);
  let sum = 0;
  for (let j = 0; j < T; j++) { weights[j] = Math.exp(scores[j] - mx); sum += weights[j]; }
  const mixed = new Float64Array(d);
  for (let j = 0; j < T; j++) {
    weights[j] /= sum;
    for (let c = 0; c < d; c++) mixed[c] += weights[j] * v[j * d + c];
  }
  let error = 0;
  for (let c = 0; c < d; c++) error = Math.max(error, Math.abs(mixed[c] - out[qo + c]));
  return { scores, weights, mixed, error };
}

const ARROWS = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
// an arrow key moves a (row, col) cell inside a (rows, cols) grid, stopping at the edges; any other key: null
export function stepCell(key, cell, grid) {
  if (!ARROWS[key]) return null;
  const [dr, dc] = ARROWS[key];
  return [Math.max(0, Math.min(grid[0] - 1, cell[0] + dr)), Math.max(0, Math.min(grid[1] - 1, cell[1] + dc))];
}

// softmax of a model's logits and its five likeliest classes, as the server's top 5 (float64 here)
export function softmax(z) {
  let mx = -Infinity; for (const v of z) mx = Math.max(mx, v);
  const e = Array.from(z, (v) => Math.exp(v - mx)), s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}
export function top5(logits, labels) {
  const p = softmax(logits);
  return p.map((v, i) => [labels ? labels[i] : `class ${i}`, v]).sort((a, b) => b[1] - a[1]).slice(0, 5);
}

// A map's top patch and its share, as vitviz.analyses.relevance.top_patch: the largest value (the first of equal
// ones) and its share of the map's positive total, Σ max(v, 0), in float64 (0 when nothing is positive).
// a: (N,) values; gw: the grid's columns. -> {row, col, share}
export function topPatch(a, gw) {
  let best = 0, positive = 0;
  for (let i = 0; i < a.length; i++) {
    if (a[i] > a[best]) best = i;
    if (a[i] > 0) positive += a[i];
  }
  const share = positive > 0 && a[best] > 0 ? a[best] / positive : 0;
  return { row: Math.floor(best / gw), col: best % gw, share };
}

// The explorer strip's cells after the layers and the rollout, from the payload's `class_maps`
// (render/browser.py class_maps_payload): one per class map, its part fetched when clicked, for the class it names;
// for a model without classes one cell saying there is no class to explain; a payload without them (computed on
// this device) one cell saying the server makes them. -> [{name, label, part (null: nothing to fetch), title}]
export function classCells(p) {
  const cm = p.class_maps;
  if (!cm) {
    return [{ name: "", label: "class maps: on the server", part: null,
              title: "relevance, AttnLRP and LeGrad need a backward pass through the model: the server makes them, not this device" }];
  }
  if (cm.target === null) {
    return [{ name: "", label: "no class to explain", part: null,
              title: `${p.model} has no classes, so there is no class score for relevance, AttnLRP or LeGrad to explain` }];
  }
  return cm.names.map((name) => {
    const label = cm.labels[name] || name, why = cm.left_out[name];
    return { name, label, part: why ? null : cm.parts[name],
             title: why || `${label} for class “${cm.class}”, the model's top class here (computed on the server when you click)` };
  });
}
