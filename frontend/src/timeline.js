// Geometry of a plan's buffer timeline: each tensor a rectangle, time across and arena
// address up. Pure functions, so node --test covers them without a browser.

/** Tensors live at instant ``time``: ``lower <= time < upper``, as the planner counts. */
export function liveAt(tensor, time) {
  return time !== null && time !== undefined && tensor.lower <= time && time < tensor.upper;
}

/** The last step and the highest address a plan reaches (at least 1 each). */
export function timelineEnds(timeline) {
  const tensors = timeline.tensors || [];
  const placed = tensors.filter((t) => t.offset !== null && t.offset !== undefined);
  return {
    timeEnd: Math.max(1, ...tensors.map((t) => t.upper)),
    addressEnd: Math.max(1, timeline.arena_bytes || 0, ...placed.map((t) => t.offset + t.size)),
  };
}

/**
 * Rectangles of every placed tensor (those with an offset) in a ``width`` x ``height``
 * box with ``margin`` pixels for the axes on the left and at the bottom.
 * Returns { rects, peak: {x, width} | null, timeEnd, addressEnd, unplaced }.
 */
export function timelineGeometry(timeline, { width, height, margin = { left: 64, bottom: 24, top: 8, right: 8 }, scale = {} }) {
  const tensors = timeline.tensors || [];
  const placed = tensors.filter((t) => t.offset !== null && t.offset !== undefined);
  const ends = timelineEnds(timeline);
  // A shared scale (two plans drawn one above the other) may reach further than this plan.
  const timeEnd = Math.max(ends.timeEnd, scale.timeEnd || 0);
  const addressEnd = Math.max(ends.addressEnd, scale.addressEnd || 0);
  const plotWidth = Math.max(1, width - margin.left - margin.right);
  const plotHeight = Math.max(1, height - margin.top - margin.bottom);
  const x = (time) => margin.left + (plotWidth * time) / timeEnd;
  const y = (address) => margin.top + plotHeight - (plotHeight * address) / addressEnd;
  const peakTime = timeline.peak?.time ?? null;
  const rects = placed.map((t) => {
    const top = y(t.offset + t.size);
    return {
      id: t.id,
      producer: t.producer ?? null,
      size: t.size,
      lower: t.lower,
      upper: t.upper,
      offset: t.offset,
      x: x(t.lower),
      y: top,
      // At least a pixel, so a one-step, few-byte tensor still shows.
      width: Math.max(1, x(t.upper) - x(t.lower)),
      height: Math.max(1, y(t.offset) - top),
      atPeak: liveAt(t, peakTime),
    };
  });
  const peak =
    peakTime === null ? null : { x: x(peakTime), width: Math.max(1, x(peakTime + 1) - x(peakTime)) };
  return { rects, peak, timeEnd, addressEnd, unplaced: tensors.length - placed.length, plot: { x: margin.left, y: margin.top, width: plotWidth, height: plotHeight } };
}
