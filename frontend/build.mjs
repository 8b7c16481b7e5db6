// Bundles src/ into dist/peakwatch/, the folder Django's STATICFILES_DIRS serves.
// `npm run build`; `npm run build -- --watch` rebuilds on change.
import { rm } from "node:fs/promises";

import * as esbuild from "esbuild";

const watch = process.argv.includes("--watch");
const options = {
  entryPoints: {
    trend: "src/trend.js",
    run: "src/run.js",
    compare: "src/compare.js",
    plan: "src/plan.js",
    plan_diff: "src/plan_diff.js",
    shape_charts: "src/shape_charts.js",
    peakwatch: "src/peakwatch.css",
    favicon: "src/favicon.svg",
  },
  loader: { ".svg": "copy" },
  outdir: "dist/peakwatch",
  bundle: true,
  minify: !watch,
  sourcemap: true,
  format: "iife",
  target: ["es2020"],
  logLevel: "info",
};

await rm("dist", { recursive: true, force: true });
if (watch) {
  const context = await esbuild.context(options);
  await context.watch();
} else {
  await esbuild.build(options);
}
