// Chart.js axis options shared by the charts. Pure, so node --test covers them.

import { binaryTicks, formatAxisBytes, log2Ticks } from "./format.js";

/**
 * A y axis of bytes whose ticks are multiples of a power of two bytes, labelled in round
 * binary units (32 KiB, 64 KiB, 96 KiB rather than 195.3 KiB, 293.0 KiB), from a tick at or
 * below the lowest value to one at or above the highest. ``title``: the axis's, if any;
 * ``ticksFor(min, max)``: the ticks for a data range, first and last spanning it.
 */
export function bytesAxis(colours, title = "", ticksFor = binaryTicks) {
  return {
    // Our own range: Chart.js would widen it to its decimal "nice" ticks.
    bounds: "data",
    afterDataLimits: (scale) => {
      const ticks = ticksFor(scale.min, scale.max);
      scale.min = ticks[0];
      scale.max = ticks[ticks.length - 1];
      // Kept for afterBuildTicks: ticks worked out again for the widened range may take a
      // coarser step and start below it, off the chart.
      scale.binaryTicks = ticks;
    },
    afterBuildTicks: (scale) => {
      scale.ticks = scale.binaryTicks.map((value) => ({ value }));
    },
    ticks: {
      color: colours.text,
      callback: (value, index, ticks) =>
        formatAxisBytes(value, ticks.length > 1 ? ticks[1].value - ticks[0].value : value),
    },
    grid: { color: colours.grid },
    ...(title ? { title: { display: true, text: title, color: colours.text } } : {}),
  };
}

/**
 * ``bytesAxis`` on a logarithmic scale: ticks at powers of two (``log2Ticks``), each labelled
 * in its own unit (256 KiB, 1 MiB, 4 MiB).
 */
export function logBytesAxis(colours, title = "") {
  return {
    ...bytesAxis(colours, title, log2Ticks),
    type: "logarithmic",
    ticks: {
      color: colours.text,
      callback: (value) => formatAxisBytes(value),
    },
  };
}
