// Line colours, read from CSS custom properties so dark mode restyles the charts too.

const FALLBACK = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04"];

export function palette(element = document.documentElement) {
  const style = getComputedStyle(element);
  const read = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
  return {
    series: FALLBACK.map((colour, i) => read(`--series-${i + 1}`, colour)),
    bound: read("--bound", "#6b7280"),
    text: read("--text-muted", "#6b7280"),
    grid: read("--grid", "rgba(127, 127, 127, 0.2)"),
  };
}
