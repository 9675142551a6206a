// The vectors the library writes for the page scripts' twins (tests/js/vectors.py): from $VITVIZ_VECTORS when the
// Python side wrote them already (tests/test_page_scripts.py), else written now with $PYTHON (or python).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function vectors() {
  if (process.env.VITVIZ_VECTORS) return JSON.parse(readFileSync(process.env.VITVIZ_VECTORS, "utf8"));
  const dir = mkdtempSync(join(tmpdir(), "vitviz-vectors-")), file = join(dir, "vectors.json");
  try {
    execFileSync(process.env.PYTHON || "python", [new URL("./vectors.py", import.meta.url).pathname, file]);
    return JSON.parse(readFileSync(file, "utf8"));
  } finally { rmSync(dir, { recursive: true, force: true }); }
}
