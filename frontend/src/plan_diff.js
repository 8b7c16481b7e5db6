// The plan diff: both plans' timelines, one above the other on the same scale, with the
// tensors that changed (resized, moved, a new lifetime, new or gone) outlined on both.

import { timelineEnds } from "./timeline.js";
import { drawTimeline } from "./timeline_svg.js";

function start() {
  const payload = document.getElementById("plan-diff-data");
  const containers = [...document.querySelectorAll("[data-diff-timeline]")];
  if (!payload || !containers.length) return;
  const { base, head, changed } = JSON.parse(payload.textContent);
  // Paired tensors may carry different names on the two sides (alloc3 before, alloc4
  // after): each side outlines its own.
  const highlight = { base: new Set(changed.base), head: new Set(changed.head) };
  const ends = [base, head].map(timelineEnds);
  const scale = {
    timeEnd: Math.max(...ends.map((e) => e.timeEnd)),
    addressEnd: Math.max(...ends.map((e) => e.addressEnd)),
  };
  const draw = () => {
    for (const container of containers) {
      const side = container.dataset.diffTimeline === "base" ? "base" : "head";
      const timeline = side === "base" ? base : head;
      // Shorter on a phone: both plans stay on screen together.
      const height = container.clientWidth < 600 ? 220 : 300;
      drawTimeline(container, timeline, { highlight: highlight[side], scale, height });
    }
  };
  draw();
  let pending = null;
  window.addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(draw, 150);
  });
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", start);
} else {
  start();
}
