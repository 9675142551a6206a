// A lesson in the page: its bar (caption, step k of n, Back and Next) and each step's link. The lessons shipped
// with vitviz come in the page's spec (vitviz/app/panels.py page_spec: name -> {title, steps: [{caption, link}]}).
// Pure functions of the spec and the store's state (tests/js/store.test.mjs).

const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

// the link of step k (1 = first) of lesson `name`, keeping the page's modes (projector, contrast, device)
export function stepLink(spec, name, k, state) {
  const lesson = (spec.lessons || {})[name];
  if (!lesson || k < 1 || k > lesson.steps.length) return null;
  const q = new URLSearchParams(lesson.steps[k - 1].link.replace(/^\?/, ""));
  q.set("lesson", name);
  q.set("step", String(k));
  for (const mode of spec.kept || []) if (state && state[mode]) q.set(mode, "1");
  return "?" + q.toString();
}

// the lesson bar's HTML for `state` ("" when no lesson is open); a lesson this page does not have says so
export function lessonBar(spec, state) {
  if (!state.lesson) return "";
  const lesson = (spec.lessons || {})[state.lesson];
  if (!lesson) {
    return `<p>This link names a lesson this page does not have (${esc(String(state.lesson).slice(0, 40))}).</p>` +
      `<button type="button" data-go="leave">Leave the lesson</button>`;
  }
  const total = lesson.steps.length;
  const k = Math.min(Math.max(parseInt(state.step, 10) || 1, 1), total);
  const step = lesson.steps[k - 1];
  const back = k > 1 ? `<button type="button" data-go="back" data-link="${esc(stepLink(spec, state.lesson, k - 1, state))}">Back</button>` : "";
  const next = k < total ? `<button type="button" data-go="next" data-link="${esc(stepLink(spec, state.lesson, k + 1, state))}">Next</button>` : "";
  return `<div class="vx-lesson-head"><h2 class="vx-lesson-title">${esc(lesson.title)}</h2>` +
    `<span class="vx-lesson-count">step ${k} of ${total}</span></div>` +
    `<div class="vx-caption" tabindex="0">${esc(step.caption)}</div>` +
    `<div class="vx-lesson-go">${back}${next}<button type="button" data-go="leave">Leave the lesson</button></div>`;
}
