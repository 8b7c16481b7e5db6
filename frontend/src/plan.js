// The plan view: draws a result's plan.json as an SVG of buffers over time and address,
// with the peak instant marked; hovering a rectangle names the tensor and its producer.
// The drawing itself is timeline_svg.js, shared with the plan diff.

import { drawTimeline } from "./timeline_svg.js";

function start() {
  const container = document.querySelector("[data-timeline]");
  const payload = document.getElementById("timeline-data");
  if (!container || !payload) return;
  const timeline = JSON.parse(payload.textContent);
  drawTimeline(container, timeline);
  let pending = null;
  window.addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(() => drawTimeline(container, timeline), 150);
  });
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", start);
} else {
  start();
}
