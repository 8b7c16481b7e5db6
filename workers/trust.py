"""What the worker takes from a sandboxed child, and how: nothing on its word.

A child hands back JSON and files in its scratch folder. The worker

- reads each report through :func:`planner.report.parse_report` (type and range of every
  field); a report that breaks it becomes a failed report that says why;
- matches reports to the strategies and shape points it asked for: a missing, extra or
  duplicated report never shifts another strategy's or point's figures;
- owns every path: artifacts are looked up by fixed names in the folder the worker chose
  for that model and strategy, and taken only if they are plain files there (no link, no
  hard link to a file elsewhere, not over the size limit); a file that is not is skipped
  with a warning on its Result, and the run goes on;
- takes a file only as what its name says it is (:func:`not_as_named`): an ``.npz`` must
  be an archive of numeric arrays and nothing else (an ELF library with an archive appended
  is one a zip reader takes), a ``.json`` file must be JSON. What the import hands the
  compile is copied, then checked, and refused as a whole when one file is not.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from dashboard import json_bodies
from planner import npz_files
from planner.report import (
    ARTIFACT_NAMES,
    InvalidReport,
    StrategyReport,
    parse_report,
    point_folder,
    slug,
)
from planner.shapes import ShapeError, check_sizes, label

#: The inputs a model was checked on, one file per model (a board runs the build on them).
INPUTS_NAME = "inputs.npz"
#: Reports are a few kilobytes per strategy; a file far larger is not a report.
MAX_REPORTS_BYTES = 64 << 20


class HandoverError(RuntimeError):
    """What a child handed back cannot be read at all (no list of reports)."""


def read_reports(path: Path) -> list[StrategyReport]:
    """The reports in ``path``; each one that breaks the contract is a failed report."""
    data = read_json(path, MAX_REPORTS_BYTES)
    if not isinstance(data, list):
        raise HandoverError(f"its reports are a {type(data).__name__}, not a list")
    reports = []
    for item in data:
        try:
            reports.append(parse_report(item))
        except InvalidReport as exc:
            reports.append(_refused(item, exc))
    return reports


#: How much of a refused report's own error is kept: enough to say what failed.
MAX_REFUSED_ERROR = 2000


def _refused(item, exc: InvalidReport) -> StrategyReport:
    """A failed report in place of one that was refused: at its model, strategy and point
    where those are readable (so :func:`match` puts it where it belongs), saying why, with
    the start of the child's own error."""
    data = item if isinstance(item, dict) else {}
    model, strategy = data.get("model"), data.get("strategy")
    error = f"the compile's report was refused: {exc}"
    said = data.get("error")
    if isinstance(said, str) and said.strip():
        said = said.strip()
        if len(said) > MAX_REFUSED_ERROR:
            said = f"{said[:MAX_REFUSED_ERROR]} ... [cut]"
        error += f"; the compile said: {said}"
    point = data.get("shape_point") or {}
    try:
        point = check_sizes(point, "a point") if point else {}
    except ShapeError:
        point = {}
    return StrategyReport.failed(
        model if isinstance(model, str) else "",
        strategy if isinstance(strategy, str) else "",
        error,
        shape_point=point,
    )


def read_json(path: Path, limit: int):
    """JSON from a file a child wrote: a plain file, within ``limit`` bytes, nested no
    deeper than a request body may be."""
    handle = open_plain(path, limit)
    if isinstance(handle, str):
        raise HandoverError(handle)
    with handle:
        text = handle.read(limit + 1)
    try:
        return _parse_json(text)
    except HandoverError as exc:
        raise HandoverError(f"{path.name} {exc}") from None


def _parse_json(text: bytes):
    """The JSON ``text``; HandoverError says, with no file's name, why it is not that."""
    try:
        # Measured before parsing: json and everything that walks its result recurse per
        # level, and a RecursionError caught here could as well strike in the next walker.
        json_bodies.check_depth(text)
    except json_bodies.TooDeep:
        raise HandoverError(
            f"nests arrays and objects deeper than {json_bodies.MAX_DEPTH} levels"
        ) from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise HandoverError(f"is not JSON: {str(exc)[:200]}") from None


def not_as_named(handle, name: str, limit: int) -> str:
    """Why the open file ``handle`` is not what its ``name`` says it is, as text ("" when
    it is, or when its name claims nothing checked here). Read from its start; the caller
    closes it."""
    suffix = os.path.splitext(name)[1]
    handle.seek(0)
    if suffix == ".npz":
        try:
            npz_files.check_arrays(handle)
        except npz_files.UnsafeArrays as exc:
            return f"it is not an .npz archive of numeric arrays: {exc}"
    elif suffix == ".json":
        try:
            _parse_json(handle.read(limit + 1))
        except HandoverError as exc:
            return f"it {exc}"
    return ""


