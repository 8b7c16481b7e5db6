// The comparison page: planned bytes against latency per model, one point per strategy.
// Reads the payload the page embeds with json_script (the same ?format=json serves).

import { Chart, Legend, LinearScale, LineElement, PointElement, ScatterController, Tooltip } from "chart.js";

import { formatBytes, formatMs } from "./format.js";
import { palette } from "./palette.js";
import { scatterDatasets } from "./pareto.js";

Chart.register(LinearScale, PointElement, LineElement, ScatterController, Tooltip, Legend);

function drawModel(canvas, entry, colours) {
  const datasets = scatterDatasets(entry).map((dataset, i) => {
    const colour = dataset.front ? colours.bound : colours.series[i % colours.series.length];
    return {
      ...dataset,
      borderColor: colour,
      backgroundColor: colour,
      borderDash: dataset.front ? [6, 4] : [],
      pointRadius: dataset.front ? 0 : 5,
      pointHoverRadius: dataset.front ? 0 : 8,
    };
  });
  return new Chart(canvas, {
    type: "scatter",
    data: { datasets },
    options: {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      scales: {
        x: {
          title: { display: true, text: "median latency", color: colours.text },
          ticks: { color: colours.text, callback: (value) => formatMs(value) },
          grid: { color: colours.grid },
        },
        y: {
          title: { display: true, text: "planned bytes", color: colours.text },
          ticks: { color: colours.text, callback: (value) => formatBytes(value) },
          grid: { color: colours.grid },
        },
      },
      plugins: {
        legend: { labels: { color: colours.text, usePointStyle: true } },
        tooltip: {
          callbacks: {
            label: (item) =>
              `${item.dataset.label} ${item.raw.strategy}: ${formatBytes(item.raw.y)}, ${formatMs(item.raw.x)}`,
          },
        },
      },
    },
  });
}

function start() {
  const container = document.querySelector("[data-pareto-charts]");
  const payload = document.getElementById("pareto-data");
  if (!container || !payload) return;
  const data = JSON.parse(payload.textContent);
  const colours = palette();
  const charts = data.models.map((entry) =>
    drawModel(container.querySelector(`canvas[data-pareto-model="${CSS.escape(entry.model)}"]`), entry, colours),
  );
  window.peakwatchCharts = charts;
  container.dataset.ready = "true";
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", start);
} else {
  start();
}
