// The comparison page: planned bytes against latency per model, one point per strategy.
// Reads the payload the page embeds with json_script (the same ?format=json serves).

import { Chart, Legend, LinearScale, LineElement, PointElement, ScatterController, Tooltip } from "chart.js";

import { bytesAxis } from "./axes.js";
import { formatBytes, formatMs } from "./format.js";
import { palette, seriesStyles } from "./palette.js";
import { scatterDatasets } from "./pareto.js";
import { byDatasetIndex } from "./series.js";

Chart.register(LinearScale, PointElement, LineElement, ScatterController, Tooltip, Legend);

function drawModel(canvas, entry, colours) {
  const sides = scatterDatasets(entry);
  // Each side its own colour and point style, drawn above the one before, so a strategy
  // that did not move shows both its points.
  const styles = seriesStyles(sides.filter((d) => !d.front).length, colours, { reserved: [colours.bound] });
  let next = 0;
  const datasets = sides.map((dataset) => {
    if (dataset.front) {
      return {
        ...dataset,
        borderColor: colours.bound,
        backgroundColor: colours.bound,
        borderDash: [6, 4],
        pointRadius: 0,
        pointHoverRadius: 0,
        order: 1,
      };
    }
    const style = styles[next++];
    return {
      ...dataset,
      borderColor: style.colour,
      backgroundColor: style.colour,
      pointStyle: style.pointStyle,
      pointRadius: 5,
      pointHoverRadius: 8,
      order: style.order,
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
        y: bytesAxis(colours, "planned bytes"),
      },
      plugins: {
        legend: { labels: { color: colours.text, usePointStyle: true, sort: byDatasetIndex } },
        tooltip: {
          itemSort: byDatasetIndex,
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
