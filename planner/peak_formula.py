"""Peak bytes as a formula of a model's symbolic dimensions, from a plan valid at every shape.

Buffer sizes of shape arithmetic are polynomials in the symbols (``64*h*w*2`` bytes), at
least on the lattice of sizes a model is run at (strided convolutions divide). A plan made
at the bounds keeps its *order* at every smaller shape if each buffer's offset is not a
number but the highest end among the buffers placed below it that live at the same time,
as Inductor's symbolic offsets are: ``offset_i(s) = max(end_j(s))``, ``end_i = offset_i +
size_i``. The peak is then a maximum of sums of size polynomials; terms another term
dominates over the whole range are dropped, so most models end with one polynomial.

Plain data only (no TVM): :mod:`planner.tvm.shape_axis` reads sizes off the lowered
symbolic module and hands them here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import prod

#: Terms kept per maximum before giving up: more would be a formula nobody reads, and the
#: pruning below is quadratic in them.
MAX_TERMS = 24


class FormulaError(ValueError):
    """No formula: sizes are not polynomials on the points, or the maximum does not simplify."""


@dataclass(frozen=True)
class Polynomial:
    """A polynomial with rational coefficients in ``symbols`` (exponent tuples as keys)."""

    symbols: tuple[str, ...]
    terms: tuple[tuple[tuple[int, ...], Fraction], ...]

    @classmethod
    def of(cls, symbols: Sequence[str], coefficients: Mapping) -> Polynomial:
        kept = sorted(
            ((tuple(e), Fraction(c)) for e, c in coefficients.items() if c != 0),
            key=lambda item: (-sum(item[0]), [-x for x in item[0]]),
        )
        return cls(tuple(symbols), tuple(kept))

    @classmethod
    def constant(cls, symbols: Sequence[str], value: int | Fraction) -> Polynomial:
        return cls.of(symbols, {(0,) * len(symbols): value})

    def __add__(self, other: Polynomial) -> Polynomial:
        total = dict(self.terms)
        for exponents, coefficient in other.terms:
            total[exponents] = total.get(exponents, 0) + coefficient
        return Polynomial.of(self.symbols, total)

    def __sub__(self, other: Polynomial) -> Polynomial:
        return self + Polynomial.of(other.symbols, {e: -c for e, c in other.terms})

    def __call__(self, values: Mapping[str, int]) -> Fraction:
        point = [values[s] for s in self.symbols]
        return sum(
            (c * prod(v**e for v, e in zip(point, exps, strict=True)) for exps, c in self.terms),
            Fraction(0),
        )

    def nonnegative_from(self, minimum: Mapping[str, int]) -> bool:
        """Whether this is >= 0 wherever every symbol is at least ``minimum``: every
        coefficient is non-negative once each symbol is written ``minimum + u``, u >= 0."""
        shifted: dict[tuple[int, ...], Fraction] = {}
        for exponents, coefficient in self.terms:
            # (m + u)^e expanded per symbol, multiplied out.
            parts = [
                [(k, _binomial(e, k) * minimum[s] ** (e - k)) for k in range(e + 1)]
                for s, e in zip(self.symbols, exponents, strict=True)
            ]
            for combo in itertools.product(*parts):
                key = tuple(k for k, _ in combo)
                shifted[key] = shifted.get(key, 0) + coefficient * prod(f for _, f in combo)
        return all(c >= 0 for c in shifted.values())

    def text(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for exponents, coefficient in self.terms:
            factors = [
                s if e == 1 else f"{s}**{e}"
                for s, e in zip(self.symbols, exponents, strict=True)
                if e
            ]
            magnitude = abs(coefficient)
            number = str(magnitude) if magnitude.denominator == 1 else f"({magnitude})"
            if factors and magnitude == 1:
                body = "*".join(factors)
            else:
                body = "*".join([number, *factors])
            parts.append(("- " if coefficient < 0 else "+ ") + body)
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]


def _binomial(n: int, k: int) -> int:
    result = 1
    for i in range(k):
        result = result * (n - i) // (i + 1)
    return result


def fit(
    symbols: Sequence[str],
    degrees: Sequence[int],
    samples: Sequence[Sequence[int]],
    evaluate: Callable[[dict[str, int]], int],
) -> Polynomial:
    """The polynomial of per-symbol ``degrees`` through ``evaluate`` on the grid of
    ``samples`` (``degrees[k] + 1`` distinct values for symbol ``k``): exact, with fractions.
    The caller checks it at other points; a grid determines it uniquely."""
    monomials = list(itertools.product(*(range(d + 1) for d in degrees)))
    axes = (values[: d + 1] for values, d in zip(samples, degrees, strict=True))
    grid = list(itertools.product(*axes))
    rows = []
    for point in grid:
        row = [Fraction(prod(v**e for v, e in zip(point, exps, strict=True))) for exps in monomials]
        rows.append(row + [Fraction(evaluate(dict(zip(symbols, point, strict=True))))])
    solution = _solve(rows)
    return Polynomial.of(symbols, dict(zip(monomials, solution, strict=True)))


def _solve(rows: list[list[Fraction]]) -> list[Fraction]:
    n = len(rows)
    for col in range(n):
        pivot = next((r for r in range(col, n) if rows[r][col] != 0), None)
        if pivot is None:
            raise FormulaError("sample points do not determine the polynomial")
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col] / rows[col][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col], strict=True)]
    return [rows[i][n] / rows[i][i] for i in range(n)]


@dataclass(frozen=True)
class SymbolicBuffer:
    """A buffer of the plan: its live interval and its (aligned) size as a polynomial."""

    id: str
    lower: int
    upper: int
    size: Polynomial


def prune(terms: Sequence[Polynomial], minimum: Mapping[str, int]) -> list[Polynomial]:
    """``terms`` less those another term is at least as large as wherever every symbol is at
    least its ``minimum``: the maximum of what is left is the maximum of ``terms``."""
    kept: list[Polynomial] = []
    for term in sorted(set(terms), key=lambda t: t.text()):
        if any((other - term).nonnegative_from(minimum) for other in kept):
            continue
        kept = [k for k in kept if not (term - k).nonnegative_from(minimum)]
        kept.append(term)
    return kept


@dataclass
class SymbolicPlan:
    """Each buffer's offset as a maximum of polynomials, and the peak as one."""

    offsets: dict[str, list[Polynomial]]
    peak: list[Polynomial]

    def offsets_at(self, values: Mapping[str, int]) -> dict[str, int]:
        return {i: int(max(t(values) for t in terms)) for i, terms in self.offsets.items()}

    def peak_at(self, values: Mapping[str, int]) -> int:
        return int(max((t(values) for t in self.peak), default=0))

    def expression(self) -> str:
        texts = [t.text() for t in self.peak] or ["0"]
        return texts[0] if len(texts) == 1 else f"max({', '.join(texts)})"


