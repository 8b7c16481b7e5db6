import assert from "node:assert/strict";
import { test } from "node:test";

import {
  comparePoints,
  openingPoint,
  overlayDatasets,
  RESERVED_LABEL,
  shapeDatasets,
  trendAtPoint,
  trendPoints,
} from "../src/shape_points.js";

test("points order by their values, not as text", () => {
  const labels = ["h=256,w=256", "h=1024,w=1024", "h=64,w=64"];
  assert.deepEqual([...labels].sort(comparePoints), ["h=64,w=64", "h=256,w=256", "h=1024,w=1024"]);
});

test("points order by the first symbol, then the next", () => {
  const labels = ["h=64,w=256", "h=256,w=64", "h=64,w=64"];
  assert.deepEqual([...labels].sort(comparePoints), ["h=64,w=64", "h=64,w=256", "h=256,w=64"]);
});

test("a value that is no number sorts after the numbers instead of failing", () => {
  assert.deepEqual(["seq=n", "seq=128"].sort(comparePoints), ["seq=128", "seq=n"]);
});

const trend = {
  series: [
    { strategy: "none", shape_label: "seq=512" },
    { strategy: "none", shape_label: "seq=128" },
    { strategy: "best-fit", shape_label: "seq=512" },
  ],
  alerts: [{ shape_label: "seq=512" }, { shape_label: "seq=128" }],
};

test("a trend's points are its series' labels, each once, ordered", () => {
  assert.deepEqual(trendPoints(trend), ["seq=128", "seq=512"]);
  assert.deepEqual(trendPoints({ series: [{ strategy: "none" }] }), []);
});

test("a trend at one point keeps that point's series and alerts", () => {
  const at = trendAtPoint(trend, "seq=512");
  assert.deepEqual(at.series.map((s) => s.strategy), ["none", "best-fit"]);
  assert.equal(at.alerts.length, 1);
  // Without a shape axis the trend is left whole.
  const plain = { series: [{ strategy: "none" }], alerts: [] };
  assert.equal(trendAtPoint(plain, ""), plain);
});

const shapes = {
  points: [{ label: "h=64" }, { label: "h=256" }],
  commits: [
    { sha: "a".repeat(40), short: "aaaaaaaaaa", title: "first" },
    { sha: "b".repeat(40), short: "bbbbbbbbbb", title: "second" },
  ],
  strategies: ["best-fit", "tvm-stock"],
  best_strategy: "best-fit",
  curves: [
    { strategy: "best-fit", intermediate_bytes: [10, 40], planned_bytes: [11, 41], plan_urls: ["/a", "/b"] },
    { strategy: "tvm-stock", intermediate_bytes: [15, 60], planned_bytes: [16, 61], plan_urls: ["/c", "/d"] },
  ],
  commit_curves: {
    "best-fit": [
      { commit: 0, intermediate_bytes: [10, 30], planned_bytes: [11, 31], plan_urls: [null, null] },
      { commit: 1, intermediate_bytes: [10, 40], planned_bytes: [11, 41], plan_urls: [null, null] },
    ],
    "tvm-stock": [{ commit: 1, intermediate_bytes: [15, 60], planned_bytes: [16, 61], plan_urls: [null, null] }],
  },
  reserved_at_bound: [60, 60],
};

test("by strategy: one curve each, and the reservation beside the intermediates", () => {
  const chart = shapeDatasets(shapes);
  assert.deepEqual(chart.labels, ["h=64", "h=256"]);
  assert.deepEqual(
    chart.datasets.map((d) => [d.label, d.data]),
    [["best-fit", [10, 40]], ["tvm-stock", [15, 60]], [RESERVED_LABEL, [60, 60]]],
  );
  // The reservation is of intermediates: never drawn against totals.
  const totals = shapeDatasets(shapes, { measure: "planned_bytes" });
  assert.deepEqual(totals.datasets.map((d) => d.label), ["best-fit", "tvm-stock"]);
});

test("by commit: one curve per commit of the chosen strategy, the best by default", () => {
  const chart = shapeDatasets(shapes, { mode: "commit" });
  assert.deepEqual(
    chart.datasets.map((d) => [d.label, d.data]),
    [["aaaaaaa first", [10, 30]], ["bbbbbbb second", [10, 40]]],
  );
  assert.equal(shapeDatasets(shapes, { mode: "commit", strategy: "tvm-stock" }).datasets.length, 1);
});

test("the comparison overlay has base and head of the chosen strategy", () => {
  const entry = {
    points: ["h=64", "h=256"],
    strategies: ["best-fit"],
    default_strategy: "best-fit",
    curves: { "best-fit": { base: [1, 2], head: [1, 3], base_urls: [], head_urls: [] } },
  };
  const chart = overlayDatasets(entry);
  assert.deepEqual(chart.datasets.map((d) => [d.label, d.data]), [["base", [1, 2]], ["head", [1, 3]]]);
});

test("the trend opens on the point asked for, else the alert's, else the first", () => {
  const points = ["h=64,w=64", "h=256,w=256", "h=1024,w=1024"];
  assert.equal(openingPoint(points, null, "h=256,w=256"), "h=256,w=256");
  assert.equal(openingPoint(points, "h=64,w=64", "h=256,w=256"), "h=64,w=64");
  // A point the axis does not have is no choice: the alert's, then the first, instead.
  assert.equal(openingPoint(points, "h=9,w=9", "h=1024,w=1024"), "h=1024,w=1024");
  assert.equal(openingPoint(points, null, ""), "h=64,w=64");
  assert.equal(openingPoint([], null, "h=64,w=64"), null);
});
