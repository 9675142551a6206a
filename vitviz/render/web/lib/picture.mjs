// The picture prepared in the browser exactly as the server prepares it for a model: Pillow's resampling
// (Resample.c, 8-bit channels) and the model's input policy (vitviz/models/runner.py). An ES module (tests/js checks
// it against Pillow and the runner); the page gets its text with `export` taken off (render/web).
const FILTERS = {
  bicubic: { support: 2, f: (x) => { const a = -0.5; x = Math.abs(x);
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
    return 0; } },
  bilinear: { support: 1, f: (x) => { x = Math.abs(x); return x < 1 ? 1 - x : 0; } },
};
const PRECISION_BITS = 32 - 8 - 2;

export function coeffs(inSize, outSize, filter) {  // Pillow's precompute_coeffs + normalize_coeffs_8bpc
  const scale = inSize / outSize, fscale = Math.max(scale, 1), support = filter.support * fscale;
  const ksize = Math.ceil(support) * 2 + 1, bounds = new Int32Array(outSize * 2), kk = new Float64Array(outSize * ksize);
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale, ss = 1 / fscale;
    let xmin = Math.trunc(center - support + 0.5); if (xmin < 0) xmin = 0;
    let xmax = Math.trunc(center + support + 0.5); if (xmax > inSize) xmax = inSize;
    xmax -= xmin;
    let ww = 0;
    const w = new Float64Array(xmax);
    for (let x = 0; x < xmax; x++) { w[x] = filter.f((x + xmin - center + 0.5) * ss); ww += w[x]; }
    for (let x = 0; x < xmax; x++) {
      const v = (ww !== 0 ? w[x] / ww : w[x]) * (1 << PRECISION_BITS);
      kk[xx * ksize + x] = Math.trunc(v < 0 ? v - 0.5 : v + 0.5);
    }
    bounds[xx * 2] = xmin; bounds[xx * 2 + 1] = xmax;
  }
  return { ksize, bounds, kk };
}

export function clip8(ss) { const v = Math.floor(ss / (1 << PRECISION_BITS)); return v < 0 ? 0 : v > 255 ? 255 : v; }

// (h, w, 3) uint8 -> (oh, ow, 3): the horizontal pass, then the vertical one, as Pillow's ImagingResample does
export function resample(src, w, h, ow, oh, name) {
  const filter = FILTERS[name];
  let cur = src, cw = w;
  if (ow !== w) {
    const { ksize, bounds, kk } = coeffs(w, ow, filter), out = new Uint8Array(h * ow * 3);
    for (let y = 0; y < h; y++) {
      for (let xx = 0; xx < ow; xx++) {
        const xmin = bounds[xx * 2], xmax = bounds[xx * 2 + 1], k = xx * ksize;
        for (let c = 0; c < 3; c++) {
          let ss = 1 << (PRECISION_BITS - 1);
          for (let x = 0; x < xmax; x++) ss += cur[(y * w + x + xmin) * 3 + c] * kk[k + x];
          out[(y * ow + xx) * 3 + c] = clip8(ss);
        }
      }
    }
    cur = out; cw = ow;
  }
  if (oh !== h) {
    const { ksize, bounds, kk } = coeffs(h, oh, filter), out = new Uint8Array(oh * cw * 3);
    for (let yy = 0; yy < oh; yy++) {
      const ymin = bounds[yy * 2], ymax = bounds[yy * 2 + 1], k = yy * ksize;
      for (let x = 0; x < cw; x++) {
        for (let c = 0; c < 3; c++) {
          let ss = 1 << (PRECISION_BITS - 1);
          for (let y = 0; y < ymax; y++) ss += cur[((y + ymin) * cw + x) * 3 + c] * kk[k + y];
          out[(yy * cw + x) * 3 + c] = clip8(ss);
        }
      }
    }
    cur = out;
  }
  return cur;
}

export function roundHalfEven(x) { const r = Math.round(x); return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r; }

