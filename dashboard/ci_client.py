"""Run a commit on Peakwatch from CI, wait for it, and fail the job on a memory regression.

This file is the whole client: the standard library only, no Django and nothing else of
Peakwatch, so a CI machine that reaches Peakwatch over HTTP can run it as it is. Copy it
into the tracked repository (``.github/peakwatch_ci.py``, say) and run::

    PEAKWATCH_TOKEN=pw_... python3 peakwatch_ci.py --url https://peakwatch.example \\
        --repository models --sha "$GITHUB_SHA" --branch main

It sends ``POST /api/runs``, follows the run request while Peakwatch looks the revision
up, polls ``GET /api/runs/<id>/`` until the run is finished (a run that waits for a
maintainer's approval is waited for too), prints the run's outcome and its commit's alerts,
and exits:

- 0: the run succeeded and no open alert of the kind ``--fail-on-alert`` names is on the
  commit;
- 1: the run is partial or failed, or did not finish within ``--timeout`` (a run that did not
  succeed exits 1 whatever its alerts);
- 2: Peakwatch refused the request (token, repository, revision) or could not be reached;
- 3: the run succeeded but an open alert (state ``new`` or ``acknowledged``) of that kind is
  on the commit. A maintainer closes one as ``intended``, ``invalid`` or ``fixed`` on the
  alerts page; the same job then passes when re-run.

``manage.py run NAME --sha SHA --fail-on-alert`` answers with the same codes where the
dashboard's own machine runs the job.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

EXIT_OK, EXIT_RUN, EXIT_INPUT, EXIT_ALERT = 0, 1, 2, 3
#: Seconds a queue the run needs may go without a worker: a worker restarting (a deploy)
#: is back well within it; a queue nobody was ever started on is not.
WORKER_GRACE = 300.0
FAIL_ON = ("bytes", "ram", "latency", "any", "none")


def fails_on(fail_on: str, kind: str) -> bool:
    """Whether an open alert of ``kind`` fails a job asked to fail on ``fail_on``: "bytes"
    means memory, so it counts a micro board's RAM ("ram") as well as planned bytes."""
    return fail_on in ("any", kind) or (fail_on, kind) == ("bytes", "ram")


