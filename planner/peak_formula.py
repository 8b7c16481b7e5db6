"""Peak bytes as a formula of a model's symbolic dimensions, from a plan valid at every shape.

Buffer sizes of shape arithmetic are polynomials in the symbols (``64*h*w*2`` bytes), at
least on the lattice of sizes a model is run at (strided convolutions divide). Each buffer
sits at an aligned offset, so what it takes of the arena is its size rounded up to the
alignment, ``64*ceil(n/64)``: no polynomial (a ``(1, seq)`` bool tensor takes 64 B at seq 32
and 64, 128 B at 128), so the rounding is kept in the formula (:class:`Aligned`) and only
the unrounded size is fitted. A plan made
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
import math
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

    def dominates(self, other: Polynomial, minimum: Mapping[str, int]) -> bool:
        """Whether this is >= ``other`` wherever every symbol is at least ``minimum``."""
        return (self - other).nonnegative_from(minimum)

    def scaled(self, factor: int | Fraction) -> Polynomial:
        return Polynomial.of(self.symbols, {e: c * factor for e, c in self.terms})

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


@dataclass(frozen=True)
class Aligned:
    """Bytes of buffers at aligned offsets: ``exact + sum(count * align(size))`` with
    ``align(n) = alignment * ceil(n / alignment)``.

    A size that is a multiple of the alignment for every value of the symbols is added to
    ``exact``; the others keep their rounding, which is what makes the sum exact at small
    points where a polynomial through the rounded sizes does not exist.
    """

    exact: Polynomial
    #: (unrounded size, how many times it is added), sorted so equal sums compare equal.
    rounded: tuple[tuple[Polynomial, int], ...] = ()
    alignment: int = 1

    @classmethod
    def of_size(
        cls, size: Polynomial, alignment: int, steps: Mapping[str, int] | None = None
    ) -> Aligned:
        """One buffer of unrounded ``size`` bytes, where each symbol is a multiple of its
        ``steps`` (1 where not given): a size that is then always a multiple of the
        alignment stays a polynomial (``16*h**2``, not ``128*ceil(h**2/8)`` for h in 8, 16,
        32)."""
        steps = steps or {}
        on_lattice = [
            c * prod(steps.get(s, 1) ** e for s, e in zip(size.symbols, exps, strict=True))
            for exps, c in size.terms
        ]
        if all((c / alignment).denominator == 1 for c in on_lattice):
            return cls(size, (), alignment)
        return cls(Polynomial.constant(size.symbols, 0), ((size, 1),), alignment)

    @classmethod
    def exactly(cls, size: Polynomial | Aligned) -> Aligned:
        return size if isinstance(size, Aligned) else cls(size)

    def __add__(self, other: Aligned) -> Aligned:
        counts = dict(self.rounded)
        for size, count in other.rounded:
            counts[size] = counts.get(size, 0) + count
        return Aligned(
            self.exact + other.exact,
            tuple(sorted(counts.items(), key=lambda item: _largest_first(item[0]))),
            max(self.alignment, other.alignment),
        )

    def __call__(self, values: Mapping[str, int]) -> Fraction:
        a = self.alignment
        return self.exact(values) + sum(
            (count * a * math.ceil(size(values) / a) for size, count in self.rounded),
            Fraction(0),
        )

    def dominates(self, other: Aligned, minimum: Mapping[str, int]) -> bool:
        """Whether this is >= ``other`` wherever every symbol is at least ``minimum``.

        Rounding is monotonic, so each rounded term of ``other`` is matched with one of
        this that is at least as large before rounding; ``n <= align(n) < n + alignment``
        bounds the rest. A False may keep a term a sharper test would drop, never drop a
        term that matters.
        """
        mine, theirs = dict(self.rounded), dict(other.rounded)
        # Equal terms first: matching one with a larger term instead would waste that one.
        for size in theirs:
            common = min(theirs[size], mine.get(size, 0))
            if common:
                mine[size] -= common
                theirs[size] -= common
        for size in sorted(theirs, key=lambda p: p.text()):
            while theirs[size]:
                match = next(
                    (p for p, n in mine.items() if n and p.dominates(size, minimum)), None
                )
                if match is None:
                    break
                mine[match] -= 1
                theirs[size] -= 1
        low, high = self.exact, other.exact
        for size, count in mine.items():
            low = low + size.scaled(count)
        alignment = max(self.alignment, other.alignment)
        for size, count in theirs.items():
            # Below n + alignment for any n; an integral n rounds up by alignment - 1.
            slack = alignment - (1 if _integral(size) else 0)
            high = high + (size + Polynomial.constant(size.symbols, slack)).scaled(count)
        return low.dominates(high, minimum)

    def text(self) -> str:
        parts = [] if not self.exact.terms and self.rounded else [self.exact.text()]
        a = self.alignment
        for size, count in self.rounded:
            over = size.scaled(Fraction(1, a))
            # Written n/d with n's coefficients coprime integers: ceil(seq/64), not
            # ceil((1/64)*seq).
            scale = math.lcm(*(c.denominator for _, c in over.terms))
            numerator = over.scaled(scale)
            common = math.gcd(scale, *(int(c) for _, c in numerator.terms))
            numerator, divisor = numerator.scaled(Fraction(1, common)), Fraction(scale, common)
            inner = numerator.text()
            if len(numerator.terms) > 1:
                inner = f"({inner})"
            ratio = inner if divisor == 1 else f"{inner}/{divisor}"
            parts.append(f"{count * a}*ceil({ratio})")
        return " + ".join(parts).replace("+ -", "- ")


def _largest_first(size: Polynomial) -> list:
    return [(-sum(e), [-x for x in e], -c) for e, c in size.terms]


def _integral(size: Polynomial) -> bool:
    return all(c.denominator == 1 for _, c in size.terms)


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
    """A buffer of the plan: its live interval and the bytes it takes of the arena, either a
    polynomial that is a multiple of the alignment already or an :class:`Aligned`."""

    id: str
    lower: int
    upper: int
    size: Polynomial | Aligned


def prune(terms: Sequence[Aligned], minimum: Mapping[str, int]) -> list[Aligned]:
    """``terms`` less those another term is at least as large as wherever every symbol is at
    least its ``minimum``: the maximum of what is left is the maximum of ``terms``."""
    kept: list[Aligned] = []
    for term in sorted(set(terms), key=lambda t: t.text()):
        if any(other.dominates(term, minimum) for other in kept):
            continue
        kept = [k for k in kept if not term.dominates(k, minimum)]
        kept.append(term)
    return kept


@dataclass
class SymbolicPlan:
    """Each buffer's offset as a maximum of polynomials, and the peak as one."""

    offsets: dict[str, list[Aligned]]
    peak: list[Aligned]

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

    Sizes are what each buffer takes of the arena, rounding included (offsets are sums of
    them). FormulaError when a maximum does not simplify below :data:`MAX_TERMS` terms.
    """
    buffers = [
        SymbolicBuffer(b.id, b.lower, b.upper, Aligned.exactly(b.size)) for b in buffers
    ]
    symbols = buffers[0].size.exact.symbols if buffers else tuple(bound)
    zero = Aligned.exactly(Polynomial.constant(symbols, 0))
    ordered = sorted(buffers, key=lambda b: (offsets_at_bound[b.id], b.lower, b.id))
    ends: dict[str, list[Aligned]] = {}
    offsets: dict[str, list[Aligned]] = {}
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
