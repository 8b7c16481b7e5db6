// Memory against input shape: shape points ("h=64,w=64") ordered by their values, and the
// Chart.js datasets of the model page's "Memory by shape" chart and of the comparison
// page's base/head overlay. Pure functions, so node --test covers them without a browser.

/** A label's values as numbers in the label's own symbol order; text values after numbers. */
export function pointKey(label) {
  return (label || "").split(",").map((part) => {
    const value = part.slice(part.indexOf("=") + 1);
    return /^\d+$/.test(value) ? [0, Number(value), ""] : [1, 0, value];
  });
}

/** Orders two shape labels by their values: h=64 before h=256 (as text it would not). */
export function comparePoints(a, b) {
  const ka = pointKey(a);
  const kb = pointKey(b);
  for (let i = 0; i < Math.max(ka.length, kb.length); i += 1) {
    if (ka[i] === undefined) return -1;
    if (kb[i] === undefined) return 1;
    for (let j = 0; j < 3; j += 1) {
      if (ka[i][j] < kb[i][j]) return -1;
      if (ka[i][j] > kb[i][j]) return 1;
    }
  }
  return 0;
}

/** The distinct non-empty shape labels of a trend payload's series, ordered by value. */
export function trendPoints(trend) {
  const labels = new Set((trend.series || []).map((s) => s.shape_label || "").filter(Boolean));
  return [...labels].sort(comparePoints);
}

/**
 * The point the trend opens on, of ``points`` (ordered by value): the one the address
 * asks for, else the one the page opens on (the newest open alert's), else the first.
 */
export function openingPoint(points, asked, opened) {
  if (points.includes(asked)) return asked;
  if (points.includes(opened)) return opened;
  return points[0] ?? null;
}

/**
 * The trend payload narrowed to one shape point: its series and its alerts. ``label`` ""
 * keeps the series without a shape axis; a payload without shape labels comes back whole.
 */
export function trendAtPoint(trend, label) {
  if (!trendPoints(trend).length) return trend;
  const at = (item) => (item.shape_label || "") === label;
  return { ...trend, series: trend.series.filter(at), alerts: (trend.alerts || []).filter(at) };
}

export const RESERVED_LABEL = "TVM reserved at the bound";

/**
 * Datasets of the "Memory by shape" chart from the shapes payload (/api/models/<id>/shapes/).
 * ``mode`` "strategy": one per strategy at the newest commit, plus TVM's reservation at the
 * bound (dashed) when ``measure`` is intermediate_bytes, the figure it compares with;
 * ``mode`` "commit": one per commit drawn for ``strategy``, oldest first.
 */
export function shapeDatasets(shapes, { mode = "strategy", measure = "intermediate_bytes", strategy = null } = {}) {
  const labels = shapes.points.map((p) => p.label);
  let datasets;
  if (mode === "commit") {
    const chosen = strategy || shapes.best_strategy || shapes.strategies[0];
    datasets = (shapes.commit_curves[chosen] || []).map((curve) => {
      const commit = shapes.commits[curve.commit];
      return {
        label: `${commit.short.slice(0, 7)} ${commit.title}`.trim(),
        commit: commit.sha,
        strategy: chosen,
        data: curve[measure],
        planUrls: curve.plan_urls,
      };
    });
  } else {
    datasets = shapes.curves.map((curve) => ({
      label: curve.strategy,
      strategy: curve.strategy,
      data: curve[measure],
      planUrls: curve.plan_urls,
    }));
    const reserved = shapes.reserved_at_bound || [];
    if (measure === "intermediate_bytes" && reserved.some((value) => value !== null)) {
      datasets.push({ label: RESERVED_LABEL, reserved: true, data: reserved, planUrls: [] });
    }
  }
  return { labels, datasets };
}

/** The comparison overlay for one model's entry of the shapes comparison: base and head. */
export function overlayDatasets(entry, strategy) {
  const chosen = strategy || entry.default_strategy || entry.strategies[0];
  const curve = entry.curves[chosen] || { base: [], head: [], base_urls: [], head_urls: [] };
  return {
    labels: entry.points,
    datasets: [
      { label: "base", side: "base", strategy: chosen, data: curve.base, planUrls: curve.base_urls },
      { label: "head", side: "head", strategy: chosen, data: curve.head, planUrls: curve.head_urls },
    ],
  };
}
