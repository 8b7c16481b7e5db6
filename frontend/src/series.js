// Turns the trend payload of /api/models/<id>/trend/ into Chart.js data: one x position
// per commit, one dataset per strategy, and the lower bound as a dataset of its own.
// Pure functions, so node --test covers them without a browser.

export const LOWER_BOUND_LABEL = "lower bound";

function seriesLabel(series, boardCount) {
  return boardCount > 1 ? `${series.strategy} @ ${series.board}` : series.strategy;
}

/** Every commit any series has, oldest first, each once. */
export function commitsOf(trend) {
  const bySha = new Map();
  for (const series of trend.series) {
    for (const point of series.points) {
      if (!bySha.has(point.commit_sha)) bySha.set(point.commit_sha, point);
    }
  }
  return [...bySha.values()].sort((a, b) =>
    a.committed_at < b.committed_at ? -1 : a.committed_at > b.committed_at ? 1 : 0,
  );
}

/**
 * Chart data for one measurement (``field`` of each point).
 * Commits a series has no result for are null, so the line shows a gap there.
 * With ``lowerBound`` a dataset of the per-commit lower bound is appended: the highest
 * bound any strategy reported, since each is a valid bound and the highest is tightest.
 */
export function buildDatasets(trend, field, { lowerBound = false } = {}) {
  const commits = commitsOf(trend);
  const index = new Map(commits.map((commit, i) => [commit.commit_sha, i]));
  const boardCount = new Set(trend.series.map((s) => s.board)).size;
  const datasets = trend.series.map((series) => {
    const data = commits.map(() => null);
    const points = commits.map(() => null);
    for (const point of series.points) {
      const i = index.get(point.commit_sha);
      data[i] = point[field] ?? null;
      points[i] = point;
    }
    return { label: seriesLabel(series, boardCount), strategy: series.strategy, data, points };
  });
  if (lowerBound) {
    const data = commits.map(() => null);
    for (const series of trend.series) {
      for (const point of series.points) {
        const bound = point.lower_bound_bytes;
        const i = index.get(point.commit_sha);
        if (bound !== null && bound !== undefined && (data[i] === null || bound > data[i])) {
          data[i] = bound;
        }
      }
    }
    datasets.push({ label: LOWER_BOUND_LABEL, lowerBound: true, data, points: commits });
  }
  return { labels: commits.map((commit) => commit.short_sha.slice(0, 7)), commits, datasets };
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
 * A dataset marking the commits with alerts of ``kind`` ("bytes" or "latency") on a chart
 * built by ``buildDatasets``: each marker sits at the alert's value, and carries the alert
 * (with its run_url) so a click opens that run. Alerts of commits the chart does not show
 * are left out. Null when there is nothing to mark.
 */
export function alertDataset(trend, chartData, kind) {
  const index = new Map(chartData.commits.map((commit, i) => [commit.commit_sha, i]));
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

/** Point radius for a line of ``count`` points: dots only while they stay apart. */
export function pointRadiusFor(count) {
  if (count > 200) return 0;
  if (count > 60) return 2;
  return 4;
}

/** A line under the charts saying how much of a long history they show; "" when all. */
export function downsampleNote(trend) {
  const shortened = trend.series.filter((s) => s.downsampled);
  if (!shortened.length) return "";
  const shown = Math.max(...shortened.map((s) => s.points.length));
  const total = Math.max(...shortened.map((s) => s.commits));
  return `Showing ${shown} of ${total} commits per line: every change of planned bytes where possible, and the lowest and highest of each stretch. Zoom in for detail.`;
}
