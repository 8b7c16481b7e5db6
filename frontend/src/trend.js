// The model trend page: planned bytes and latency over commits, one line per strategy.
// Reads the payload the page embeds with json_script (the same the trend API serves).

import {
  CategoryScale,
  Chart,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
} from "chart.js";

import { formatBytes, formatExactBytes, formatMs } from "./format.js";
import { palette } from "./palette.js";
import { buildDatasets, commitAt, runUrlAt } from "./series.js";

Chart.register(CategoryScale, LinearScale, LineController, LineElement, PointElement, Tooltip, Legend);

function styleDatasets(chartData, colours) {
  let next = 0;
  for (const dataset of chartData.datasets) {
    const colour = dataset.lowerBound ? colours.bound : colours.series[next++ % colours.series.length];
    Object.assign(dataset, {
      borderColor: colour,
      backgroundColor: colour,
      borderWidth: dataset.lowerBound ? 1.5 : 2,
      borderDash: dataset.lowerBound ? [6, 4] : [],
      pointRadius: dataset.lowerBound ? 2 : 4,
      pointHoverRadius: 7,
      spanGaps: true,
      tension: 0,
    });
  }
  return chartData;
}

function drawChart(canvas, chartData, { formatValue, formatExact, colours }) {
  const openPoint = (event, chart) => {
    const [nearest] = chart.getElementsAtEventForMode(event, "nearest", { intersect: false }, true);
    if (!nearest) return;
    const url = runUrlAt(chartData, nearest.datasetIndex, nearest.index);
    if (url) window.location.assign(url);
  };
  return new Chart(canvas, {
    type: "line",
    data: { labels: chartData.labels, datasets: chartData.datasets },
    options: {
      // Drawn at once, so data-ready means the points are where they will stay.
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      interaction: { mode: "index", intersect: false },
      onClick: (event, _elements, chart) => openPoint(event, chart),
      onHover: (event, elements, chart) => {
        chart.canvas.style.cursor = elements.length ? "pointer" : "default";
      },
      scales: {
        x: {
          title: { display: true, text: "commit", color: colours.text },
          ticks: { color: colours.text },
          grid: { color: colours.grid },
        },
        y: {
          ticks: { color: colours.text, callback: (value) => formatValue(value) },
          grid: { color: colours.grid },
        },
      },
      plugins: {
        legend: { labels: { color: colours.text, usePointStyle: true } },
        tooltip: {
          callbacks: {
            title: (items) => {
              const commit = commitAt(chartData, items[0].dataIndex);
              return commit ? `${commit.short_sha.slice(0, 7)} ${commit.title}` : "";
            },
            afterTitle: (items) => {
              const commit = commitAt(chartData, items[0].dataIndex);
              return commit ? `by ${commit.author || "unknown"}` : "";
            },
            label: (item) => {
              const exact = formatExact ? ` (${formatExact(item.parsed.y)})` : "";
              return `${item.dataset.label}: ${formatValue(item.parsed.y)}${exact}`;
            },
            footer: () => "click to open the run",
          },
        },
      },
    },
  });
}

export function drawTrend(container, trend) {
  const colours = palette();
  const planned = styleDatasets(buildDatasets(trend, "planned_bytes", { lowerBound: true }), colours);
  const latency = styleDatasets(buildDatasets(trend, "latency_median_ms"), colours);
  const charts = [
    drawChart(container.querySelector("#chart-planned-bytes"), planned, {
      formatValue: formatBytes,
      formatExact: formatExactBytes,
      colours,
    }),
    drawChart(container.querySelector("#chart-latency"), latency, { formatValue: formatMs, colours }),
  ];
  // For tests and for poking at the charts from the console.
  window.peakwatchCharts = charts;
  container.dataset.ready = "true";
  return charts;
}

function start() {
  const container = document.querySelector("[data-trend-charts]");
  const payload = document.getElementById("trend-data");
  if (!container || !payload) return;
  drawTrend(container, JSON.parse(payload.textContent));
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", start);
} else {
  start();
}
