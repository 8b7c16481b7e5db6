// Memory against input shape: the model page's "Memory by shape" chart (one curve per
// strategy, or per commit of one strategy) and the comparison page's base/head overlays.
// Reads the payloads the pages embed with json_script (the same the API serves).

import {
  CategoryScale, Chart, Legend, LinearScale, LineController, LineElement, LogarithmicScale,
  PointElement, Tooltip,
} from "chart.js";

import { bytesAxis, logBytesAxis } from "./axes.js";
import { formatBytes, formatExactBytes } from "./format.js";
import { palette, seriesStyles } from "./palette.js";
import { byDatasetIndex } from "./series.js";
import { overlayDatasets, shapeDatasets } from "./shape_points.js";

Chart.register(
  CategoryScale, LinearScale, LogarithmicScale, LineController, LineElement, PointElement, Tooltip,
  Legend,
);

function style(datasets, colours) {
  const lines = datasets.filter((d) => !d.reserved);
  const styles = seriesStyles(lines.length, colours, { reserved: [colours.bound] });
  let next = 0;
  return datasets.map((dataset) => {
    if (dataset.reserved) {
      return { ...dataset, borderColor: colours.bound, backgroundColor: colours.bound, borderDash: [6, 4], pointRadius: 2, borderWidth: 1.5 };
    }
    const s = styles[next++];
    return {
      ...dataset,
      borderColor: s.colour,
      backgroundColor: s.colour,
      pointStyle: s.pointStyle,
      pointRadius: 4,
      pointHoverRadius: 7,
      borderWidth: 2,
      spanGaps: true,
      tension: 0,
    };
  });
}

function drawLines(canvas, chartData, colours, yTitle, scale = "logarithmic") {
  return new Chart(canvas, {
    type: "line",
    data: { labels: chartData.labels, datasets: style(chartData.datasets, colours) },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      interaction: { mode: "index", intersect: false },
      onClick: (event, _elements, chart) => {
        const [nearest] = chart.getElementsAtEventForMode(event, "nearest", { intersect: false }, true);
        const url = nearest && chart.data.datasets[nearest.datasetIndex].planUrls?.[nearest.index];
        if (url) window.location.assign(url);
      },
      scales: {
        x: { title: { display: true, text: "shape point", color: colours.text }, ticks: { color: colours.text }, grid: { color: colours.grid } },
        y: (scale === "linear" ? bytesAxis : logBytesAxis)(colours, yTitle),
      },
      plugins: {
        legend: { labels: { color: colours.text, usePointStyle: true, sort: byDatasetIndex } },
        tooltip: {
          itemSort: byDatasetIndex,
          callbacks: {
            label: (item) => `${item.dataset.label}: ${formatBytes(item.parsed.y)} (${formatExactBytes(item.parsed.y)})`,
            footer: () => "click to open the plan at this point",
          },
        },
      },
    },
  });
}

const MEASURE_TITLES = { intermediate_bytes: "planned intermediates", planned_bytes: "planned bytes" };

function startModelChart(container, colours) {
  const shapes = JSON.parse(document.getElementById("shapes-data").textContent);
  const canvas = container.querySelector("canvas");
  const controls = {
    mode: container.querySelector("[data-shape-mode]"),
    measure: container.querySelector("[data-shape-measure]"),
    strategy: container.querySelector("[data-shape-strategy]"),
    scale: container.querySelector("[data-shape-scale]"),
  };
  let chart = null;
  const draw = () => {
    const options = {
      mode: controls.mode?.value || "strategy",
      measure: controls.measure?.value || "intermediate_bytes",
      strategy: controls.strategy?.value || null,
      scale: controls.scale?.value || "logarithmic",
    };
    if (controls.strategy) controls.strategy.disabled = options.mode !== "commit";
    chart?.destroy();
    chart = drawLines(
      canvas, shapeDatasets(shapes, options), colours, MEASURE_TITLES[options.measure], options.scale,
    );
    window.peakwatchShapeChart = chart;
    container.dataset.mode = options.mode;
  };
  for (const control of Object.values(controls)) control?.addEventListener("change", draw);
  draw();
  container.dataset.ready = "true";
}

function startOverlays(container, colours) {
  const data = JSON.parse(document.getElementById("shape-compare-data").textContent);
  const charts = {};
  for (const entry of data.models) {
    const figure = container.querySelector(`[data-shape-overlay="${CSS.escape(entry.model)}"]`);
    if (!figure) continue;
    const select = figure.querySelector("[data-overlay-strategy]");
    const draw = () => {
      charts[entry.model]?.destroy();
      charts[entry.model] = drawLines(figure.querySelector("canvas"), overlayDatasets(entry, select?.value), colours, "planned bytes");
    };
    select?.addEventListener("change", draw);
    draw();
  }
  // For tests and for poking at the charts from the console.
  window.peakwatchShapeOverlays = charts;
  container.dataset.ready = "true";
}

function start() {
  const colours = palette();
  const chart = document.querySelector("[data-shape-chart]");
  if (chart && document.getElementById("shapes-data")) startModelChart(chart, colours);
  const overlays = document.querySelector("[data-shape-overlays]");
  if (overlays && document.getElementById("shape-compare-data")) startOverlays(overlays, colours);
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", start);
} else {
  start();
}
