// Draws a plan's buffer timeline as an SVG: a rectangle per placed tensor, the peak instant
// as a band, the axes' ends labelled. Used by the plan view and, twice, by the plan diff.

import { formatBytes, formatExactBytes } from "./format.js";
import { timelineGeometry } from "./timeline.js";

const SVG = "http://www.w3.org/2000/svg";

function element(name, attributes, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (parent) parent.appendChild(node);
  return node;
}

/**
 * Draw ``timeline`` into ``container`` (its ``[data-timeline-svg]`` and
 * ``[data-timeline-hover]``). ``highlight``: ids of tensors to mark (the plan diff's
 * changed ones); ``scale``: ``{timeEnd, addressEnd}`` shared with another drawing.
 */
export function drawTimeline(container, timeline, { highlight = new Set(), scale = {}, height = 420 } = {}) {
  const svg = container.querySelector("[data-timeline-svg]");
  const hover = container.querySelector("[data-timeline-hover]");
  const width = Math.max(280, container.clientWidth);
  const geometry = timelineGeometry(timeline, { width, height, scale });
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
  // Highlighted tensors are drawn last, so no other rectangle hides their outline.
  const order = [...geometry.rects.keys()].sort(
    (a, b) => highlight.has(geometry.rects[a].id) - highlight.has(geometry.rects[b].id),
  );
  for (const i of order) {
    const r = geometry.rects[i];
    const classes = ["tensor"];
    if (r.atPeak) classes.push("at-peak");
    if (highlight.has(r.id)) classes.push("changed");
    const rect = element("rect", {
      class: classes.join(" "),
      "data-tensor": r.id,
      x: r.x.toFixed(2),
      y: r.y.toFixed(2),
      width: r.width.toFixed(2),
      height: r.height.toFixed(2),
      style: `--hue: ${(i * 47) % 360}`,
    }, group);
    const describe = `${r.id} (${r.producer || "no producer"}): ${formatBytes(r.size)} = ${formatExactBytes(r.size)} at offset ${r.offset}, live [${r.lower}, ${r.upper})${highlight.has(r.id) ? ", changed" : ""}`;
    element("title", {}, rect).textContent = describe;
    if (hover) rect.addEventListener("mouseenter", () => { hover.textContent = describe; });
  }
  element("text", { class: "axis", x: plot.x, y: height - 6 }, svg).textContent = "0";
  element("text", { class: "axis", x: plot.x + plot.width, y: height - 6, "text-anchor": "end" }, svg).textContent = `step ${geometry.timeEnd}`;
  element("text", { class: "axis", x: plot.x - 4, y: plot.y + 10, "text-anchor": "end" }, svg).textContent = formatBytes(geometry.addressEnd);
  element("text", { class: "axis", x: plot.x - 4, y: plot.y + plot.height, "text-anchor": "end" }, svg).textContent = "0 B";
  container.dataset.rects = String(geometry.rects.length);
  container.dataset.ready = "true";
  return geometry;
}
