// The model trend page: planned bytes, measured peak, latency and (where a micro board
// measures it) the board's RAM over commits, one line per strategy.
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
import zoomPlugin from "chartjs-plugin-zoom";

import { bytesAxis } from "./axes.js";
import { formatBytes, formatExactBytes, formatMs } from "./format.js";
import { palette } from "./palette.js";
import {
  alertDataset,
  buildDatasets,
  byDatasetIndex,
  commitAt,
  downsampleNote,
  markFocus,
  measuredOnly,
  runUrlAt,
  styleDatasets,
} from "./series.js";
import { openingPoint, trendAtPoint, trendPoints } from "./shape_points.js";

Chart.register(CategoryScale, LinearScale, LineController, LineElement, PointElement, Tooltip, Legend, zoomPlugin);

function withAlerts(trend, chartData, kind) {
  const alerts = alertDataset(trend, chartData, kind);
  if (alerts) chartData.datasets.push(alerts);
  return chartData;
}

function drawChart(canvas, chartData, { formatValue, formatExact, colours, binary = false }) {
  const openPoint = (event, chart) => {
    // The end of a drag that zoomed or panned is not a click on a point.
    if (chart.isZoomingOrPanning?.()) return;
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
        y: binary
          ? bytesAxis(colours)
          : { ticks: { color: colours.text, callback: (value) => formatValue(value) }, grid: { color: colours.grid } },
      },
      plugins: {
        legend: { labels: { color: colours.text, usePointStyle: true, sort: byDatasetIndex } },
        zoom: {
          // Drag a range to zoom into it; shift-drag pans, ctrl-wheel zooms; x only.
          zoom: {
            drag: { enabled: true, threshold: 8 },
            wheel: { enabled: true, modifierKey: "ctrl" },
            pinch: { enabled: true },
            mode: "x",
          },
          pan: { enabled: true, mode: "x", modifierKey: "shift" },
          limits: { x: { minRange: 2 } },
        },
        tooltip: {
          itemSort: byDatasetIndex,
          callbacks: {
            title: (items) => {
              const commit = commitAt(chartData, items[0].dataIndex);
              return commit ? `${commit.short.slice(0, 7)} ${commit.title}` : "";
            },
            afterTitle: (items) => {
              const commit = commitAt(chartData, items[0].dataIndex);
              return commit ? `by ${commit.author || "unknown"}` : "";
            },
            label: (item) => {
              const exact = formatExact ? ` (${formatExact(item.parsed.y)})` : "";
              if (item.dataset.alerts) {
                const alert = item.dataset.points[item.dataIndex];
                const at = alert.shape_label ? ` at ${alert.shape_label}` : "";
                return `alert (${alert.state}) ${alert.strategy} @ ${alert.board}${at}: ${formatValue(alert.baseline_value)} → ${formatValue(alert.value)}`;
              }
              return `${item.dataset.label}: ${formatValue(item.parsed.y)}${exact}`;
            },
            footer: () => "click to open the run",
          },
        },
      },
    },
  });
}

export function drawTrend(container, trend, focus = {}) {
  const colours = { ...palette(), alert: getComputedStyle(document.documentElement).getPropertyValue("--bad").trim() || "#b91c1c" };
  const focused = (chartData) => {
    markFocus(chartData, focus);
    return styleDatasets(chartData, colours);
  };
  const planned = focused(withAlerts(trend, buildDatasets(trend, "planned_bytes", { lowerBound: true }), "bytes"));
  const measured = focused(buildDatasets(trend, "measured_peak_bytes"));
  const latency = focused(withAlerts(trend, buildDatasets(trend, "latency_median_ms"), "latency"));
  const charts = [
    drawChart(container.querySelector("#chart-planned-bytes"), planned, {
      formatValue: formatBytes,
      formatExact: formatExactBytes,
      colours,
      binary: true,
    }),
    drawChart(container.querySelector("#chart-measured-peak"), measured, {
      formatValue: formatBytes,
      formatExact: formatExactBytes,
      colours,
      binary: true,
    }),
    drawChart(container.querySelector("#chart-latency"), latency, { formatValue: formatMs, colours }),
  ];
  // A micro board measures the RAM its image uses: charted where some line has it.
  const ram = measuredOnly(buildDatasets(trend, "board_ram_bytes"));
  const ramCard = container.querySelector("[data-board-ram-chart]");
  if (ramCard) {
    ramCard.hidden = !ram.datasets.length;
    if (ram.datasets.length) {
      charts.push(
        drawChart(ramCard.querySelector("canvas"), focused(withAlerts(trend, ram, "ram")), {
          formatValue: formatBytes,
          formatExact: formatExactBytes,
          colours,
          binary: true,
        }),
      );
    }
  }
  const note = document.querySelector("[data-downsample-note]");
  if (note) note.textContent = downsampleNote(trend);
  // For tests and for poking at the charts from the console.
  window.peakwatchCharts = charts;
  container.dataset.ready = "true";
  return charts;
}

/**
 * A model with a shape axis has a line per strategy at each point: the picker shows one
 * point at a time (``?point=`` in the address keeps the choice), since h=64 and h=1024
 * on one chart would flatten the smaller into the axis.
 */
function pickPoint(trend, redraw, opened) {
  const points = trendPoints(trend);
  const picker = document.querySelector("[data-point-picker]");
  if (!points.length || !picker) return null;
  const select = picker.querySelector("select");
  // Where the news is (the newest open alert's point) unless the address asks for another.
  const chosen = openingPoint(points, new URLSearchParams(window.location.search).get("point"), opened);
  for (const label of points) select.add(new Option(label, label, false, label === chosen));
  select.value = chosen;
  picker.hidden = false;
  select.addEventListener("change", () => {
    const url = new URL(window.location.href);
    url.searchParams.set("point", select.value);
    window.history.replaceState(null, "", url);
    redraw(select.value);
  });
  return select.value;
}

function start() {
  const container = document.querySelector("[data-trend-charts]");
  const payload = document.getElementById("trend-data");
  if (!container || !payload) return;
  const trend = JSON.parse(payload.textContent);
  const opening = container.dataset;
  const focus = {
    strategy: opening.focusStrategy || "",
    board: opening.focusBoard || "",
    toolchain: opening.focusToolchain ? Number(opening.focusToolchain) : null,
  };
  let charts = [];
  const draw = (point) => {
    charts.forEach((chart) => chart.destroy());
    charts = drawTrend(container, point === null ? trend : trendAtPoint(trend, point), focus);
    container.dataset.point = point ?? "";
    // Each chart names the point its figures are of.
    for (const caption of container.querySelectorAll("[data-chart-point]")) {
      caption.textContent = point ? ` at ${point}` : "";
    }
  };
  const reset = document.querySelector("[data-reset-zoom]");
  if (reset) reset.addEventListener("click", () => charts.forEach((chart) => chart.resetZoom()));
  draw(pickPoint(trend, draw, opening.openPoint || null));
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", start);
} else {
  start();
}
