// The plan view: draws a result's plan.json as an SVG of buffers over time and address,
// with the peak instant marked; hovering a rectangle names the tensor and its producer.

import { formatBytes, formatExactBytes } from "./format.js";
import { timelineGeometry } from "./timeline.js";

const SVG = "http://www.w3.org/2000/svg";

function element(name, attributes, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (parent) parent.appendChild(node);
  return node;
}

export function drawTimeline(container, timeline) {
  const svg = container.querySelector("[data-timeline-svg]");
  const hover = container.querySelector("[data-timeline-hover]");
  const width = Math.max(320, container.clientWidth);
  const height = 420;
  const geometry = timelineGeometry(timeline, { width, height });
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", String(width));
  svg.setAttribute("height", String(height));
  svg.replaceChildren();
  const { plot } = geometry;
  element("rect", { class: "plot", x: plot.x, y: plot.y, width: plot.width, height: plot.height }, svg);
  if (geometry.peak) {
    element("rect", { class: "peak", "data-peak": "", x: geometry.peak.x, y: plot.y, width: geometry.peak.width, height: plot.height }, svg);
  }
  const group = element("g", { class: "tensors" }, svg);
  geometry.rects.forEach((r, i) => {
    const rect = element("rect", {
      class: r.atPeak ? "tensor at-peak" : "tensor",
      "data-tensor": r.id,
      x: r.x.toFixed(2),
      y: r.y.toFixed(2),
      width: r.width.toFixed(2),
      height: r.height.toFixed(2),
      style: `--hue: ${(i * 47) % 360}`,
    }, group);
    const describe = `${r.id} (${r.producer || "no producer"}): ${formatBytes(r.size)} = ${formatExactBytes(r.size)} at offset ${r.offset}, live [${r.lower}, ${r.upper})`;
    element("title", {}, rect).textContent = describe;
    rect.addEventListener("mouseenter", () => { hover.textContent = describe; });
  });
  element("text", { class: "axis", x: plot.x, y: height - 6 }, svg).textContent = "0";
  element("text", { class: "axis", x: plot.x + plot.width, y: height - 6, "text-anchor": "end" }, svg).textContent = `step ${geometry.timeEnd}`;
  element("text", { class: "axis", x: plot.x - 4, y: plot.y + 10, "text-anchor": "end" }, svg).textContent = formatBytes(geometry.addressEnd);
  element("text", { class: "axis", x: plot.x - 4, y: plot.y + plot.height, "text-anchor": "end" }, svg).textContent = "0 B";
  container.dataset.rects = String(geometry.rects.length);
  container.dataset.ready = "true";
  return geometry;
}

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
