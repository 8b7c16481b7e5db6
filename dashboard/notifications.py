"""Telling people how a run went: a GitHub commit status, a pull request comment, Slack.

Each channel is configured per repository and off while its fields are empty
(``github_repository`` + ``github_token``; ``slack_webhook_url``). The GitHub API base URL
is the ``PEAKWATCH_GITHUB_API_URL`` setting (GitHub Enterprise, or a test server). Messages
are built by plain functions, sent by :func:`send_run_notifications` from a Celery task,
and every attempt is recorded as a :class:`~dashboard.models.Notification`.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

from django.conf import settings
from django.urls import reverse

from dashboard import actions
from dashboard.compare import compare_commits
from dashboard.models import Alert, Commit, Notification, Run
from dashboard.templatetags.peakwatch import human_bytes

log = logging.getLogger(__name__)

STATUS_CONTEXT = "peakwatch/memory"
#: A marker GitHub renders invisibly, so our comment can be recognised.
COMMENT_MARKER = "<!-- peakwatch -->"


def absolute(path: str) -> str:
    return settings.PEAKWATCH_BASE_URL.rstrip("/") + path


def commit_status(run: Run, alerts: list[Alert]) -> dict:
    """The body of ``POST /repos/{owner}/{repo}/statuses/{sha}``.

    Only a run whose every result is ok (and none regressed) is a success. A run that
    broke is an error; failed results are the commit's failure, as regressions are.
    """
    regressions = ""
    if alerts:
        models = sorted({a.model.name for a in alerts})
        regressions = f"{len(alerts)} regression(s) in {', '.join(models)}"
    if run.status == Run.Status.FAILED and run.error:
        state, description = "error", f"run failed: {run.error}"
    elif run.status in (Run.Status.FAILED, Run.Status.PARTIAL):
        state = "failure"
        description = "; ".join(filter(None, [run.status_text, regressions]))
    elif alerts:
        state, description = "failure", regressions
    elif run.is_finished:
        state, description = "success", "no memory or latency regression"
    else:
        state, description = "pending", "running the memory suite"
    target = alerts_url(run) if alerts else run.get_absolute_url()
    return {
        "state": state,
        "target_url": absolute(target),
        # GitHub refuses descriptions over 140 characters.
        "description": description[:140],
        "context": STATUS_CONTEXT,
    }


def alerts_url(run: Run) -> str:
    return reverse("alerts") + f"?repository={run.repository.name}&commit={run.commit.sha}"


def _signed(value: float | int | None, kind: str) -> str:
    if value is None:
        return "—"
    if kind == "bytes":
        return ("+" if value > 0 else "") + (human_bytes(value) if value else "0 B")
    return f"{value:+.3f} ms"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1%}"


def pull_request_comment(run: Run, base: Commit | None, alerts: list[Alert]) -> str:
    """A markdown summary of the pull request head against its merge base."""
    lines = [COMMENT_MARKER, f"### Peakwatch: memory of {run.commit.short_sha}"]
    run_link = f"[run {run.pk}]({absolute(run.get_absolute_url())})"
    if run.status == Run.Status.FAILED:
        why = [f"`{run.error}`"] if run.error else []
        why += [f"results: {run.failures}"] if run.failures else []
        lines += ["", f"The {run_link} failed" + (": " + "; ".join(why) if why else ".")]
        return "\n".join(lines)
    if run.status == Run.Status.PARTIAL:
        # The table compares what succeeded; what failed is on the run's page.
        lines += ["", f"**Some results failed** ({run.failures}): see {run_link}."]
    if base is None:
        lines += ["", "The merge base has no results yet; this comment is updated when it does."]
        return "\n".join(lines)
    compare_path = reverse(
        "compare-commits", args=[run.repository.name, base.sha, run.commit.sha]
    )
    lines += [
        "",
        f"Compared with the merge base {base.short_sha} "
        f"([full comparison]({absolute(compare_path)})).",
        "",
    ]
    if alerts:
        lines.append(f"**{len(alerts)} regression(s)** — [triage]({absolute(alerts_url(run))})")
        lines.append("")
    flagged = {
        (a.model_id, a.strategy_id, a.board_id, a.toolchain_id, a.shape_label) for a in alerts
    }
    rows = compare_commits(base, run.commit)
    # A reviewer reads what moved: a row whose planned bytes are the same on both sides (and
    # raised no alert) is counted, not listed; the full comparison has every row.
    changed = [
        row for row in rows
        if row.series_ids in flagged or row.bytes_delta is None or row.bytes_delta != 0
    ]
    unchanged = len(rows) - len(changed)
    if not changed:
        lines.append(f"All {unchanged} row(s) plan the same bytes as the merge base.")
        return "\n".join(lines)
    lines += [
        "| Model | Strategy | Board | Base | Head | Change | Latency change |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for row in changed:
        mark = " :warning:" if row.series_ids in flagged else ""
        at = f" at {row.shape_label}" if row.shape_label else ""
        note = row.llm_note
        note = f" ({note})" if note else ""
        lines.append(
            f"| {row.model}{at}{mark} | {row.strategy} | {row.board} | "
            f"{human_bytes(row.base_bytes)} | {human_bytes(row.head_bytes)} | "
            f"{_signed(row.bytes_delta, 'bytes')} ({_percent(row.bytes_relative)}){note} | "
            f"{_percent(row.latency_relative)} |"
        )
    if unchanged:
        lines += ["", f"{unchanged} more row(s) plan the same bytes as the merge base."]
    return "\n".join(lines)


def slack_message(run: Run, alerts: list[Alert]) -> dict:
    lines = [
        f"*Peakwatch*: {len(alerts)} regression(s) in {run.repository.name} at "
        f"`{run.commit.short_sha}` {run.commit.title}"
    ]
    for alert in alerts:
        if alert.in_bytes:
            change = f"{human_bytes(alert.baseline_value)} → {human_bytes(alert.value)}"
        else:
            change = f"{alert.baseline_value:.3f} ms → {alert.value:.3f} ms (p={alert.p_value:.3g})"
        note = alert.function_note
        lines.append(
            f"• {alert.model.name} / {alert.strategy.name} / {alert.board.name}"
            f"{alert.at_point}: "
            f"{alert.kind_in_a_sentence} {change} ({_percent(alert.relative_change)})"
            + (f"; {note}" if note else "")
        )
    lines.append(f"<{absolute(alerts_url(run))}|Triage the alerts>")
    return {"text": "\n".join(lines)}


def _send(method: str, url: str, body: dict, token: str = "") -> tuple[int | None, dict, str]:
    """(status, JSON answer, error); never raises for HTTP or network failures."""
    headers = {"Content-Type": "application/json", "User-Agent": "peakwatch"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
        headers["Accept"] = "application/vnd.github+json"
        headers["X-GitHub-Api-Version"] = "2022-11-28"
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers=headers, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=settings.PEAKWATCH_NOTIFY_TIMEOUT) as answer:
            raw = answer.read()
            status = answer.status
    except urllib.error.HTTPError as exc:
        return exc.code, {}, exc.read()[:500].decode(errors="replace")
    except (urllib.error.URLError, OSError) as exc:
        return None, {}, str(exc)
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        data = {}
    return status, data if isinstance(data, dict) else {}, ""


def send_run_notifications(run: Run) -> list[Notification]:
    """Send every configured notification about the finished ``run``."""
    repository = run.repository
    # Once the run is over, the commit's open alerts, whichever of its runs raised them: a
    # re-run measuring the same figures raises none of its own, and must not turn the
    # commit green; one that a maintainer closed no longer fails it. Until then, the run is
    # pending, whatever an earlier run found.
    alerts = list(
        Alert.objects.for_commit(run.commit).open().with_related().order_by("model__name", "id")
    ) if run.is_finished else []
    sent = []
    api = settings.PEAKWATCH_GITHUB_API_URL.rstrip("/")
    if repository.notifies_github:
        owner_repo = repository.github_repository.strip("/")
        url = f"{api}/repos/{owner_repo}/statuses/{run.commit.sha}"
        status, _, error = _send("POST", url, commit_status(run, alerts), repository.github_token)
        sent.append(actions.record_notification(
            run, channel=Notification.Channel.COMMIT_STATUS, url=url, status_code=status,
            error=error,
        ))
        pull_request = run.pull_request
        # While the run goes on, the pending status is all there is to say.
        if pull_request is not None and run.is_finished:
            base = Commit.objects.filter(
                repository=repository, sha=pull_request.base_sha, results__status="ok"
            ).first()
            body = {"body": pull_request_comment(run, base, alerts)}
            status = None
            editing = bool(pull_request.comment_id)
            if editing:
                url = f"{api}/repos/{owner_repo}/issues/comments/{pull_request.comment_id}"
                status, _, error = _send("PATCH", url, body, repository.github_token)
            if not editing or status == 404:
                # No comment yet, or someone deleted ours: post a new one.
                url = f"{api}/repos/{owner_repo}/issues/{pull_request.number}/comments"
                status, answer, error = _send("POST", url, body, repository.github_token)
                if isinstance(answer.get("id"), int):
                    actions.remember_pull_request_comment(pull_request, answer["id"])
            sent.append(actions.record_notification(
                run, channel=Notification.Channel.PR_COMMENT, url=url, status_code=status,
                error=error,
            ))
    # Only news goes to Slack: alerts this run raised or measured a new figure for, not
    # the same ones again at every re-run of the commit.
    news = [alert for alert in alerts if alert.run_id == run.pk]
    if repository.slack_webhook_url and news and run.is_finished:
        url = repository.slack_webhook_url
        status, _, error = _send("POST", url, slack_message(run, news))
        # The URL is a secret; record only where it goes.
        sent.append(actions.record_notification(
            run, channel=Notification.Channel.SLACK, url=url.split("/services/")[0],
            status_code=status, error=error,
        ))
    for notification in sent:
        if not notification.ok:
            log.warning("notification %s failed: %s", notification, notification.error)
    return sent
