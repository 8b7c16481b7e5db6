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
