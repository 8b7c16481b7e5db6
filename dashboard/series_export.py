"""One series of a model (a strategy on a board with a toolchain, at one shape point) as
rows to export: every commit it was measured at, oldest first, in a fixed column order.

The chart draws at most ``trends.MAX_POINTS`` points of a series and only its successful
results; an export has every commit. Of a commit measured more than once it keeps the
figure the chart draws (the newest successful result), and a commit whose every result
failed is a row too, with its status and error, so a gap in the chart reads as one here.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from itertools import groupby
from urllib.parse import urlencode

from django.utils.text import slugify

from dashboard.models import Model, Result, Series
from dashboard.series_key import SeriesKey
from dashboard.trends import find_toolchain
from planner.shapes import file_label, label_order

#: The columns of an export, in their order (CSV header and JSON keys alike).
COLUMNS = (
    "commit_sha", "committed_at", "branch", "commit_title", "run", "result", "status",
    "planned_bytes", "intermediate_bytes", "lower_bound_bytes", "measured_peak_bytes",
    "latency_median_ms", "latency_p90_ms", "reused_from", "error",
)
#: A failed result's error is cut to its first line, at most this long.
ERROR_CHARS = 300
#: What a spreadsheet would run as a formula at the start of a cell (OWASP's list).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

_FIELDS = (
    "commit_id", "commit__sha", "commit__committed_at", "commit__branch", "commit__message",
    "run_id", "id", "status", "planned_bytes", "intermediate_bytes", "lower_bound_bytes",
    "measured_peak_bytes", "latency_median_ms", "latency_p90_ms", "reused_from_id", "error",
)


class UnknownSeries(LookupError):
    """The query names no series of the model."""


class AmbiguousSeries(ValueError):
    """The query fits several series: ``choices`` says what tells them apart."""


def find_series_named(model: Model, params) -> Series:
    """:func:`find_series` with the names a request's query gives (``strategy``, ``board``,
    ``toolchain``, ``point``): the CSV page and the API read them alike."""
    return find_series(
        model, strategy=params.get("strategy", ""), board=params.get("board", ""),
        toolchain=params.get("toolchain", ""), point=params.get("point"),
    )


def find_series(
    model: Model, *, strategy: str = "", board: str = "", toolchain: str = "",
    point: str | None = None,
) -> Series:
    """The one series of ``model`` that the names fit: ``strategy`` and ``board`` by name,
    ``toolchain`` by id or spec, ``point`` the shape label (None: any). A name left empty
    may be left out where the model has one series that fits anyway."""
    lines = (
        Series.objects.for_model(model).with_points(False).defer("latest_html")
        .select_related("model__repository")
    )
    if strategy:
        lines = lines.filter(strategy__name=strategy)
    if board:
        lines = lines.on_board_named(board)
    if toolchain:
        try:
            lines = lines.with_toolchain(find_toolchain(toolchain))
        except LookupError as unknown:
            raise UnknownSeries(str(unknown)) from unknown
    if point is not None:
        lines = lines.filter(shape_label=point)
    # A model has a few dozen lines at most: two are enough to know it is ambiguous, but
    # the message lists what tells them apart.
    found = sorted(lines[:200], key=_order)
    if not found:
        names = _named(strategy=strategy, board=board, toolchain=toolchain, point=point)
        raise UnknownSeries(f"{model.name} has no series with {names or 'any figures'}")
    if len(found) > 1:
        raise AmbiguousSeries(_choices(found))
    return found[0]


def _order(line: Series) -> tuple:
    return (line.strategy.name, line.board.name, line.toolchain.spec,
            label_order(line.shape_label))


def _named(**names) -> str:
    return ", ".join(
        f"{name}={value[:80]!r}" for name, value in names.items() if value is not None and (
            value or name == "point"
        )
    )


def _choices(lines: list[Series]) -> str:
    """Which of strategy, board, toolchain and point differ among ``lines``, with values."""
    parts = []
    for name, values in (
        ("strategy", {line.strategy.name for line in lines}),
        ("board", {line.board.name for line in lines}),
        ("toolchain", {str(line.toolchain_id) for line in lines}),
        ("point", {line.shape_label for line in lines}),
    ):
        if len(values) > 1:
            shown = sorted(values, key=label_order if name == "point" else str)[:20]
            parts.append(f"{name} (one of {', '.join(repr(v) for v in shown)})")
    return f"{len(lines)} series fit: name {' and '.join(parts)}"


def query_of(line: Series) -> str:
    """The query string that names ``line`` to the exports (every name, so it stays the
    same line once the model has more)."""
    query = {
        "strategy": line.strategy.name, "board": line.board.name,
        "toolchain": line.toolchain_id, "point": line.shape_label,
    }
    return urlencode(query)


def describe(line: Series) -> dict:
    """What identifies an export: the model and the series' names."""
    return {
        "model": {
            "id": line.model_id, "name": line.model.name,
            "repository": line.model.repository.name, "url": line.model.get_absolute_url(),
        },
        "strategy": line.strategy.name,
        "board": line.board.name,
        "toolchain": {
            "id": line.toolchain_id, "spec": line.toolchain.spec, "label": line.toolchain.label,
        },
        "shape_label": line.shape_label,
    }