class Stop(Exception):
    """The job ends here with ``code``; the message says why."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class Peakwatch:
    """The few calls CI makes, with the token, over plain HTTP(S)."""

    def __init__(self, url: str, token: str, *, retries: int = 5, pause: float = 10.0,
                 sleep: Callable[[float], None] = time.sleep):
        self.base = url.rstrip("/") + "/"
        self.token = token
        self.retries = retries
        self.pause = pause
        self.sleep = sleep

    def url(self, path: str) -> str:
        # The API's own links are paths from the host ("/api/runs/7/"): they already hold
        # any prefix Peakwatch is served under, so they join onto the host.
        return urllib.parse.urljoin(self.base, path)

    def post(self, path: str, body: dict) -> dict:
        # A POST is not sent twice once it may have reached the server: a second one would
        # start a second run. Only a refused connection (nothing sent) is tried again.
        return self._call("POST", path, body, retry_all=False)

    def get(self, path: str) -> dict:
        return self._call("GET", path, None, retry_all=True)

    def _call(self, method: str, path: str, body: dict | None, *, retry_all: bool) -> dict:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json", "Authorization": f"Bearer {self.token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url(path), data, headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    return _json(response.read(), self.url(path))
            except urllib.error.HTTPError as error:
                answer = error.read()
                # A restart or a proxy between deployments answers 502-504 for a while.
                if retry_all and error.code >= 500 and attempt < self.retries:
                    self._wait(f"{method} {path}: HTTP {error.code}")
                    continue
                raise Stop(EXIT_INPUT, f"{method} {self.url(path)}: HTTP {error.code}: "
                           f"{_reason(answer)}") from None
            except (urllib.error.URLError, OSError) as error:
                reason = getattr(error, "reason", error)
                refused = isinstance(reason, ConnectionRefusedError)
                if (retry_all or refused) and attempt < self.retries:
                    self._wait(f"{method} {path}: {reason}")
                    continue
                raise Stop(EXIT_INPUT, f"cannot reach Peakwatch at {self.url(path)}: "
                           f"{reason}") from None
        raise AssertionError("unreachable")

    def _wait(self, why: str) -> None:
        _say(f"{why}; trying again in {self.pause:g} s")
        self.sleep(self.pause)


def trigger(peakwatch: Peakwatch, repository: str, sha: str, branch: str, *,
            deadline: float, worker_grace: float = WORKER_GRACE, rerun: bool = False,
            clock: Callable[[], float] = time.monotonic) -> str:
    """The API URL of the run ``POST /api/runs`` started (or found) for the revision."""
    body: dict = {"repository": repository}
    if sha:
        body["sha"] = sha
    if branch:
        body["branch"] = branch
    if rerun:
        body["rerun"] = True
    answer = peakwatch.post("api/runs", body)
    if answer.get("attached"):
        _say(f"attached to run {answer.get('run')} of {str(answer.get('commit', ''))[:10]} "
             f"({answer.get('status')}), which an earlier call started; --rerun runs it again")
    if answer.get("run_url"):
        return answer["run_url"]
    if answer.get("status") == "failed":
        raise Stop(EXIT_INPUT, f"Peakwatch cannot run it: {answer.get('detail', '')}")
    poll = answer.get("poll_url")
    if not poll:
        raise Stop(EXIT_INPUT, f"Peakwatch answered without a run: {answer}")
    _say(f"Peakwatch is looking {sha or branch} up in its mirror")
    since = None
    while True:
        request = peakwatch.get(poll)
        if request.get("run_url"):
            return request["run_url"]
        if request.get("status") == "failed":
            raise Stop(EXIT_INPUT, f"Peakwatch cannot run it: {request.get('error', '')}")
        waiting = [str(name) for name in request.get("waiting_on") or []]
        if waiting and since is None:
            since = clock()
            _say(f"no worker consumes {_queues(waiting)}, which looks revisions up (a worker "
                 f"started with -Q {','.join(waiting)} does)")
        elif not waiting:
            since = None
        if since is not None and clock() - since > worker_grace:
            raise Stop(EXIT_RUN, f"no worker on {_queues(waiting)} for {worker_grace:g} s: "
                       f"Peakwatch did not look {sha or branch} up")
        if clock() > deadline:
            # No worker took the lookup: the same as a run that never finished.
            raise Stop(EXIT_RUN, f"Peakwatch did not look {sha or branch} up in time")
        peakwatch.sleep(peakwatch.pause)


def follow(peakwatch: Peakwatch, run_url: str, *, deadline: float,
           worker_grace: float = WORKER_GRACE,
           clock: Callable[[], float] = time.monotonic) -> dict:
    """The run once it is finished; Stop when it is not by ``deadline`` (on ``clock``), or
    when a queue it needs has had no worker for ``worker_grace`` seconds."""
    shown = None
    unconsumed: list[str] = []
    since = 0.0
    while True:
        run = peakwatch.get(run_url)
        progress = run.get("progress") or {}
        now = (run.get("status"), progress.get("done"))
        if now != shown:
            shown = now
            if run.get("status") == "awaiting-approval":
                _say(f"run {run['id']} waits for a maintainer's approval: "
                     f"{_link(peakwatch, run, 'page')}")
            else:
                _say(f"run {run['id']}: {progress.get('done', 0)} of "
                     f"{progress.get('total') or '?'} results recorded ({run['status']})")
        if run.get("is_finished"):
            return run
        waiting = [str(name) for name in run.get("waiting_on") or []]
        if waiting != unconsumed:
            unconsumed, since = waiting, clock()
            if waiting:
                _say(f"run {run['id']} waits: no worker consumes {_queues(waiting)} (a worker "
                     f"started with -Q {','.join(waiting)} takes it)")
        if unconsumed and clock() - since > worker_grace:
            raise Stop(EXIT_RUN, f"run {run['id']} waited {worker_grace:g} s with no worker "
                       f"on {_queues(unconsumed)}: {_link(peakwatch, run, 'page')}")
        if clock() > deadline:
            raise Stop(EXIT_RUN, f"run {run['id']} did not finish in time "
                       f"({run.get('status')}): {_link(peakwatch, run, 'page')}")
        peakwatch.sleep(peakwatch.pause)


def verdict(peakwatch: Peakwatch, run: dict, fail_on: str) -> int:
    """Print what became of ``run`` and its commit's alerts; the exit status."""
    sha = (run.get("commit") or {}).get("short_sha", "")
    alerts = run.get("alerts", [])
    in_actions = os.environ.get("GITHUB_ACTIONS") == "true"
    _say(f"run {run['id']} of {sha} {run.get('status_text') or run.get('status')}: "
          f"{_link(peakwatch, run, 'page')}")
    if alerts:
        opened = sum(alert["is_open"] for alert in alerts)
        _say(f"{len(alerts)} alert(s) on {sha}, {opened} open: "
             f"{_link(peakwatch, run, 'alerts')}")
    else:
        _say(f"no alerts on {sha}")
    failing = []
    for alert in alerts:
        # The series names its shape point already (" at seq=32").
        line = f"{alert['kind']} {alert['series']}: {alert['change_text']}"
        _say(f"  {line}  [{alert['state']}]")
        if alert.get("tolerance"):
            _say(f"    past its tolerance: {alert['tolerance']}")
        if alert["is_open"] and fails_on(fail_on, alert["kind"]):
            failing.append(line)
            if in_actions:
                # An annotation puts the regression on the job's summary page.
                _say(f"::error title=Peakwatch regression::{line}")
    if run.get("status") != "succeeded":
        return EXIT_RUN
    if failing:
        kind = "" if fail_on == "any" else f"{fail_on} "
        _say(f"failing: {len(failing)} open {kind}alert(s); a maintainer closes them as "
              f"intended, invalid or fixed on {_link(peakwatch, run, 'alerts')}")
        return EXIT_ALERT
    return EXIT_OK