def symbolic_plan(
    buffers: Sequence[SymbolicBuffer],
    offsets_at_bound: Mapping[str, int],
    bound: Mapping[str, int],
    minimum: Mapping[str, int],
) -> SymbolicPlan:
    """The plan of ``offsets_at_bound`` (a valid plan at ``bound``) with every buffer kept
    above the ones it sits above there, at any shape where each symbol is >= ``minimum``.

    Sizes must be aligned already (offsets are sums of them). FormulaError when a maximum
    does not simplify below :data:`MAX_TERMS` terms.
    """
    symbols = next(iter(buffers)).size.symbols if buffers else tuple(bound)
    zero = Polynomial.constant(symbols, 0)
    ordered = sorted(buffers, key=lambda b: (offsets_at_bound[b.id], b.lower, b.id))
    ends: dict[str, list[Polynomial]] = {}
    offsets: dict[str, list[Polynomial]] = {}
    placed: list[SymbolicBuffer] = []
    for buffer in ordered:
        start = offsets_at_bound[buffer.id]
        below = [
            other
            for other in placed
            if other.lower < buffer.upper
            and buffer.lower < other.upper
            and offsets_at_bound[other.id] + int(other.size(bound)) <= start
        ]
        terms = prune([t for other in below for t in ends[other.id]] or [zero], minimum)
        if len(terms) > MAX_TERMS:
            raise FormulaError(f"the offset of {buffer.id} is a maximum of {len(terms)} terms")
        offsets[buffer.id] = terms
        ends[buffer.id] = [t + buffer.size for t in terms]
        placed.append(buffer)
    peak = prune([t for terms in ends.values() for t in terms] or [zero], minimum)
    if len(peak) > MAX_TERMS:
        raise FormulaError(f"the peak is a maximum of {len(peak)} terms")
    return SymbolicPlan(offsets, peak)
