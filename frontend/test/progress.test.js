import assert from "node:assert/strict";
import { test } from "node:test";

import { progressText, resultsChanged } from "../src/progress.js";

test("it describes progress in results and percent", () => {
  assert.equal(progressText({ done: 3, total: 6, percent: 50 }), "3 of 6 results (50%)");
});

test("it reloads the results when a result lands or the run finishes", () => {
  const running = { done: 2, is_finished: false };
  assert.equal(resultsChanged(running, { done: 2, is_finished: false }), false);
  assert.equal(resultsChanged(running, { done: 3, is_finished: false }), true);
  assert.equal(resultsChanged(running, { done: 2, is_finished: true }), true);
  assert.equal(resultsChanged(null, { done: 2, is_finished: true }), false);
});
