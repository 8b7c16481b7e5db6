import assert from "node:assert/strict";
import { test } from "node:test";

import { buildDatasets, commitAt, commitsOf, LOWER_BOUND_LABEL, measuredOnly, runUrlAt } from "../src/series.js";

function commit(i) {
  return {
    sha: `${i}`.padStart(2, "0") + "a".repeat(38),
    short: `${i}`.padStart(2, "0") + "a".repeat(8),
    title: `Commit number ${i}`,
    author: "Ada Planner",
    committed_at: `2026-11-01T0${i}:00:00+00:00`,
    run_url: `/runs/${10 + i}/`,
  };
}

// [commit index, planned, intermediate, lower bound, latency, measured peak, board RAM
//  (, run page)]
function point(i, planned, runUrl, boardRam = null) {
  const values = [i, planned, planned - 1024, Math.trunc(planned * 0.8), 1 + i / 10, planned + 1, boardRam];
  return runUrl ? [...values, runUrl] : values;
}

const commits = [commit(0), commit(1), commit(2)];

const trend = {
  commits,
  series: [
    { strategy: "greedy-by-size", board: "cpu", points: [point(0, 900), point(1, 950), point(2, 990)] },
    // Missing commit 1.
    { strategy: "none", board: "cpu", points: [point(0, 1600), point(2, 1700, "/runs/99/")] },
  ],
};

test("it takes the commits as the payload lists them, once each, oldest first", () => {
  assert.deepEqual(
    commitsOf(trend).map((c) => c.title),
    ["Commit number 0", "Commit number 1", "Commit number 2"],
  );
  assert.deepEqual(commitsOf({ series: [] }), []);
});

test("it builds one dataset per strategy aligned on the commits", () => {
  const chart = buildDatasets(trend, "planned_bytes");
  assert.deepEqual(chart.labels, ["00aaaaa", "01aaaaa", "02aaaaa"]);
  assert.deepEqual(
    chart.datasets.map((d) => [d.label, d.data]),
    [
      ["greedy-by-size", [900, 950, 990]],
      ["none", [1600, null, 1700]],
    ],
  );
});

test("a board's RAM charts only the lines of boards that measure it", () => {
  const mixed = {
    commits,
    series: [
      { strategy: "best-fit", board: "cpu", points: [point(0, 900), point(1, 950)] },
      { strategy: "best-fit", board: "mcu", points: [point(0, 900, null, 4096), point(2, 990, "/runs/7/", 5120)] },
    ],
  };
  const chart = measuredOnly(buildDatasets(mixed, "board_ram_bytes"));
  assert.deepEqual(chart.datasets.map((d) => [d.board, d.data]), [["mcu", [4096, null, 5120]]]);
  // The run page still comes after the board's figure.
  assert.equal(runUrlAt(chart, 0, 2), "/runs/7/");
  assert.deepEqual(measuredOnly(buildDatasets(trend, "board_ram_bytes")).datasets, []);
});

test("it adds the tightest lower bound per commit as its own dataset", () => {
  const chart = buildDatasets(trend, "planned_bytes", { lowerBound: true });
  const bound = chart.datasets.at(-1);
  assert.equal(bound.label, LOWER_BOUND_LABEL);
  assert.equal(bound.lowerBound, true);
  assert.deepEqual(bound.data, [1280, 760, 1360]);
});

test("it labels series with their board when there are several boards", () => {
  const twoBoards = {
    commits: [commit(0)],
    series: [
      { strategy: "none", board: "cpu", points: [point(0, 1)] },
      { strategy: "none", board: "cuda", points: [point(0, 2)] },
    ],
  };
  assert.deepEqual(
    buildDatasets(twoBoards, "planned_bytes").datasets.map((d) => d.label),
    ["none @ cpu", "none @ cuda"],
  );
});

test("it picks the measurement named by the field", () => {
  const chart = buildDatasets(trend, "latency_median_ms");
  assert.deepEqual(chart.datasets[0].data, [1, 1.1, 1.2]);
  assert.deepEqual(buildDatasets(trend, "measured_peak_bytes").datasets[1].data, [1601, null, 1701]);
  // A payload naming its columns is read by those names.
  const reordered = {
    ...trend,
    point_fields: ["commit", "latency_median_ms", "planned_bytes"],
    series: [{ strategy: "none", board: "cpu", points: [[1, 7.5, 300]] }],
  };
  assert.deepEqual(buildDatasets(reordered, "planned_bytes").datasets[0].data, [null, 300, null]);
});

