import assert from "node:assert/strict";
import { test } from "node:test";

import { paretoFront, scatterDatasets } from "../src/pareto.js";

const point = (strategy, planned_bytes, latency_ms) => ({ strategy, planned_bytes, latency_ms });

test("it keeps only the strategies no other beats on both bytes and latency", () => {
  const points = [
    point("none", 2000, 1.0),
    point("tvm-stock", 1200, 1.1),
    point("greedy-by-size", 1000, 1.2),
    point("worse", 1300, 1.3),
  ];

  assert.deepEqual(
    paretoFront(points).map((p) => p.strategy),
    ["greedy-by-size", "tvm-stock", "none"],
  );
});

test("it keeps both of two identical points", () => {
  assert.equal(paretoFront([point("a", 1, 1), point("b", 1, 1)]).length, 2);
});

test("it draws one dataset per side and the front of the last side", () => {
  const entry = {
    model: "small-cnn",
    sets: [
      { label: "base", points: [point("none", 2000, 1.0), point("greedy-by-size", 1000, 1.2)] },
      { label: "head", points: [point("none", 2600, 1.0), point("greedy-by-size", 1400, 1.2)] },
    ],
  };

  const datasets = scatterDatasets(entry);

  assert.deepEqual(datasets.map((d) => d.label), ["base", "head", "Pareto front (head)"]);
  assert.deepEqual(datasets[1].data[0], { x: 1.0, y: 2600, strategy: "none" });
  assert.equal(datasets[2].showLine, true);
  assert.deepEqual(datasets[2].data.map((d) => d.y), [1400, 2600]);
});
