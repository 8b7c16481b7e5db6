// Human units, formatted exactly as dashboard/templatetags/peakwatch.py does, so a chart
// tooltip and a table cell on the same page agree.

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
export const MISSING = "—";

export function formatBytes(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return MISSING;
  let size = Number(value);
  let unit = 0;
  while (Math.abs(size) >= 1024 && unit < UNITS.length - 1) {
    size /= 1024;
    unit += 1;
  }
  if (unit === 0) return `${Math.trunc(value)} B`;
  return `${size.toFixed(1)} ${UNITS[unit]}`;
}

export function formatExactBytes(value) {
  if (value === null || value === undefined) return MISSING;
  return `${Number(value).toLocaleString("en-US")} bytes`;
}

export function formatMs(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return MISSING;
  if (value < 10) return `${value.toFixed(3)} ms`;
  if (value < 1000) return `${value.toFixed(1)} ms`;
  return `${(value / 1000).toFixed(2)} s`;
}

/** ``2026-11-21T00:14:55.123+00:00`` -> ``2026-11-21 00:14:55 UTC``, as the server renders. */
export function formatTimestamp(iso) {
  if (!iso) return MISSING;
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return MISSING;
  return `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/**
 * Tick values for a bytes axis spanning ``min`` to ``max``: about ``count`` multiples of a
 * power of two, from one at or below ``min`` to one at or above ``max``, so the labels
 * read 64 KiB, 128 KiB, 192 KiB rather than 48.8, 97.7, 146.5 KiB.
 */
export function binaryTicks(min, max, count = 6) {
  let low = Number.isFinite(min) ? min : 0;
  let high = Number.isFinite(max) ? max : 1;
  if (!(high > low)) {
    // A flat line: a band around it, so it sits mid-chart rather than on an edge.
    const pad = Math.max(1, Math.abs(high) / 8);
    low = Math.max(min >= 0 ? 0 : -Infinity, low - pad);
    high += pad;
  }
  const step = Math.max(1, 2 ** Math.ceil(Math.log2((high - low) / count)));
  const first = Math.floor(low / step) * step;
  const ticks = [];
  for (let value = first; value < high + step; value += step) {
    ticks.push(value);
    if (value >= high) break;
  }
  return ticks;
}

/**
 * Ticks for a logarithmic axis from ``min`` to ``max`` (both positive): powers of two, every
 * ``2**k``-th so that there are at most ``count`` + 1, from one at or below ``min`` to one at
 * or above ``max``. Memory against shape spans hundreds of times from the smallest point to
 * the largest; a linear axis flattens the small points onto the floor.
 */
export function log2Ticks(min, max, count = 8) {
  const low = Math.floor(Math.log2(Math.max(1, Number.isFinite(min) ? min : 1)));
  let high = Math.ceil(Math.log2(Math.max(1, Number.isFinite(max) ? max : 1)));
  if (high <= low) high = low + 1;
  const every = Math.max(1, Math.ceil((high - low) / count));
  const ticks = [];
  for (let k = low; ; k += every) {
    ticks.push(2 ** k);
    if (k >= high) break;
  }
  return ticks;
}

/**
 * An axis label for ``value`` on an axis of ``binaryTicks`` ``step`` apart: in the largest
 * unit whose quarters the step still divides (so 1.25 MiB, but 1,088 KiB rather than
 * 1.0625 MiB), with no trailing zeros.
 */
export function formatAxisBytes(value, step = value) {
  if (value === null || value === undefined || Number.isNaN(value)) return MISSING;
  if (value === 0) return "0 B";
  let unit = 0;
  const size = Math.max(Math.abs(value), Math.abs(step));
  while (unit < UNITS.length - 1 && size >= 1024 ** (unit + 1) && Math.abs(step) * 4 >= 1024 ** (unit + 1)) {
    unit += 1;
  }
  const scaled = value / 1024 ** unit;
  const text = Number(scaled.toFixed(2)).toLocaleString("en-US", { maximumFractionDigits: 2 });
  return `${text} ${UNITS[unit]}`;
}