test("it finds the run a clicked point belongs to", () => {
  const chart = buildDatasets(trend, "planned_bytes", { lowerBound: true });
  assert.equal(runUrlAt(chart, 0, 1), "/runs/11/");
  assert.equal(runUrlAt(chart, 0, 2), "/runs/12/");
  // A point run again on its own says so; the commit's other points keep its run.
  assert.equal(runUrlAt(chart, 1, 2), "/runs/99/");
  assert.equal(chart.datasets[1].points[2].title, "Commit number 2");
  // The lower bound and a gap both fall back to the commit's run.
  assert.equal(runUrlAt(chart, 2, 0), "/runs/10/");
  assert.equal(runUrlAt(chart, 1, 1), "/runs/11/");
  assert.equal(commitAt(chart, 5), null);
});

test("it draws nothing for a model without results", () => {
  const chart = buildDatasets({ series: [] }, "planned_bytes", { lowerBound: true });
  assert.deepEqual(chart.labels, []);
  assert.deepEqual(chart.datasets[0].data, []);
});

test("it marks alerts of one kind at their commits, with their value and run", async () => {
  const { alertDataset, ALERTS_LABEL } = await import("../src/series.js");
  const withAlerts = {
    ...trend,
    alerts: [
      { commit_sha: commit(2).sha, kind: "bytes", value: 1700, run_url: "/runs/12/" },
      { commit_sha: commit(1).sha, kind: "latency", value: 9, run_url: "/runs/11/" },
      { commit_sha: "f".repeat(40), kind: "bytes", value: 5, run_url: "/runs/99/" },
    ],
  };
  const chartData = buildDatasets(withAlerts, "planned_bytes");

  const dataset = alertDataset(withAlerts, chartData, "bytes");

  assert.equal(dataset.label, ALERTS_LABEL);
  assert.deepEqual(dataset.data, [null, null, 1700]);
  assert.equal(dataset.marked, 1);
  chartData.datasets.push(dataset);
  assert.equal(runUrlAt(chartData, chartData.datasets.length - 1, 2), "/runs/12/");
  assert.equal(alertDataset({ ...trend, alerts: [] }, chartData, "bytes"), null);
});

test("it shrinks points as lines get long, and says when a history was shortened", async () => {
  const { downsampleNote, pointRadiusFor } = await import("../src/series.js");

  assert.deepEqual([pointRadiusFor(10), pointRadiusFor(100), pointRadiusFor(500)], [4, 2, 0]);
  assert.equal(downsampleNote(trend), "");
  const long = { series: [{ downsampled: true, commits: 10000, points: new Array(480) }] };
  assert.match(downsampleNote(long), /^Showing 480 of 10000 commits per line/);
});

test("it names the toolchain of each line only when the chart has several", async () => {
  const { buildDatasets } = await import("../src/series.js");
  const line = (strategy, label) => ({
    strategy, board: "cpu", toolchain: { id: 1, spec: "", label }, commits: 1, points: [[0, 10, 9, 8, 1.0, 12]],
  });
  const trend = { commits: [{ sha: "a", short: "aaaaaaa", title: "", author: "" }], series: [line("none", "tvm 0.26"), line("none", "tvm 0.27")] };
  assert.deepEqual(buildDatasets(trend, "planned_bytes").datasets.map((d) => d.label), ["none · tvm 0.26", "none · tvm 0.27"]);
  const one = { ...trend, series: [line("none", "tvm 0.27")] };
  assert.deepEqual(buildDatasets(one, "planned_bytes").datasets.map((d) => d.label), ["none"]);
});

