"""Every state change Peakwatch makes, as verb-named functions, one module per domain.

Views, tasks and management commands call these (``actions.start_run(...)``); none of them
writes rows directly. The modules import one another downwards only: ``results`` (which
closes a run once its results are in) uses ``alerts``, which uses ``series`` and ``runs``;
``deliveries`` stands apart. ``pyproject.toml`` holds the layers to that.
"""

from dashboard.actions.alerts import (
    Change,
    detect_regressions,
    raise_alert,
    remeasure_alert,
    set_series_threshold,
    triage_alert,
    triage_commit_alerts,
)
from dashboard.actions.deliveries import (
    accept_delivery,
    close_delivery,
    create_api_token,
    log_delivery,
    log_rejected_delivery,
    record_notification,
    use_api_token,
)
from dashboard.actions.results import (
    attach_artifact,
    finish_run,
    forget_artifact,
    record_result,
    record_toolchain,
    reuse_result,
)
from dashboard.actions.runs import (
    accepts_github_deliveries,
    answer_run_request,
    append_log,
    approve_commit,
    approve_run,
    begin_run,
    close_pull_request,
    ensure_run,
    mark_board_seen,
    mark_from_outside,
    record_commit,
    record_pull_request,
    register_board,
    remember_pull_request_comment,
    request_run,
    start_run,
    track_repository,
    why_not_trackable,
)
from dashboard.actions.series import (
    forget_result,
    materialise_trend,
    snapshots_deferred,
    summarise_all_series,
    summarise_series,
)
from dashboard.series_key import SeriesKey

__all__ = [
    "Change",
    "SeriesKey",
    "accept_delivery",
    "accepts_github_deliveries",
    "answer_run_request",
    "append_log",
    "approve_commit",
    "approve_run",
    "attach_artifact",
    "begin_run",
    "close_delivery",
    "close_pull_request",
    "create_api_token",
    "detect_regressions",
    "ensure_run",
    "finish_run",
    "forget_artifact",
    "forget_result",
    "log_delivery",
    "log_rejected_delivery",
    "mark_board_seen",
    "mark_from_outside",
    "materialise_trend",
    "raise_alert",
    "record_commit",
    "record_notification",
    "record_pull_request",
    "record_result",
    "record_toolchain",
    "register_board",
    "remeasure_alert",
    "remember_pull_request_comment",
    "request_run",
    "reuse_result",
    "set_series_threshold",
    "start_run",
    "summarise_all_series",
    "snapshots_deferred",
    "summarise_series",
    "track_repository",
    "why_not_trackable",
    "triage_alert",
    "triage_commit_alerts",
    "use_api_token",
]
