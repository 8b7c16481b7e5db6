import assert from "node:assert/strict";
import { test } from "node:test";

import { hueOf, seriesColours, seriesStyles } from "../src/palette.js";

// The light theme's palette (peakwatch.css), the lower bound's grey and the alerts' red.
const SEVEN = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04"];
const GREY = "#6b7280";
const RED = "#b91c1c";

test("it gives every line a colour of its own, past the palette's seven", () => {
  const colours = seriesColours(20, SEVEN, { reserved: [GREY, RED] });

  assert.equal(colours.length, 20);
  assert.equal(new Set(colours).size, 20);
  assert.deepEqual(colours.slice(0, 7), SEVEN);
  assert.ok(!colours.includes(GREY) && !colours.includes(RED));
});

test("it puts the colours past the palette's in the hues it leaves free", () => {
  const [eighth, ninth] = seriesColours(9, SEVEN).slice(7);
  const taken = SEVEN.map(hueOf);
  const distance = (a, b) => Math.min(Math.abs(a - b), 360 - Math.abs(a - b));

  // Each new hue is at least 20 degrees from any hue already drawn.
  assert.ok(taken.every((hue) => distance(hue, hueOf(eighth)) >= 20), eighth);
  assert.ok([...taken, hueOf(eighth)].every((hue) => distance(hue, hueOf(ninth)) >= 20), ninth);
});

test("it skips a palette colour given twice or reserved for something else", () => {
  const colours = seriesColours(4, ["#2563EB", "#2563eb", GREY, "#16a34a"], { reserved: [GREY] });

  assert.equal(new Set(colours.map((c) => c.toLowerCase())).size, 4);
  assert.deepEqual(colours.slice(0, 2), ["#2563EB", "#16a34a"]);
  assert.ok(!colours.includes(GREY));
});

test("it reads the hue of the palette's colours, and none of a grey", () => {
  assert.equal(Math.round(hueOf("#dc2626")), 0);
  assert.equal(Math.round(hueOf("#16a34a")), 142);
  assert.equal(hueOf("hsl(91.5, 70%, 42%)"), 91.5);
  assert.equal(hueOf(GREY), null);
  assert.equal(hueOf("rgb(1, 2, 3)"), null);
});

test("it draws each line over the ones before it, broken so that they show through", () => {
  const styles = seriesStyles(12, { series: SEVEN, seriesLightness: "42%" });

  assert.equal(new Set(styles.map((s) => s.colour)).size, 12);
  assert.equal(new Set(styles.map((s) => JSON.stringify([s.dash, s.pointStyle]))).size, 12);
  // The dash a line takes where it runs along one before it; the first has none before it.
  assert.deepEqual(styles[0].dash, []);
  assert.ok(styles.slice(1).every((s) => s.dash.length >= 2 && s.dash.every((n) => n > 0)));
  // Triangles are the alerts'.
  assert.ok(styles.every((s) => s.pointStyle !== "triangle"));
  // Chart.js draws the lowest order last: each line lies above every line before it.
  assert.ok(styles.every((s, i) => i === 0 || s.order < styles[i - 1].order));
});
