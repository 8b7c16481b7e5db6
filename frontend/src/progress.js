// What the run page shows of a progress report from /runs/<id>/progress.json.

export const POLL_INTERVAL_MS = 2000;

export function progressText(progress) {
  return `${progress.done} of ${progress.total} results (${progress.percent}%)`;
}

/** Whether the results table is stale after going from ``previous`` to ``next``. */
export function resultsChanged(previous, next) {
  if (!previous) return false;
  return next.done !== previous.done || (next.is_finished && !previous.is_finished);
}
