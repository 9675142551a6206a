// Numbers as the server prints and packs them: Python's rounding, base64 parts, float16 widened to float32.
// An ES module (node --test imports it: tests/js/); the page gets its text with `export` taken off (render/web).

// Python's format(v, f".{d}f"): v's exact binary value rounded to d decimals, ties to even (JavaScript's toFixed
// sends a tie up: 12.5 -> "13" where Python writes "12"), so the page and the server print the same digits.
export function fixed(v, d) {
  if (!Number.isFinite(v)) return Number.isNaN(v) ? "nan" : v > 0 ? "inf" : "-inf";
  const sign = v < 0 || Object.is(v, -0) ? "-" : "", a = Math.abs(v);
  if (a >= 1e21) return sign + BigInt(a).toString() + (d > 0 ? "." + "0".repeat(d) : "");  // toFixed: "1e+21"
  const long = a.toFixed(Math.min(100, d + 40));
  const dot = long.indexOf("."), tail = long.slice(dot + 1 + d);
  if (/^50*$/.test(tail)) {  // exactly half way between two d-digit numbers: keep the even one
    const kept = long.slice(0, dot + 1 + d).replace(/\.$/, "");
    if (Number(kept[kept.length - 1]) % 2 === 0) return sign + kept;
  }
  return sign + a.toFixed(d);
}

export function percent(x, d = 1) { return fixed(100 * x, d) + "%"; }  // Python's f"{x:.{d}%}"

export function bytes(b64) {  // base64 -> Uint8Array
  const s = atob(b64), u = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) u[i] = s.charCodeAt(i);
  return u;
}

// little-endian float32, or IEEE float16 widened to float32 ("f2"), from base64 or raw bytes
export function floats(b64, dtype) {
  const u = typeof b64 === "string" ? bytes(b64) : new Uint8Array(b64);
  if (dtype !== "f2") return new Float32Array(u.buffer, u.byteOffset, u.byteLength / 4);
  if (typeof Float16Array !== "undefined") return new Float32Array(new Float16Array(u.buffer, u.byteOffset, u.byteLength / 2));
  return widenHalf(new Uint16Array(u.buffer, u.byteOffset, u.byteLength / 2));
}

export function widenHalf(h) {  // Uint16Array of IEEE float16 bits -> Float32Array (no native Float16Array)
  const out = new Float32Array(h.length);
  for (let i = 0; i < h.length; i++) {
    const s = h[i] & 0x8000 ? -1 : 1, e = (h[i] >> 10) & 31, f = h[i] & 1023;
    out[i] = e === 0 ? s * f * 2 ** -24 : e === 31 ? (f ? NaN : s * Infinity) : s * (1 + f / 1024) * 2 ** (e - 15);
  }
  return out;
}
