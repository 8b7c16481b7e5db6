// Turns the trend payload of /api/models/<id>/trend/ (commits listed once, points as arrays
// of point_fields indexing them) into Chart.js data: one x position per commit, one
// dataset per strategy, and the lower bound as a dataset of its own.
// Pure functions, so node --test covers them without a browser.

import { seriesStyles } from "./palette.js";

export const LOWER_BOUND_LABEL = "lower bound";

function toolchainOf(series) {
  return series.toolchain?.label ?? "";
}

/** A line's name: its strategy, with its board and toolchain where the chart has several. */
export function seriesLabel(series, boardCount, toolchainCount = 1) {
  let label = boardCount > 1 ? `${series.strategy} @ ${series.board}` : series.strategy;
  if (toolchainCount > 1) label += ` · ${toolchainOf(series)}`;
  return label;
}

/** Where each measurement sits in a point array, unless the payload says otherwise. */
export const POINT_FIELDS = [
  "commit",
  "planned_bytes",
  "intermediate_bytes",
  "lower_bound_bytes",
  "latency_median_ms",
  "measured_peak_bytes",
  "board_ram_bytes",
];

function columnOf(trend, field) {
  const i = (trend.point_fields || POINT_FIELDS).indexOf(field);
  if (i < 0) throw new Error(`the trend has no ${field}`);
  return i;
}

/** Every commit drawn, oldest first, each once: the payload lists them so. */
export function commitsOf(trend) {
  return trend.commits || [];
}

/**
 * What a point shows on hover and opens on click: its commit, with the point's own run
 * page where it differs from the commit's (a seventh item in the point array).
 */
function pointInfo(commit, point, runColumn) {
  const runUrl = point[runColumn];
  return runUrl ? { ...commit, run_url: runUrl } : commit;
}

/**
 * Chart data for one measurement (``field`` of each point).
 * Commits a series has no result for are null, so the line shows a gap there.
 * With ``lowerBound`` a dataset of the per-commit lower bound is appended: the highest
 * bound any strategy reported, since each is a valid bound and the highest is tightest.
 */
export function buildDatasets(trend, field, { lowerBound = false } = {}) {
  const commits = commitsOf(trend);
  const column = columnOf(trend, field);
  const runColumn = (trend.point_fields || POINT_FIELDS).length;
  const boardCount = new Set(trend.series.map((s) => s.board)).size;
  const toolchainCount = new Set(trend.series.map(toolchainOf)).size;
  const datasets = trend.series.map((series) => {
    const data = commits.map(() => null);
    const points = commits.map(() => null);
    for (const point of series.points) {
      const i = point[0];
      data[i] = point[column] ?? null;
      points[i] = pointInfo(commits[i], point, runColumn);
    }
    return {
      label: seriesLabel(series, boardCount, toolchainCount),
      strategy: series.strategy,
      board: series.board,
      toolchain: toolchainOf(series),
      toolchainId: series.toolchain?.id ?? null,
      data,
      points,
    };
  });
  if (lowerBound) {
    const boundColumn = columnOf(trend, "lower_bound_bytes");
    const data = commits.map(() => null);
    for (const series of trend.series) {
      for (const point of series.points) {
        const bound = point[boundColumn];
        const i = point[0];
        if (bound !== null && bound !== undefined && (data[i] === null || bound > data[i])) {
          data[i] = bound;
        }
      }
    }
    datasets.push({ label: LOWER_BOUND_LABEL, lowerBound: true, data, points: commits });
  }
  return { labels: commits.map((commit) => commit.short.slice(0, 7)), commits, datasets };
}

/**
 * Only the lines of ``chartData`` that have a figure at some commit: a measurement only
 * some boards make (a micro board's RAM) charts those boards' lines, not empty ones.
 */
export function measuredOnly(chartData) {
  return { ...chartData, datasets: chartData.datasets.filter((d) => d.data.some((v) => v !== null)) };
}

/** The commit behind x position ``index``: what a tooltip shows and a click opens. */
export function commitAt(chartData, index) {
  return chartData.commits[index] ?? null;
}

/** The run page a click on point ``index`` of dataset ``datasetIndex`` opens. */
export function runUrlAt(chartData, datasetIndex, index) {
  const dataset = chartData.datasets[datasetIndex];
  const point = dataset?.points[index] ?? commitAt(chartData, index);
  return point?.run_url ?? null;
}

export const ALERTS_LABEL = "alerts";

/**
 * A dataset marking the commits with alerts of ``kind`` ("bytes", "ram" or "latency") on a chart
 * built by ``buildDatasets``: each marker sits at the alert's value, and carries the alert
 * (with its run_url) so a click opens that run. Alerts of commits the chart does not show
 * are left out. Null when there is nothing to mark.
 */
