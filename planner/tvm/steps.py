"""The steps a model goes through, named where one fails.

A model is built by its source (``source``: a file, a factory and its parameters),
exported from its framework (``export``), imported into Relax (``import``),
has its weights bound and constant-folded (``fold``), goes through the repository's
``pipeline``, is lowered to explicit allocations (``lower``), then each strategy's plan is
built (``build``) and run against the reference (``check``). A failure anywhere is a
report's error that starts with the step, ``"fold failed: AssertionError: ..."``, never a
traceback: the person reading it needs to know which tool to look at before anything else.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

#: The longest message a step's failure keeps: TVM and torch put whole modules and graphs
#: into theirs, and a Result's error is read in a table cell.
MAX_MESSAGE = 2000
#: The steps, in order; a message that starts with one of them names its step already.
STEPS = ("source", "export", "import", "fold", "pipeline", "lower", "plan", "build", "check")
_NAMES_STEP = re.compile(rf"^({'|'.join(STEPS)}) failed: ")


class StepFailed(ValueError):
    """``step`` failed; ``message`` says how, cut to :data:`MAX_MESSAGE`."""

    def __init__(self, step: str, message: str) -> None:
        self.step = step
        self.message = cut(message)
        super().__init__(f"{step} failed: {self.message}")


@contextmanager
def step(name: str) -> Iterator[None]:
    """Run the block as step ``name``: any exception leaves it as :class:`StepFailed`."""
    try:
        yield
    except StepFailed:
        raise
    except Exception as exc:  # whatever the compiler raises, the report names the step
        raise StepFailed(name, describe(exc)) from exc


def describe(exc: BaseException) -> str:
    """``Type: message``, the message cut (see :func:`cut`). A TVM check that failed
    without words of its own (``Check failed: axis < src_tensor_dim (-1 vs. 2) :``) is
    followed by where TVM made it, the C++ function and line its traceback names, which
    says what the check was about."""
    text = str(exc).strip()
    if text.endswith(":"):
        where = _native_place(exc)
        if where:
            text = f"{text} (checked in {where})"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _native_place(exc: BaseException) -> str:
    """The innermost C++ frame TVM's FFI put into ``exc``'s traceback, short: ``tvm::topi::
    strided_slice_with_axes, include/tvm/topi/transform.h:922``; "" where there is none."""
    import traceback

    frames = [
        f for f in traceback.extract_tb(exc.__traceback__)
        if f.filename.endswith((".h", ".cc", ".cpp", ".hpp"))
    ]
    if not frames:
        return ""
    frame = frames[-1]
    name = frame.name.split("(")[0].split(" ")[-1]
    path = re.sub(r"^.*?/(include|src)/", r"\1/", frame.filename)
    return f"{name}, {path}:{frame.lineno}"


def failure_text(exc: BaseException, default: str) -> str:
    """What a report's error says for ``exc``: the step it names (a StepFailed, or a
    source's ``"export failed: ..."``), ``plan`` for a plan refused or a repository planner
    that failed, else ``default``."""
    if isinstance(exc, StepFailed) or _NAMES_STEP.match(str(exc)):
        return cut(str(exc))
    from planner.plan import InvalidPlan
    from planner.tvm.repo_code import RepoCodeError

    named = "plan" if isinstance(exc, (InvalidPlan, RepoCodeError)) else default
    return str(StepFailed(named, describe(exc)))


def cut(text: str, limit: int = MAX_MESSAGE) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit].rstrip()} ... [{len(text) - limit:,} more characters cut]"
