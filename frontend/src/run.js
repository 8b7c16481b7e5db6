// The run page: while the run is queued or running, poll its progress every two seconds
// and update the page in place; refresh the results table whenever a result lands.

import { formatTimestamp } from "./format.js";
import { POLL_INTERVAL_MS, progressText, resultsChanged } from "./progress.js";

function render(root, progress) {
  const status = root.querySelector("[data-run-status]");
  const badge = document.createElement("span");
  badge.className = `status status-${progress.status}`;
  // "partial: 3 of 12 failed", not only "partial".
  badge.textContent = progress.status_text || progress.status;
  status.replaceChildren(badge);

  const bar = root.querySelector("[data-progress-bar]");
  bar.setAttribute("aria-valuenow", String(progress.percent));
  const fill = root.querySelector("[data-progress-fill]");
  fill.style.width = `${progress.percent}%`;
  fill.className = `progress-fill status-${progress.status}`;
  root.querySelector("[data-progress-text]").textContent = progressText(progress);

  const error = root.querySelector("[data-run-error]");
  error.textContent = progress.error;
  error.hidden = !progress.error;

  const log = root.querySelector("[data-run-log]");
  const following = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
  log.textContent = progress.log || "(empty)";
  if (following) log.scrollTop = log.scrollHeight;

  root.querySelector("[data-run-started-at]").textContent = formatTimestamp(progress.started_at);
  root.querySelector("[data-run-finished-at]").textContent = formatTimestamp(progress.finished_at);
}

async function reloadResults(root) {
  const response = await fetch(root.dataset.resultsUrl, { headers: { Accept: "text/html" } });
  if (response.ok) root.querySelector("[data-results]").innerHTML = await response.text();
}

export function followRun(root) {
  // What the server rendered: a result landing before the first poll still refreshes.
  let previous = { done: Number(root.dataset.done), is_finished: false };
  let timer = null;
  let polling = false;

  async function poll() {
    timer = null;
    polling = true;
    try {
      const response = await fetch(root.dataset.progressUrl, {
        headers: { Accept: "application/json" },
      });
      if (response.ok) {
        const progress = await response.json();
        render(root, progress);
        if (resultsChanged(previous, progress)) await reloadResults(root);
        previous = progress;
        if (progress.is_finished) {
          root.dataset.finished = "true";
          polling = false;
          return;
        }
      }
    } catch (error) {
      // A server restart or a dropped connection: keep trying at the same pace.
      console.warn("peakwatch: progress poll failed", error);
    }
    polling = false;
    // A hidden tab stops polling; coming back resumes it.
    if (!document.hidden) timer = setTimeout(poll, POLL_INTERVAL_MS);
  }

  document.addEventListener("visibilitychange", () => {
    const idle = timer === null && !polling;
    if (!document.hidden && idle && root.dataset.finished !== "true") poll();
  });
  poll();
}

function start() {
  const root = document.querySelector("[data-run]");
  if (root && root.dataset.finished !== "true") followRun(root);
}

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", start);
} else {
  start();
}