export function alertDataset(trend, chartData, kind) {
  const index = new Map(chartData.commits.map((commit, i) => [commit.sha, i]));
  const data = chartData.commits.map(() => null);
  const points = chartData.commits.map(() => null);
  let marked = 0;
  for (const alert of trend.alerts || []) {
    const i = index.get(alert.commit_sha);
    if (alert.kind !== kind || i === undefined) continue;
    if (data[i] === null || alert.value > data[i]) {
      if (data[i] === null) marked += 1;
      data[i] = alert.value;
      points[i] = alert;
    }
  }
  if (!marked) return null;
  return { label: ALERTS_LABEL, alerts: true, data, points, marked };
}

/**
 * Marks the lines of ``chartData`` (from ``buildDatasets``) that are the curve the page
 * opens on: ``focus`` names a strategy, and a board and toolchain id where it knows them
 * (the newest open alert's series). Returns how many lines it marked; none without a
 * strategy.
 */
export function markFocus(chartData, focus = {}) {
  let marked = 0;
  for (const dataset of chartData.datasets) {
    dataset.focus =
      Boolean(focus.strategy) &&
      !dataset.alerts &&
      !dataset.lowerBound &&
      dataset.strategy === focus.strategy &&
      (!focus.board || dataset.board === focus.board) &&
      (focus.toolchain == null || dataset.toolchainId === focus.toolchain);
    if (dataset.focus) marked += 1;
  }
  return marked;
}

/** Point radius for a line of ``count`` points: dots only while they stay apart. */
export function pointRadiusFor(count) {
  if (count > 200) return 0;
  if (count > 60) return 2;
  return 4;
}

/**
 * Which of ``lines`` (datasets of ``buildDatasets``) run along a line before them: at some
 * commit both have a value, less than half a percent of the chart's range apart, so that
 * one would hide the other.
 */
export function runsAlongEarlier(lines) {
  const values = lines.flatMap((line) => line.data.filter((value) => value !== null));
  const tolerance = values.length ? (Math.max(...values) - Math.min(...values)) * 0.005 : 0;
  return lines.map((line, k) =>
    lines.slice(0, k).some((earlier) =>
      line.data.some(
        (value, i) => value !== null && earlier.data[i] !== null && Math.abs(value - earlier.data[i]) <= tolerance,
      ),
    ),
  );
}

/**
 * Draws the datasets of ``buildDatasets`` (and ``alertDataset``) in ``colours`` (from
 * palette.js): each line in a colour and point style of its own, drawn above those before
 * it and broken where it runs along one of them, so two lines of the same values both
 * show; the lower bound dashed grey and the alerts as triangles, beneath the lines as
 * before. Returns ``chartData``.
 */
export function styleDatasets(chartData, colours) {
  const radius = pointRadiusFor(chartData.labels.length);
  const lines = chartData.datasets.filter((dataset) => !dataset.alerts && !dataset.lowerBound);
  const styles = seriesStyles(lines.length, colours, { reserved: [colours.bound, colours.alert] });
  const broken = runsAlongEarlier(lines);
  let next = 0;
  for (const dataset of chartData.datasets) {
    if (dataset.alerts) {
      Object.assign(dataset, {
        borderColor: colours.alert,
        backgroundColor: colours.alert,
        showLine: false,
        pointStyle: "triangle",
        pointRadius: 7,
        pointHoverRadius: 10,
        order: 2,
      });
    } else if (dataset.lowerBound) {
      Object.assign(dataset, {
        borderColor: colours.bound,
        backgroundColor: colours.bound,
        borderWidth: 1.5,
        borderDash: [6, 4],
        pointRadius: Math.min(2, radius),
        pointHoverRadius: 7,
        spanGaps: true,
        tension: 0,
        order: 1,
      });
    } else {
      const style = styles[next];
      const alongAnother = broken[next++];
      Object.assign(dataset, {
        borderColor: style.colour,
        backgroundColor: style.colour,
        // The curve the page opens on (``markFocus``) stands out from the others.
        borderWidth: dataset.focus ? 4 : 2,
        borderDash: alongAnother ? style.dash : [],
        pointStyle: style.pointStyle,
        pointRadius: radius,
        pointHoverRadius: 7,
        // Hollow, so the points of the lines beneath show through (in the legend too).
        pointBackgroundColor: alongAnother ? "transparent" : style.colour,
        pointBorderWidth: alongAnother ? 1.5 : 1,
        spanGaps: true,
        tension: 0,
        order: style.order,
      });
    }
  }
  return chartData;
}

/** Legend entries and tooltip lines in the datasets' own order, whatever order draws them. */
export const byDatasetIndex = (a, b) => a.datasetIndex - b.datasetIndex;

/** A line under the charts saying how much of a long history they show; "" when all. */
export function downsampleNote(trend) {
  const shortened = trend.series.filter((s) => s.downsampled);
  if (!shortened.length) return "";
  const shown = Math.max(...shortened.map((s) => s.points.length));
  const total = Math.max(...shortened.map((s) => s.commits));
  return `Showing ${shown} of ${total} commits per line: every change of planned bytes where possible, and the lowest and highest of each stretch. Zoom in for detail.`;
}