def file_name(line: Series) -> str:
    """``pool-best-fit-seq=512-cpu.csv``: the model, strategy, point, board and, for a
    toolchain other than the worker's own, its id."""
    names = [slugify(line.model.name), slugify(line.strategy.name)]
    if line.shape_label:
        names.append(file_label(line.shape_label))
    names.append(slugify(line.board.name))
    if line.toolchain.spec:
        names.append(f"toolchain-{line.toolchain_id}")
    return "-".join(name for name in names if name) + ".csv"


def rows(key: SeriesKey, *, branch: str = "") -> Iterator[dict]:
    """Every commit of the series ``key`` (on ``branch`` where one is named), oldest first,
    as a dict of ``COLUMNS``."""
    results = Result.objects.in_series(key)
    if branch:
        results = results.on_branch(branch)
    ordered = results.chronological().values_list(*_FIELDS).iterator(chunk_size=2000)
    for _, measured in groupby(ordered, key=lambda row: row[0]):
        yield _row(_chosen(dict(zip(_FIELDS, row, strict=True)) for row in measured))


def _chosen(results: Iterable[dict]) -> dict:
    """Of one commit's results (oldest first), the newest successful, else the newest."""
    newest = newest_ok = None
    for result in results:
        newest = result
        if result["status"] == Result.Status.OK:
            newest_ok = result
    return newest_ok or newest


def _row(result: dict) -> dict:
    message = result["commit__message"].strip()
    error = result["error"].strip()
    return {
        "commit_sha": result["commit__sha"],
        "committed_at": result["commit__committed_at"].isoformat(),
        "branch": result["commit__branch"],
        "commit_title": message.splitlines()[0] if message else "",
        "run": result["run_id"],
        "result": result["id"],
        "status": result["status"],
        "planned_bytes": result["planned_bytes"],
        "intermediate_bytes": result["intermediate_bytes"],
        "lower_bound_bytes": result["lower_bound_bytes"],
        "measured_peak_bytes": result["measured_peak_bytes"],
        "latency_median_ms": result["latency_median_ms"],
        "latency_p90_ms": result["latency_p90_ms"],
        "reused_from": result["reused_from_id"],
        "error": error.splitlines()[0][:ERROR_CHARS] if error else "",
    }


def csv_lines(exported: Iterable[dict]) -> Iterator[str]:
    """The header and one line per row, as CSV text; empty cells for missing figures.
    Text that a spreadsheet would run as a formula (a commit title starting with "=") is
    led by an apostrophe, so opening an export runs nothing a commit author wrote."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")

    def line(cells) -> str:
        writer.writerow(cells)
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    yield line(COLUMNS)
    for row in exported:
        yield line(_cell(row[column]) for column in COLUMNS)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return "'" + value if value.startswith(_FORMULA_STARTS) else value
    return str(value)