def main(argv: list[str] | None = None, *, sleep: Callable[[float], None] = time.sleep) -> int:
    parser = argparse.ArgumentParser(
        prog="peakwatch_ci.py",
        description="Run a commit on Peakwatch, wait for it, and fail on a regression. "
        "The API token is read from PEAKWATCH_TOKEN (manage.py create_api_token).",
        epilog="exit status: 0 succeeded with no open alert of that kind; 1 the run is "
        "partial or failed, did not finish in time or had no worker on a queue it needs; "
        "2 Peakwatch refused the request or could not be reached; 3 succeeded, but an open "
        "alert of that kind is on the commit",
    )
    parser.add_argument("--url", default=os.environ.get("PEAKWATCH_URL", ""),
                        help="Peakwatch's address (default: $PEAKWATCH_URL)")
    parser.add_argument("--repository", required=True, help="the tracked repository's name")
    parser.add_argument("--sha", default="", help="the commit to run")
    parser.add_argument("--branch", default="",
                        help="the branch it is on; with no --sha, the branch's head is run")
    parser.add_argument("--fail-on-alert", choices=FAIL_ON, default="bytes",
                        help="open alerts of which kind fail the job (default: bytes, which "
                        "counts a micro board's RAM too; ram: only that)")
    parser.add_argument("--timeout", type=float, default=3 * 3600,
                        help="seconds to wait for the run at most (default: 3 hours)")
    parser.add_argument("--interval", type=float, default=10.0,
                        help="seconds between two polls (default: 10)")
    parser.add_argument("--rerun", action="store_true",
                        help="run the commit again even where a run of it succeeded or is "
                        "under way (by default the job waits on that run)")
    parser.add_argument("--worker-grace", type=float, default=WORKER_GRACE,
                        help="seconds a queue the run needs may go without a worker before "
                        f"the job fails, naming it (default: {WORKER_GRACE:g})")
    args = parser.parse_args(argv)
    token = os.environ.get("PEAKWATCH_TOKEN", "").strip()
    if not args.url or not token:
        parser.error("give --url (or PEAKWATCH_URL) and set PEAKWATCH_TOKEN")
    if not (args.sha or args.branch):
        parser.error("give --sha or --branch")
    peakwatch = Peakwatch(args.url, token, pause=args.interval, sleep=sleep)
    deadline = time.monotonic() + args.timeout
    try:
        run_url = trigger(peakwatch, args.repository, args.sha, args.branch, deadline=deadline,
                          worker_grace=args.worker_grace, rerun=args.rerun)
        run = follow(peakwatch, run_url, deadline=deadline, worker_grace=args.worker_grace)
        return verdict(peakwatch, run, args.fail_on_alert)
    except Stop as stop:
        _say(f"peakwatch: {stop}", sys.stderr)
        return stop.code


def _queues(names: list[str]) -> str:
    return ("queue " if len(names) == 1 else "queues ") + ", ".join(names)


def _say(line: str, stream=None) -> None:
    # Flushed line by line: a CI log shows progress while the run goes on, not at the end.
    stream = stream or sys.stdout
    stream.write(line + "\n")
    stream.flush()


def _json(raw: bytes, url: str) -> dict:
    try:
        answer = json.loads(raw)
    except ValueError:
        raise Stop(EXIT_INPUT, f"{url} did not answer JSON: {raw[:200]!r}") from None
    if not isinstance(answer, dict):
        raise Stop(EXIT_INPUT, f"{url} answered {answer!r}, not an object")
    return answer


def _reason(raw: bytes) -> str:
    try:
        answer = json.loads(raw)
    except ValueError:
        return raw[:200].decode(errors="replace")
    if isinstance(answer, dict):
        return str(answer.get("error") or answer.get("detail") or answer)
    return str(answer)


def _link(peakwatch: Peakwatch, run: dict, name: str) -> str:
    # Absolute where PEAKWATCH_BASE_URL makes them so; else joined onto the URL used here.
    return peakwatch.url((run.get("links") or {}).get(name) or run.get("page_url") or "")


if __name__ == "__main__":
    sys.exit(main())
