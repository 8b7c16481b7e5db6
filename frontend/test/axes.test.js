import assert from "node:assert/strict";
import { test } from "node:test";

import { bytesAxis } from "../src/axes.js";

const colours = { text: "#5b6470", grid: "rgba(0, 0, 0, 0.1)" };

/** What Chart.js does with the axis for data from ``min`` to ``max``: its ticks and labels. */
function drawAxis(min, max, title) {
  const axis = bytesAxis(colours, title);
  const scale = { min, max };
  axis.afterDataLimits(scale);
  axis.afterBuildTicks(scale);
  const labels = scale.ticks.map((tick, i) => axis.ticks.callback(tick.value, i, scale.ticks));
  return { axis, scale, values: scale.ticks.map((tick) => tick.value), labels };
}

test("it ticks a Pareto chart's planned bytes at round binary sizes", () => {
  // The strategies planned 200,000 to 300,000 bytes: Chart.js's own ticks read
  // "195.3 KiB, 293.0 KiB"; these step by 32 KiB.
  const { values, labels } = drawAxis(200_000, 300_000, "planned bytes");

  assert.deepEqual(labels, ["192 KiB", "224 KiB", "256 KiB", "288 KiB", "320 KiB"]);
  assert.deepEqual(values, [192, 224, 256, 288, 320].map((k) => k * 1024));
});

test("it labels every tick as a whole number of a binary unit, whatever the range", () => {
  const ranges = [[0, 900], [10_000, 11_000], [45_000, 102_000], [1_500_000, 9_000_000],
                  [3 * 1024 ** 3, 3.4 * 1024 ** 3], [65_536, 65_536]];
  for (const [min, max] of ranges) {
    const { values, labels } = drawAxis(min, max);
    const step = values[1] - values[0];

    assert.ok(Number.isInteger(Math.log2(step)), `${min}-${max}: step ${step}`);
    assert.ok(values.every((value, i) => i === 0 || value - values[i - 1] === step));
    assert.ok(values[0] <= min && values.at(-1) >= max, `${min}-${max}: ${labels}`);
    assert.ok(labels.every((label) => /^[\d,]+(\.\d{1,2})? (B|KiB|MiB|GiB)$/.test(label)), labels);
    assert.ok(values.length >= 3 && values.length <= 9, labels);
  }
});

test("it keeps every tick on the axis it spans", () => {
  // 44,600 to 90,000 bytes: the range widens to 40-96 KiB; working the ticks out again for
  // that range gave a 16 KiB step starting at 32 KiB, a label drawn below the chart.
  const { scale, values } = drawAxis(44_600, 90_000);

  assert.equal(values[0], scale.min);
  assert.equal(values.at(-1), scale.max);
  assert.ok(values.every((value) => value >= scale.min && value <= scale.max));
});

test("it names the axis when given a title", () => {
  assert.equal(drawAxis(0, 1024, "planned bytes").axis.title.text, "planned bytes");
  assert.equal(drawAxis(0, 1024).axis.title, undefined);
});

test("a logarithmic axis ticks powers of two over a range hundreds of times wide", async () => {
  const { logBytesAxis } = await import("../src/axes.js");
  const axis = logBytesAxis(colours, "planned intermediates");
  // ResNet-18's need from 64x64 to 1024x1024: 331,680 to 83,890,080 bytes.
  const scale = { min: 331_680, max: 83_890_080 };
  axis.afterDataLimits(scale);
  axis.afterBuildTicks(scale);
  const values = scale.ticks.map((tick) => tick.value);

  assert.equal(axis.type, "logarithmic");
  // Nine doublings: a tick every fourfold keeps the labels apart.
  assert.deepEqual(values, [2 ** 18, 2 ** 20, 2 ** 22, 2 ** 24, 2 ** 26, 2 ** 28]);
  assert.equal(axis.ticks.callback(2 ** 20), "1 MiB");
  assert.ok(values[0] <= scale.min && values.at(-1) >= 83_890_080);
});

test("a logarithmic axis thins its ticks over a huge range", async () => {
  const { log2Ticks } = await import("../src/format.js");

  const ticks = log2Ticks(1000, 2 ** 40);

  assert.ok(ticks.length <= 9, ticks);
  assert.ok(ticks[0] <= 1000 && ticks.at(-1) >= 2 ** 40);
  assert.ok(ticks.every((t, i) => i === 0 || t / ticks[i - 1] === ticks[1] / ticks[0]));
});