test("it draws two lines of the same values both in sight, each its own colour", async () => {
  const { alertDataset, byDatasetIndex, styleDatasets } = await import("../src/series.js");
  // Eight strategies that planned the same bytes at every commit: one more than the palette.
  const same = [point(0, 900), point(1, 950), point(2, 990)];
  const strategies = ["a", "b", "c", "d", "e", "f", "g", "h"];
  const eight = {
    commits,
    series: strategies.map((strategy) => ({ strategy, board: "cpu", points: same })),
    alerts: [{ kind: "bytes", commit_sha: commits[2].sha, value: 990 }],
  };
  const colours = {
    series: ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04"],
    seriesLightness: "42%",
    bound: "#6b7280",
    alert: "#b91c1c",
  };
  const chartData = buildDatasets(eight, "planned_bytes", { lowerBound: true });
  chartData.datasets.push(alertDataset(eight, chartData, "bytes"));

  styleDatasets(chartData, colours);

  const lines = chartData.datasets.filter((d) => !d.lowerBound && !d.alerts);
  const [bound] = chartData.datasets.filter((d) => d.lowerBound);
  const [alerts] = chartData.datasets.filter((d) => d.alerts);
  assert.equal(lines.length, 8);
  const drawn = [...lines.map((d) => d.borderColor), bound.borderColor, alerts.borderColor];
  assert.equal(new Set(drawn).size, 10);
  // The eighth line is not the first one's blue again.
  assert.notEqual(lines[7].borderColor, lines[0].borderColor);
  // Each line lies over the ones before it with gaps, in a dash and point style of its own.
  assert.ok(lines.every((d, i) => i === 0 || d.order < lines[i - 1].order));
  assert.ok(lines.slice(1).every((d) => d.borderDash.length > 0));
  assert.equal(new Set(lines.map((d) => JSON.stringify([d.borderDash, d.pointStyle]))).size, 8);
  // Their points are hollow, so those beneath show through.
  assert.ok(lines.slice(1).every((d) => d.pointBackgroundColor === "transparent"));
  assert.equal(lines[0].pointBackgroundColor, lines[0].borderColor);
  // The bound and the alerts stay beneath the lines, as before.
  assert.ok(lines.every((d) => d.order < bound.order && bound.order < alerts.order));
  // The legend and the tooltip still list the lines in the order of the payload.
  const items = [5, 0, 7, 2].map((datasetIndex) => ({ datasetIndex }));
  assert.deepEqual(items.sort(byDatasetIndex).map((i) => i.datasetIndex), [0, 2, 5, 7]);
});

test("it keeps lines solid while they run apart, and breaks one that meets another", async () => {
  const { runsAlongEarlier } = await import("../src/series.js");
  const line = (...data) => ({ data });

  // 0 to 1000 bytes: lines 5 bytes apart or less would be drawn one over the other.
  const apart = [line(0, 500, 1000), line(100, 600, null), line(200, null, 900)];
  const meets = [line(0, 500, 1000), line(null, 700, 995), line(300, 704, 600)];

  assert.deepEqual(runsAlongEarlier(apart), [false, false, false]);
  assert.deepEqual(runsAlongEarlier(meets), [false, true, true]);
  assert.deepEqual(runsAlongEarlier([line(7, 7), line(7, 7)]), [false, true]);
});


test("it marks the curve the page opens on, and draws it wider", async () => {
  const { markFocus, styleDatasets } = await import("../src/series.js");
  const chain = (id) => ({ id, spec: "", label: `tvm ${id}` });
  const focused = {
    commits,
    series: [
      { strategy: "greedy-by-size", board: "cpu", toolchain: chain(1), points: [point(0, 900)] },
      { strategy: "greedy-by-size", board: "gpu", toolchain: chain(1), points: [point(0, 800)] },
      { strategy: "greedy-by-size", board: "cpu", toolchain: chain(2), points: [point(0, 700)] },
      { strategy: "none", board: "cpu", toolchain: chain(1), points: [point(0, 1600)] },
    ],
  };
  const chartData = buildDatasets(focused, "planned_bytes", { lowerBound: true });

  assert.equal(markFocus(chartData, { strategy: "greedy-by-size", board: "cpu", toolchain: 1 }), 1);
  assert.deepEqual(chartData.datasets.map((d) => d.focus), [true, false, false, false, false]);
  styleDatasets(chartData, {
    series: ["#2563eb", "#dc2626", "#16a34a", "#9333ea"],
    seriesLightness: "42%",
    bound: "#6b7280",
    alert: "#b91c1c",
  });
  assert.deepEqual(chartData.datasets.slice(0, 4).map((d) => d.borderWidth), [4, 2, 2, 2]);

  // A strategy alone marks it on every board and toolchain; nothing, nothing.
  assert.equal(markFocus(chartData, { strategy: "greedy-by-size" }), 3);
  assert.equal(markFocus(chartData, {}), 0);
});
