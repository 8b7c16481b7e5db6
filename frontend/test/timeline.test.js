import assert from "node:assert/strict";
import { test } from "node:test";

import { liveAt, timelineGeometry } from "../src/timeline.js";

const margin = { left: 0, right: 0, top: 0, bottom: 0 };
const timeline = {
  arena_bytes: 1000,
  peak: { time: 2, bytes: 800 },
  tensors: [
    { id: "a", size: 500, lower: 0, upper: 4, offset: 0, producer: "conv2d" },
    { id: "b", size: 300, lower: 2, upper: 3, offset: 500, producer: "relu" },
    { id: "c", size: 1000, lower: 4, upper: 5, offset: 0, producer: "add" },
    { id: "unplaced", size: 10, lower: 0, upper: 1, offset: null, producer: "x" },
  ],
};

test("it counts a tensor live from its lower step up to, not including, its upper one", () => {
  const tensor = { lower: 2, upper: 4 };
  assert.equal(liveAt(tensor, 1), false);
  assert.equal(liveAt(tensor, 2), true);
  assert.equal(liveAt(tensor, 3), true);
  assert.equal(liveAt(tensor, 4), false);
  assert.equal(liveAt(tensor, null), false);
});

test("it maps time across and address up, one rectangle per placed tensor", () => {
  const geometry = timelineGeometry(timeline, { width: 500, height: 1000, margin });

  assert.equal(geometry.rects.length, 3);
  assert.equal(geometry.unplaced, 1);
  assert.equal(geometry.timeEnd, 5);
  assert.equal(geometry.addressEnd, 1000);
  const [a, b] = geometry.rects;
  // a: steps 0..4 of 5 across 500 px; bytes 0..500 of 1000, drawn from the bottom.
  assert.deepEqual([a.x, a.width, a.y, a.height], [0, 400, 500, 500]);
  // b sits on top of a: bytes 500..800.
  assert.deepEqual([b.x, b.width, b.y, b.height], [200, 100, 200, 300]);
});

test("it marks the peak instant and the tensors live there", () => {
  const geometry = timelineGeometry(timeline, { width: 500, height: 1000, margin });

  assert.deepEqual(geometry.peak, { x: 200, width: 100 });
  assert.deepEqual(geometry.rects.filter((r) => r.atPeak).map((r) => r.id), ["a", "b"]);
});

test("it keeps tiny tensors at least a pixel wide and high", () => {
  const tiny = { tensors: [{ id: "t", size: 1, lower: 0, upper: 1, offset: 0 }], arena_bytes: 1e9 };
  const [rect] = timelineGeometry({ ...tiny, tensors: [...tiny.tensors, { id: "u", size: 1, lower: 0, upper: 10000, offset: 0 }] }, { width: 100, height: 100, margin }).rects;

  assert.ok(rect.width >= 1 && rect.height >= 1);
});

test("it draws no peak band when the plan names no peak", () => {
  assert.equal(timelineGeometry({ tensors: [] }, { width: 10, height: 10, margin }).peak, null);
});
