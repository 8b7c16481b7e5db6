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
