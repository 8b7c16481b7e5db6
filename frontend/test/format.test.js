import assert from "node:assert/strict";
import { test } from "node:test";

import {
  formatBytes,
  formatExactBytes,
  formatMs,
  formatTimestamp,
  MISSING,
} from "../src/format.js";

test("it keeps small sizes in whole bytes", () => {
  assert.equal(formatBytes(0), "0 B");
  assert.equal(formatBytes(1023), "1023 B");
});

test("it switches to binary units with one decimal", () => {
  assert.equal(formatBytes(1024), "1.0 KiB");
  assert.equal(formatBytes(51712), "50.5 KiB");
  assert.equal(formatBytes(1024 * 1024 * 1.5), "1.5 MiB");
  assert.equal(formatBytes(3 * 1024 ** 3), "3.0 GiB");
});

test("it formats a decrease as a negative size", () => {
  assert.equal(formatBytes(-4096), "-4.0 KiB");
});

test("it shows a dash for a missing value", () => {
  assert.equal(formatBytes(null), MISSING);
  assert.equal(formatBytes(undefined), MISSING);
  assert.equal(formatMs(null), MISSING);
});

test("it spells out exact bytes with thousands separators", () => {
  assert.equal(formatExactBytes(51712), "51,712 bytes");
});

test("it picks latency precision by magnitude", () => {
  assert.equal(formatMs(0.410827), "0.411 ms");
  assert.equal(formatMs(12.34), "12.3 ms");
  assert.equal(formatMs(2500), "2.50 s");
});

test("it shows timestamps in UTC to the second, as the server does", () => {
  assert.equal(formatTimestamp("2026-11-21T01:14:55.5+01:00"), "2026-11-21 00:14:55 UTC");
  assert.equal(formatTimestamp(null), MISSING);
  assert.equal(formatTimestamp("not a date"), MISSING);
});

test("it puts byte ticks on multiples of a power of two", async () => {
  const { binaryTicks } = await import("../src/format.js");
  // 50,000 to 150,000 bytes: steps of 32 KiB, from 32 KiB to 160 KiB.
  const ticks = binaryTicks(50_000, 150_000);
  const step = ticks[1] - ticks[0];
  assert.equal(step, 32 * 1024);
  assert.deepEqual(ticks, [1, 2, 3, 4, 5].map((n) => n * 32 * 1024));
  assert.ok(ticks.every((value) => value % step === 0));
  assert.ok(ticks[0] <= 50_000 && ticks.at(-1) >= 150_000);
  assert.ok(ticks.length >= 4 && ticks.length <= 9);
});

test("it spreads ticks around a flat line and never below zero for sizes", async () => {
  const { binaryTicks } = await import("../src/format.js");
  const ticks = binaryTicks(65_536, 65_536);
  assert.ok(ticks[0] >= 0 && ticks[0] < 65_536 && ticks.at(-1) > 65_536);
  assert.deepEqual(binaryTicks(0, 0).slice(0, 2), [0, 1]);
});

test("it labels binary ticks in round units", async () => {
  const { binaryTicks, formatAxisBytes } = await import("../src/format.js");
  const labels = (min, max) => {
    const ticks = binaryTicks(min, max);
    return ticks.map((value) => formatAxisBytes(value, ticks[1] - ticks[0]));
  };
  assert.deepEqual(labels(0, 300 * 1024), ["0 B", "64 KiB", "128 KiB", "192 KiB", "256 KiB", "320 KiB"]);
  assert.deepEqual(labels(1024 ** 2, 2.4 * 1024 ** 2), ["1 MiB", "1.25 MiB", "1.5 MiB", "1.75 MiB", "2 MiB", "2.25 MiB", "2.5 MiB"]);
  // Steps finer than a quarter of the unit stay in the smaller one.
  assert.equal(formatAxisBytes(1088 * 1024, 64 * 1024), "1,088 KiB");
  assert.equal(formatAxisBytes(512, 128), "512 B");
});
