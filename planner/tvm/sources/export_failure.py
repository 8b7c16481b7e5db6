"""What a person needs of a ``torch.export`` failure: where it broke and what torch advises.

torch's message for a data-dependent branch (``if x.sum() > 0:``, Mixtral's expert routing)
runs to kilobytes: debugging switches and links first, the failing call and the fix after,
and torch logs the traced graph beside it. The summary puts the failing line (and the
line of the user's own file that led there) and torch's advice first, then the rest of the
message with graph dumps and debugging boilerplate cut.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import logging
import re
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from planner.tvm.steps import cut

#: torch's own loggers that print the traced graph when export fails.
GRAPH_LOGGERS = ("torch.fx.experimental.symbolic_shapes", "torch._export", "torch.export")
_FAILING_CALL = re.compile(
    r'The following call raised this error:\s*\n\s*File "([^"]+)", line (\d+), in (\S+)\n'
    r"[ \t]*(.*)"
)
#: Paragraphs of torch's message that say what to do.
_ADVICE = re.compile(r"^(to fix|consider|suggested fixes|you can|try |hint)", re.I)
#: Paragraphs that are debugging switches, links or graph dumps, not the error.
_NOISE = re.compile(
    r"^(for (more|extended|c\+\+)|if you suspect|caused by|the error above occurred|"
    r"\(these suggested fixes|def forward|#|graph)",
    re.I,
)


#: torch's record of a guard that fixed a symbol to a constant, with the line that did it:
#: ``eval Eq(s70, 16) [guard added] (transformers/models/mamba/modeling_mamba.py:426 in
#: slow_forward)``, logged at INFO, which torch does not show by default.
_FIXED = re.compile(r"eval Eq\((\w+), (-?\d+)\) \[guard added\] \((.+?):(\d+) in (\w+)\)")

#: Where the guards that fixed a dimension were added, kept by graph_dumps_held for
#: summarise (each ``(file, line, function)``); one export at a time per thread.
_fixed_at = threading.local()


@contextmanager
def graph_dumps_held() -> Iterator[io.StringIO]:
    """Hold back what torch logs and prints to stderr while exporting (the traced graph, on
    a failure), so that it does not land ahead of the error. Given back to stderr if the
    block succeeds; cut if it raises. Also reads, from torch's INFO records, where a guard
    fixed a dimension to a constant (the line a "specialized it to be a constant" error
    does not name), for :func:`summarise`."""
    held = io.StringIO()
    fixed: list[tuple[str, int, str]] = []
    _fixed_at.found = fixed
    shapes = logging.getLogger(GRAPH_LOGGERS[0])
    shown = shapes.getEffectiveLevel()

    def keep(record: logging.LogRecord) -> bool:
        message = record.getMessage()
        found = _FIXED.search(message) if record.name == shapes.name else None
        if found:
            fixed.append((found.group(3), int(found.group(4)), found.group(5)))
        if record.levelno < shown:
            return False  # asked for here, not by the user: read, never shown
        held.write(f"{record.levelname} {record.name}: {message}\n")
        return False

    loggers = [logging.getLogger(name) for name in GRAPH_LOGGERS]
    for logger in loggers:
        logger.addFilter(keep)
    level = shapes.level
    shapes.setLevel(min(shown, logging.INFO))
    try:
        with contextlib.redirect_stderr(held):
            yield held
    finally:
        shapes.setLevel(level)
        for logger in loggers:
            logger.removeFilter(keep)
    sys.stderr.write(held.getvalue())


#: Loggers that announce a draft export's guards as warnings: Peakwatch reports them as
#: assumptions of the Result instead.
DRAFT_LOGGERS = ("torch.export._draft_export", GRAPH_LOGGERS[0])


@contextmanager
def quiet_draft() -> Iterator[None]:
    """Drop what torch logs and prints while draft-exporting (a banner per guard found,
    each guard's evaluation): the guards reach the user as the Result's assumptions."""
    loggers = [logging.getLogger(name) for name in DRAFT_LOGGERS]

    def drop(record: logging.LogRecord) -> bool:
        return False

    for logger in loggers:
        logger.addFilter(drop)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        for logger in loggers:
            logger.removeFilter(drop)


def summarise(exc: BaseException, user_files: Sequence[Path] = ()) -> str:
    """``exc`` from ``torch.export`` as the place it broke, torch's advice, then the error."""
    text = str(exc)
    lines = []
    place = _failing_call(text)
    own = _own_line(exc, user_files)
    if place:
        lines.append(f"at {place}" + (f" (reached from {own})" if own and own not in place else ""))
    elif own:
        lines.append(f"at {own}")
    advice, rest = _advice_and_rest(text)
    if advice:
        lines.append("torch advises: " + " ".join(advice))
    lines.append(f"{type(exc).__name__}: {' '.join(rest[:1]) or text.strip()[:200]}")
    # torch's own explanation of the error, where it gives one as a list ("- Not all values
    # of seq ... satisfy the generated guard 3 <= ..."): which guard failed is what says
    # what to change; the message as a whole is cut, these lines are not dropped.
    lines += [line for line in rest[1:] if line.startswith("- ")]
    if "specialized it to be a constant" in text:
        lines += _fixed_lines()
    return cut("\n".join(lines))


def _fixed_lines() -> list[str]:
    """Where the export fixed a dimension declared symbolic, and what to change."""
    places = list(dict.fromkeys(getattr(_fixed_at, "found", [])))
    if not places:
        return []
    lines = []
    for path, number, function in places[:3]:
        code = linecache.getline(_source_path(path), number).strip()
        lines.append(f"the length was fixed at {path}:{number} in {function}" + (
            f": {code}" if code else ""
        ))
    lines.append(
        "a Python loop or branch over that length there makes it a constant (Mamba's "
        "slow path loops over the sequence), so no symbolic length exports: write that "
        "part with tensor operations, or compile each length as a model of its own (a "
        "factory parameter for the length, one [[models]] entry per length with params, "
        "no shape axis)"
    )
    return lines


def _source_path(path: str) -> str:
    """``path`` as torch names it (relative to site-packages for a library) on this disk."""
    if Path(path).is_file():
        return path
    for root in sys.path:
        candidate = Path(root or ".") / path
        if candidate.is_file():
            return str(candidate)
    return path


def _advice_and_rest(text: str) -> tuple[list[str], list[str]]:
    """torch's lines that say what to do (with the numbered checks under them), and the
    lines that state the error, less debugging switches, links and graph dumps."""
    advice: list[str] = []
    rest: list[str] = []
    in_advice = in_call = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            in_advice = in_call = False
            continue
        if _ADVICE.match(line):
            in_advice = True
            advice.append(line)
        elif in_advice and (raw[:1].isspace() or line[:1].isdigit()):
            advice.append(line)
        elif line.startswith("The following call raised"):
            in_call = True
        elif not in_call and not _NOISE.match(line):
            in_advice = False
            rest.append(line)
    return advice, rest


def _failing_call(text: str) -> str:
    found = _FAILING_CALL.search(text)
    if not found:
        return ""
    path, line, function, code = found.groups()
    return f"{path}:{line} in {function}: {code.strip()}"


def _own_line(exc: BaseException, user_files: Sequence[Path]) -> str:
    """The innermost line of one of ``user_files`` in ``exc``'s traceback."""
    wanted = {str(Path(f).resolve()) for f in user_files}
    if not wanted:
        return ""
    found = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if str(Path(frame.filename).resolve()) in wanted:
            found = f"{frame.filename}:{frame.lineno} in {frame.name}: {(frame.line or '').strip()}"
    return found