// The picture fitted as every view on the server fits it for this model (vitviz/models/runner.py, input_policy):
// "checkpoint", timm's eval transform: shortest side to m.resize (torchvision: the long side int(resize * long /
// short)), centre crop m.side; "keep", the whole picture: shortest side to m.side (Python's round of the other,
// core/images.py _short_side_to), Pillow's bicubic, the long side cut to whole patches, centred. Then float32
// (x / 255 - mean) / std. Returns {rgb: the fitted (H, W, 3) picture, x: NCHW, H, W}.
export function fitShape(w, h, m) {  // [resized width, resized height, fitted width, fitted height, left, top]
  if (m.policy === "keep") {
    const s = m.side / Math.min(w, h);
    const rh = Math.max(m.side, roundHalfEven(h * s)), rw = Math.max(m.side, roundHalfEven(w * s));
    const H = Math.floor(rh / m.patch) * m.patch, W = Math.floor(rw / m.patch) * m.patch;
    return [rw, rh, W, H, Math.floor((rw - W) / 2), Math.floor((rh - H) / 2)];
  }
  const short = Math.min(w, h), long = Math.max(w, h), other = Math.trunc(m.resize * long / short);
  const [rw, rh] = w <= h ? [m.resize, other] : [other, m.resize];
  const S = m.side;
  return [rw, rh, S, S, roundHalfEven((rw - S) / 2), roundHalfEven((rh - S) / 2)];
}

export function prepare(rgb, w, h, m) {
  const [rw, rh, W, H, left, top] = fitShape(w, h, m);
  const resized = (rw === w && rh === h) ? rgb : resample(rgb, w, h, rw, rh, m.interpolation);
  const crop = new Uint8Array(H * W * 3), x = new Float32Array(3 * H * W), f = Math.fround;
  for (let y = 0; y < H; y++) {
    for (let xx = 0; xx < W; xx++) {
      const sy = y + top, sx = xx + left, inside = sy >= 0 && sy < rh && sx >= 0 && sx < rw;
      for (let c = 0; c < 3; c++) {
        const v = inside ? resized[(sy * rw + sx) * 3 + c] : 0;
        crop[(y * W + xx) * 3 + c] = v;
        x[c * H * W + y * W + xx] = f(f(f(v / 255) - f(m.mean[c])) / f(m.std[c]));
      }
    }
  }
  return { rgb: crop, x, H, W };
}

// ---- the largest short side this device affords (its probe) ----------------------------------------------------
// A forward's multiply-accumulates for T tokens, m.cost.token·T + m.cost.pair·T² (vitviz.models.device.cost).
export function forwardMacs(cost, tokens) { return cost.token * tokens + cost.pair * tokens * tokens; }

// The manifest as it would be at another short side (vitviz.models.device.preprocessing: resize = ⌊side / crop_pct⌋).
export function atSide(m, side) { return { ...m, side, resize: Math.floor(side / m.crop_pct) }; }

// The tokens a w×h picture makes for the model at the manifest's side (its fitted grid and the prefix).
export function tokensAt(w, h, m) {
  const f = fitShape(w, h, m);
  return m.prefix + (f[2] / m.patch) * (f[3] / m.patch);
}

// The server's forward for a w×h picture at the short side `side` (m.side when not given): m.server_ms is its
// forward at m.side × m.side (vitviz.models.device.server_ms), scaled by the cost model to the picture's tokens
// there (a 3:2 photo on a model that keeps the whole picture has more tokens than the square: it takes longer).
export function serverMsFor(w, h, m, side = m.side) {
  if (!m.server_ms || !m.cost) return m.server_ms || 0;
  const square = forwardMacs(m.cost, m.prefix + Math.floor(m.side / m.patch) ** 2);
  return m.server_ms * forwardMacs(m.cost, tokensAt(w, h, atSide(m, side))) / square;
}

// The largest short side, from m.side down to m.smallest in whole patches, whose forward here is expected within
// what it may take: msPerMac (this device's measured milliseconds per multiply-accumulate for this graph) times
// the side's multiply-accumulates, against three times the server's forward of the picture at that side
// (serverMsFor) and never less than floorMs. {side, ms: expected here, allowed} or null when no side is.
export function largestSide(w, h, m, msPerMac, floorMs) {
  for (let s = m.side; s >= m.smallest; s -= m.patch) {
    const macs = forwardMacs(m.cost, tokensAt(w, h, atSide(m, s))), ms = msPerMac * macs;
    const allowed = Math.max(3 * serverMsFor(w, h, m, s), floorMs);
    if (ms <= allowed) return { side: s, ms, allowed };
  }
  return null;
}

// The server's name for a picture's pixels (vitviz.models.runner.image_key: core/digest.content of the (h, w, 3)
// uint8 bytes and the shape's repr, joined by 0x1f; SHA-256, first 40 hex digits): the page knows one of the
// shapes model's own scenes without sending it. Async (the browser's SubtleCrypto).
export async function pictureKey(rgb, h, w) {
  const tail = new TextEncoder().encode(`\x1f(${h}, ${w}, 3)`), all = new Uint8Array(rgb.length + tail.length);
  all.set(rgb); all.set(tail, rgb.length);
  const d = new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", all));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("").slice(0, 40);
}
