// Planned bytes against latency, one point per strategy: the Pareto front and the chart
// data of the comparison page. Pure functions, so node --test covers them.

/** Points no other point beats on both planned bytes and latency, by ascending bytes. */
export function paretoFront(points) {
  const front = points.filter(
    (p) =>
      !points.some(
        (q) =>
          q.planned_bytes <= p.planned_bytes &&
          q.latency_ms <= p.latency_ms &&
          (q.planned_bytes < p.planned_bytes || q.latency_ms < p.latency_ms),
      ),
  );
  return front.sort((a, b) => a.planned_bytes - b.planned_bytes || a.latency_ms - b.latency_ms);
}

/**
 * Chart.js scatter datasets for one model: one dataset of points per side of the
 * comparison (base, head, ...), and a line along the Pareto front of the last side.
 */
export function scatterDatasets(entry) {
  const datasets = entry.sets.map((set) => ({
    label: set.label,
    data: set.points.map((p) => ({ x: p.latency_ms, y: p.planned_bytes, strategy: p.strategy })),
  }));
  const last = entry.sets[entry.sets.length - 1];
  if (last && last.points.length > 1) {
    datasets.push({
      label: `Pareto front (${last.label})`,
      front: true,
      showLine: true,
      data: paretoFront(last.points).map((p) => ({
        x: p.latency_ms,
        y: p.planned_bytes,
        strategy: p.strategy,
      })),
    });
  }
  return datasets;
}
