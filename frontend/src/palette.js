// Line colours, read from CSS custom properties so dark mode restyles the charts too.

const FALLBACK = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04"];

export function palette(element = document.documentElement) {
  const style = getComputedStyle(element);
  const read = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
  return {
    series: FALLBACK.map((colour, i) => read(`--series-${i + 1}`, colour)),
    // Of the colours made for series past the palette's: darker on light, lighter on dark.
    seriesLightness: read("--series-lightness", "42%"),
    bound: read("--bound", "#6b7280"),
    text: read("--text-muted", "#6b7280"),
    grid: read("--grid", "rgba(127, 127, 127, 0.2)"),
  };
}

/** The hue of a ``#rrggbb`` or ``hsl(...)`` colour in degrees; null for a grey or another form. */
export function hueOf(colour) {
  const hsl = /^hsl\(\s*([\d.]+)/i.exec(colour);
  if (hsl) return Number(hsl[1]) % 360;
  const hex = /^#([0-9a-f]{6})$/i.exec(colour);
  if (!hex) return null;
  const [r, g, b] = [0, 2, 4].map((i) => parseInt(hex[1].slice(i, i + 2), 16) / 255);
  const max = Math.max(r, g, b);
  const min = Math.min(r, g, b);
  const spread = max - min;
  // Below 15% saturation a colour reads as grey, whatever its hue.
  if (spread === 0 || spread / (1 - Math.abs(max + min - 1)) < 0.15) return null;
  let sector;
  if (max === r) sector = ((g - b) / spread + 6) % 6;
  else if (max === g) sector = (b - r) / spread + 2;
  else sector = (r - g) / spread + 4;
  return sector * 60;
}

/** The middle of the widest gap between ``hues`` round the colour wheel. */
function widestGapMiddle(hues) {
  if (!hues.length) return 0;
  const sorted = [...hues].sort((a, b) => a - b);
  let middle = 0;
  let widest = -1;
  sorted.forEach((hue, i) => {
    const next = i + 1 < sorted.length ? sorted[i + 1] : sorted[0] + 360;
    if (next - hue > widest) {
      widest = next - hue;
      middle = (hue + widest / 2) % 360;
    }
  });
  return middle;
}

const normalised = (colour) => colour.trim().toLowerCase();

/**
 * ``count`` colours, no two alike and none of ``reserved`` (the lower bound's grey, the
 * alerts' red): the palette's first, skipping repeats, then hues made in the widest gaps
 * left between those taken, so the eighth line is not the first one's blue again.
 */
export function seriesColours(count, base, { reserved = [], lightness = "42%" } = {}) {
  const taken = new Set(reserved.map(normalised));
  const colours = [];
  for (const colour of base) {
    if (colours.length === count) break;
    if (taken.has(normalised(colour))) continue;
    taken.add(normalised(colour));
    colours.push(colour);
  }
  const hues = [...taken].map(hueOf).filter((hue) => hue !== null);
  while (colours.length < count) {
    const hue = widestGapMiddle(hues);
    hues.push(hue);
    const colour = `hsl(${hue.toFixed(2)}, 70%, ${lightness})`;
    if (taken.has(normalised(colour))) continue; // only once gaps are narrower than 0.01°
    taken.add(normalised(colour));
    colours.push(colour);
  }
  return colours;
}

// A line drawn over an identical one hides it unless it has gaps: a line that runs along
// one before it is broken, in a pattern of its own (pixels, dash then gap), and each line
// is drawn above those before it.
export const DASHES = [[8, 4], [3, 3], [12, 4, 3, 4], [5, 5], [16, 4], [2, 5]];
// No triangles: they mark alerts. 7 styles against 6 dashes: a pair comes round again
// only after 42 lines.
export const POINT_STYLES = ["circle", "rect", "rectRot", "star", "crossRot", "rectRounded", "cross"];

/**
 * How each of ``count`` lines is drawn: its own colour (see ``seriesColours``) and point
 * style, the dash it takes where it runs along a line before it (none for the first), and
 * ``order`` so that each is drawn above those before it (Chart.js draws the lowest order
 * last, on top).
 */
export function seriesStyles(count, colours, { reserved = [] } = {}) {
  const lineColours = seriesColours(count, colours.series, {
    reserved,
    lightness: colours.seriesLightness,
  });
  return lineColours.map((colour, i) => ({
    colour,
    dash: i === 0 ? [] : DASHES[(i - 1) % DASHES.length],
    pointStyle: POINT_STYLES[i % POINT_STYLES.length],
    order: -i,
  }));
}
