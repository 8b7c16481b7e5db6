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
import logging
import re
import sys
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


@contextmanager
def graph_dumps_held() -> Iterator[io.StringIO]:
    """Hold back what torch logs and prints to stderr while exporting (the traced graph, on
    a failure), so that it does not land ahead of the error. Given back to stderr if the
    block succeeds; cut if it raises."""
    held = io.StringIO()

    def keep(record: logging.LogRecord) -> bool:
        held.write(f"{record.levelname} {record.name}: {record.getMessage()}\n")
        return False

    loggers = [logging.getLogger(name) for name in GRAPH_LOGGERS]
    for logger in loggers:
        logger.addFilter(keep)
    try:
        with contextlib.redirect_stderr(held):
            yield held
    finally:
        for logger in loggers:
            logger.removeFilter(keep)
    sys.stderr.write(held.getvalue())


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
    return cut("\n".join(lines))


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
