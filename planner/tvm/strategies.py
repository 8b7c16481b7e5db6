"""The strategies a model is compiled under, each with the variant of the module it plans.

- ``tvm-stock``: TVM's own planner, built the way ``relax.build`` builds by default;
- every strategy of the planner library (:mod:`planner.strategies`), planning what TVM's
  planner plans (the ``plain`` variant);
- ``BASE+rewrites``: a library strategy planning the module after the in-place and
  concat-elision rewrites, with kernel temporaries lifted into the plan;
- ``BASE+reorder`` and ``BASE+rewrites+reorder``: the same, with the operators first put in
  the order that needs the least memory (see :mod:`planner.tvm.plan.reorder`); program order is
  kept where that order's plan is not smaller;
- ``repo:path/to/file.py:function``: a tracked repository's own planner, run sandboxed on
  the plain problem (see :mod:`planner.tvm.repo_code`).

This module imports no TVM, so a manifest can be checked without loading the compiler.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from planner import strategies as library
from planner.tvm.repo_code import RepoCodeError, split_spec

STOCK = "tvm-stock"
REWRITES_SUFFIX = "+rewrites"
REPO_PREFIX = "repo:"
#: Library strategies worth offering with the rewrites: the rest plan the merged problem
#: no better than these.
REWRITE_BASES = ("best-fit", "optimal")
REORDER_SUFFIX = "+reorder"
#: The order is chosen by comparing whole plans in both orders, so a base is run three
#: times: only the fast one is offered.
REORDER_BASES = ("best-fit",)


class Variant(enum.Enum):
    STOCK = "stock"
    PLAIN = "plain"
    REWRITES = "rewrites"
    REPO = "repo"


class UnknownCompileStrategy(ValueError):
    pass


@dataclass(frozen=True)
class CompileStrategy:
    name: str
    variant: Variant
    #: The planner-library strategy that places the tensors (None for stock and repo).
    base: str | None = None
    #: For a repository's planner: ``path/to/file.py`` and the function in it.
    path: str = ""
    function: str = ""
    #: Whether the operators are first reordered for memory (``+reorder``).
    reorder: bool = False

    @property
    def lifts_temporaries(self) -> bool:
        return self.variant is Variant.REWRITES

    @property
    def summary(self) -> str:
        """One line for ``planner strategies -v``."""
        if self.variant is Variant.STOCK:
            return "TVM's own planner (StaticPlanBlockMemory), built as relax.build builds"
        if self.variant is Variant.REPO:
            return f"the repository's planner {self.function} in {self.path}"
        text = library.get_strategy(self.base).summary if self.variant is Variant.PLAIN else (
            f"{self.base} after in-place and concat-elision rewrites, kernel temporaries "
            "planned too"
        )
        if self.reorder:
            text += "; operators first put in the order that needs the least memory"
        return text


def registry() -> dict[str, CompileStrategy]:
    """Every built-in strategy by name, in the order they are listed to users."""
    found = {STOCK: CompileStrategy(STOCK, Variant.STOCK)}
    for name in library.strategy_names():
        found[name] = CompileStrategy(name, Variant.PLAIN, base=name)
    for base in REWRITE_BASES:
        found[base + REWRITES_SUFFIX] = CompileStrategy(
            base + REWRITES_SUFFIX, Variant.REWRITES, base=base
        )
    for base in REORDER_BASES:
        for variant, middle in ((Variant.PLAIN, ""), (Variant.REWRITES, REWRITES_SUFFIX)):
            name = base + middle + REORDER_SUFFIX
            found[name] = CompileStrategy(name, variant, base=base, reorder=True)
    return found


def strategy_names() -> list[str]:
    return list(registry())


def parse_repo_strategy(name: str) -> CompileStrategy:
    """``repo:planning/mine.py:plan`` as a strategy; the path is checked against the tree
    later, when the tree is there."""
    try:
        path, function = split_spec(name.removeprefix(REPO_PREFIX), "planner")
    except RepoCodeError:
        raise UnknownCompileStrategy(
            f"{name!r}: a repository planner is written repo:path/to/file.py:function"
        ) from None
    return CompileStrategy(name, Variant.REPO, path=path, function=function)


def lookup(name: str) -> CompileStrategy:
    if name.startswith(REPO_PREFIX):
        return parse_repo_strategy(name)
    found = registry().get(name)
    if found is None:
        raise UnknownCompileStrategy(
            f"unknown strategy {name}; known: {', '.join(strategy_names())}, "
            "or repo:path/to/file.py:function"
        )
    return found


def check_names(names) -> list[CompileStrategy]:
    """All of ``names`` as strategies; one message naming every unknown one."""
    found, unknown = [], []
    for name in names:
        try:
            found.append(lookup(name))
        except UnknownCompileStrategy as exc:
            unknown.append(str(exc) if name.startswith(REPO_PREFIX) else name)
    if unknown:
        raise UnknownCompileStrategy(
            f"unknown strategy {', '.join(unknown)}; known: {', '.join(strategy_names())}, "
            "or repo:path/to/file.py:function"
        )
    return found