def match(
    reports: list[StrategyReport], *, model: str, source: str, strategies: list[str],
    points: list[dict[str, int]] | None = None,
) -> list[StrategyReport]:
    """One report per shape point of ``points`` and strategy of ``strategies``, point by
    point, in those orders; ``points`` defaults to the one empty point of a model without
    a shape axis.

    A report for another model, a strategy or point not asked for, or a second report of
    one strategy at one point is not taken; a strategy left without one at a point fails
    with the reason, naming the point.
    """
    points = list(points) if points else [{}]
    wanted = {label(point): point for point in points}
    by_key: dict[tuple[str, str], StrategyReport] = {}
    refused: list[str] = []
    # What the reports not taken said went wrong: a strategy left without a report carries
    # it, since the child's error is more use than knowing that none came back.
    errors: dict[str, tuple[str, str]] = {}
    for report in reports:
        at = label(report.shape_point)
        if report.model != model or report.strategy not in strategies or at not in wanted:
            where = f"{report.model[:80]!r} / {report.strategy[:80]!r}{_at(at[:80])}"
            refused.append(where)
            if report.error:
                errors.setdefault(report.strategy, (report.error, where))
                errors.setdefault("", (report.error, where))
        elif (report.strategy, at) in by_key:
            by_key[report.strategy, at] = StrategyReport.failed(
                model, report.strategy,
                "the compile returned two reports for this strategy" + _at(at),
                shape_point=dict(wanted[at]),
            )
        else:
            by_key[report.strategy, at] = report
    matched = []
    for at, point in wanted.items():
        for strategy in strategies:
            missing = "the compile returned no report for this strategy" + _at(at)
            said = errors.get(strategy) or errors.get("")
            if said:
                error = f"{said[0]} [{missing}; this error is from its report for {said[1]}]"
            else:
                error = missing + (
                    f" (it returned reports for {', '.join(refused[:3])})" if refused else ""
                )
            report = by_key.get((strategy, at)) or StrategyReport.failed(
                model, strategy, error, shape_point=dict(point),
            )
            report.model_source = source
            matched.append(report)
    return matched


def _at(shape_label: str) -> str:
    return f" at {shape_label}" if shape_label else ""


def collect_artifacts(report: StrategyReport, out: Path, *, model: str, limit: int) -> None:
    """Point ``report`` at the files of ``out`` (the compile's artifacts folder) that are
    its own by name, whatever paths the child wrote; warn about any not taken."""
    claimed = dict(report.artifacts)
    report.artifacts = {}
    report.inputs_file = ""
    # The compile writes each point's files in a folder of its own (point_folder); the
    # report's point, checked against the points asked for, picks it, never a path.
    out = point_folder(out, report.shape_point)
    folder = out / slug(model) / slug(report.strategy)
    for name in ARTIFACT_NAMES:
        path = folder / name
        if not os.path.lexists(path):
            if name in claimed:
                report.warnings.append(f"artifact {name} was named but not written; skipped")
            continue
        problem = plain_file(path, limit, as_named=True)
        if problem:
            report.warnings.append(f"artifact {name} skipped: {problem}")
        else:
            report.artifacts[name] = str(path)
    for name in sorted(set(claimed) - set(ARTIFACT_NAMES)):
        report.warnings.append(f"artifact {name[:80]!r} is not one Peakwatch writes; skipped")
    inputs = out / slug(model) / INPUTS_NAME
    if os.path.lexists(inputs):
        problem = plain_file(inputs, limit, as_named=True)
        if problem:
            report.warnings.append(f"{INPUTS_NAME} skipped: {problem}")
        else:
            report.inputs_file = str(inputs)


def copy_plain_files(source: Path, target: Path, names, limit: int) -> None:
    """Copy the files ``names`` that exist in ``source`` into ``target``; HandoverError
    for one that is not a plain file within ``limit`` bytes, or not what its name says
    (:func:`not_as_named`), which is then not left in ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = source / name
        if not os.path.lexists(path):
            continue
        handle = open_plain(path, limit)
        if isinstance(handle, str):
            raise HandoverError(f"{name}: {handle}")
        copied = target / name
        copied.parent.mkdir(parents=True, exist_ok=True)
        with handle, open(copied, "wb") as copy:
            shutil.copyfileobj(handle, copy)
        # The copy is checked, not the child's file: what is checked is what is read next.
        with open(copied, "rb") as copy:
            problem = not_as_named(copy, name, limit)
        if problem:
            copied.unlink()
            raise HandoverError(f"{name}: {problem}")


def plain_file(path: Path, limit: int, *, as_named: bool = False) -> str:
    """Why ``path`` is not a file to take ("" when it is one); with ``as_named``, also
    why it is not what its name says."""
    handle = open_plain(path, limit)
    if isinstance(handle, str):
        return handle
    with handle:
        return not_as_named(handle, path.name, limit) if as_named else ""


def open_plain(path: Path, limit: int):
    """``path`` opened for reading if it is a plain file of its own within ``limit`` bytes;
    otherwise the reason, as text.

    Opened without following a link, then checked on the open file, so that what was
    checked is what is read.
    """
    folder = os.path.abspath(os.path.dirname(path))
    if os.path.realpath(folder) != folder:
        # O_NOFOLLOW guards the last name only: a folder replaced by a link leads elsewhere.
        return "its folder is a link"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: the name is a symbolic link
            return "it is a link"
        return f"it cannot be opened ({exc.strerror})"
    info = os.fstat(fd)
    reason = ""
    if not stat.S_ISREG(info.st_mode):
        reason = "it is not a plain file"
    elif info.st_nlink != 1:
        # A hard link shares its content with a file outside the folder.
        reason = "it is a hard link"
    elif info.st_size > limit:
        reason = f"it is larger than {limit} bytes"
    if reason:
        os.close(fd)
        return reason
    return os.fdopen(fd, "rb")
