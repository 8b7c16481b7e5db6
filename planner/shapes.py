"""Input shape as an axis: symbolic dimensions, the points to measure, the bound to plan for.

A model with symbolic dimensions (``h``, ``w``, ``seq``) is compiled once per *point* (each
symbol given a value) and once at the *bounds* (each symbol at its largest value, what TVM's
planner reserves for when it plans symbolically). Declared in a manifest as::

    shapes = { h = [64, 256, 1024], w = "h" }                 # w follows h: 3 points
    shapes = { seq = { points = [128, 512, 2048], bound = 4096 } }

and on the command line as ``--shape h=64,256,1024 --shape w=h --shape seq=128,512:4096``.
A list's bound is its largest point. Independent symbols multiply (``h = [1, 2], w = [3, 4]``
is four points), up to :data:`MAX_POINTS`; a symbol named by a string takes the value of the
symbol it names at every point.

A model whose file does not name its symbolic dimensions itself is told where each symbol
is, input by input (:attr:`ShapeAxis.dims`)::

    dims = { seq = "input_ids:1" }                            # the input's name, then its dim
    dims = { seq = ["0:1", "1:1"] }                           # by position; one symbol, two places

and on the command line as ``--dim seq=input_ids:1`` (``--dim seq=0:1,1:1``). Inputs and
dimensions count from 0; every symbol of the axis then needs a place.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Points per model: each one is a full compile under every strategy.
MAX_POINTS = 64
#: Largest value of a dimension (the report's own limit).
MAX_DIMENSION = 1 << 40
_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class ShapeError(ValueError):
    """A shape declaration that cannot be measured; the message says which part and why."""


@dataclass(frozen=True)
class ShapeAxis:
    """The points of a model's symbolic dimensions, in the order they are declared."""

    points: tuple[dict[str, int], ...]
    bounds: dict[str, int] = field(default_factory=dict)
    #: Where each symbol is in the model's inputs (``{"seq": ("input_ids:1",)}``, see
    #: :func:`parse_place`), for a model that leaves its dimensions static and has the
    #: source make them symbolic; empty when the model names its symbols itself.
    dims: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def symbols(self) -> list[str]:
        return list(self.bounds)

    def at(self, points) -> ShapeAxis:
        """This axis measured at ``points`` only (a run's missing ones, a bisection's one):
        its bounds and places stay, so the model is built as for the whole axis."""
        return ShapeAxis(tuple(points), self.bounds, self.dims)

    def to_json(self) -> dict:
        data: dict[str, Any] = {
            "points": [dict(p) for p in self.points], "bounds": dict(self.bounds),
        }
        if self.dims:
            # Only when given: an axis without places keeps the JSON (and cache keys) it had.
            data["dims"] = {symbol: list(places) for symbol, places in self.dims.items()}
        return data

    @classmethod
    def from_json(cls, data: Any) -> ShapeAxis:
        """The axis :meth:`to_json` wrote; ShapeError on anything else."""
        if not isinstance(data, dict) or not (
            {"points", "bounds"} <= set(data) <= {"points", "bounds", "dims"}
        ):
            raise ShapeError("shapes must be an object with points and bounds")
        bounds = check_sizes(data["bounds"], "bounds")
        points = data["points"]
        if not isinstance(points, list) or not 1 <= len(points) <= MAX_POINTS:
            raise ShapeError(f"shapes must have 1 to {MAX_POINTS} points")
        checked = []
        for point in points:
            point = check_sizes(point, "a point")
            if set(point) != set(bounds):
                raise ShapeError(f"point {label(point)} does not give every symbol a value")
            for symbol, value in point.items():
                if value > bounds[symbol]:
                    raise ShapeError(f"point {label(point)}: {symbol} is above its bound")
            checked.append({s: point[s] for s in bounds})
        axis = cls(tuple(checked), bounds)
        return parse_dims(data["dims"], axis) if "dims" in data else axis


def parse_shapes(spec: Any) -> ShapeAxis:
    """The axis a manifest's ``shapes`` table declares (see the module docstring)."""
    if not isinstance(spec, Mapping) or not spec:
        raise ShapeError("shapes must be a table of symbols, e.g. { h = [64, 256], w = \"h\" }")
    values: dict[str, list[int]] = {}
    bounds: dict[str, int] = {}
    ties: dict[str, str] = {}
    for symbol, declared in spec.items():
        _symbol(symbol)
        if isinstance(declared, str):
            ties[symbol] = declared
            continue
        if isinstance(declared, Mapping):
            unknown = set(declared) - {"points", "bound"}
            if unknown or "points" not in declared:
                raise ShapeError(
                    f"shapes.{symbol}: expected {{ points = [...], bound = N }}"
                    + (f", not {sorted(unknown)[0]!r}" if unknown else "")
                )
            points = _point_values(declared["points"], symbol)
            bound = declared.get("bound", max(points))
            if not _is_size(bound):
                raise ShapeError(f"shapes.{symbol}.bound must be a positive integer")
            if bound < max(points):
                raise ShapeError(f"shapes.{symbol}: point {max(points)} is above the bound {bound}")
        else:
            points = _point_values(declared, symbol)
            bound = max(points)
        values[symbol], bounds[symbol] = points, bound
    for symbol, target in ties.items():
        if target not in values:
            raise ShapeError(
                f"shapes.{symbol} = {target!r} names no symbol with points"
                + (" (it follows another symbol itself)" if target in ties else "")
            )
    count = 1
    for points in values.values():
        count *= len(points)
    if count > MAX_POINTS:
        raise ShapeError(f"shapes declare {count} points; at most {MAX_POINTS} per model")
    order = list(spec)
    all_bounds = {s: bounds[ties.get(s, s)] for s in order}
    combos = itertools.product(*values.values())
    result = []
    for combo in combos:
        chosen = dict(zip(values, combo, strict=True))
        result.append({s: chosen[ties.get(s, s)] for s in order})
    return ShapeAxis(tuple(result), all_bounds)


def parse_cli(options: list[str]) -> ShapeAxis:
    """The axis of ``--shape`` options: ``h=64,256,1024``, ``w=h``, ``seq=128,512:4096``."""
    spec: dict[str, Any] = {}
    for option, symbol, text in _cli_options(
        options, "--shape", "expected SYMBOL=N,N,... or SYMBOL=OTHER", "is given twice"
    ):
        if _SYMBOL.match(text):
            spec[symbol] = text
            continue
        listed, _, bound = text.partition(":")
        try:
            points = [int(v) for v in listed.split(",")]
            spec[symbol] = {"points": points, "bound": int(bound)} if bound else points
        except ValueError:
            raise ShapeError(
                f"--shape {option!r}: points must be integers, e.g. {symbol}=64,256:1024"
            ) from None
    return parse_shapes(spec)


def parse_dims(spec: Any, axis: ShapeAxis) -> ShapeAxis:
    """``axis`` with the places a manifest's ``dims`` table gives its symbols (see the
    module docstring); ShapeError says which entry is wrong and what to write."""
    example = 'e.g. { seq = "input_ids:1" }'
    if not isinstance(spec, Mapping) or not spec:
        raise ShapeError(f"dims must be a table of symbols, {example}")
    dims: dict[str, tuple[str, ...]] = {}
    given: dict[tuple, str] = {}
    for symbol, declared in spec.items():
        _symbol(symbol)
        if symbol not in axis.bounds:
            raise ShapeError(
                f"dims.{symbol}: {symbol} has no points in shapes (its symbols: "
                f"{', '.join(axis.symbols)}); name the same symbol in both"
            )
        places = [declared] if isinstance(declared, str) else declared
        if (
            not isinstance(places, list) or not places
            or not all(isinstance(p, str) for p in places)
        ):
            raise ShapeError(
                f'dims.{symbol} must be "INPUT:DIM" or a list of them, {example} or '
                f'{{ {symbol} = ["0:1", "1:1"] }}'
            )
        for place in places:
            key = parse_place(place, f"dims.{symbol}")
            if key in given:
                raise ShapeError(
                    f"dims.{symbol} lists {place!r} twice" if given[key] == symbol
                    else f"dims: {place!r} is given to {given[key]} and to {symbol}"
                )
            given[key] = symbol
        dims[symbol] = tuple(places)
    missing = [s for s in axis.symbols if s not in dims]
    if missing:
        raise ShapeError(
            f"dims gives no place to {', '.join(missing)}: a model told where its symbols "
            f'are needs each of them, e.g. {missing[0]} = "input_ids:1"'
        )
    return ShapeAxis(axis.points, axis.bounds, dims)


def parse_place(text: str, what: str = "dims") -> tuple[str | int, int]:
    """``INPUT:DIM`` as (the input's name, or its position from 0; the dimension from 0).
    The last colon separates them, so an input named ``ids:0`` is ``ids:0:1``."""
    name, sep, dim = text.rpartition(":")
    if not sep or not name or not dim.isdigit() or len(dim) > 3 or len(name) > 128:
        raise ShapeError(
            f"{what}: {text[:80]!r} is not INPUT:DIM; write the input's name or position "
            'and the dimension, counting from 0, e.g. "input_ids:1" or "0:1"'
        )
    return (int(name) if name.isdigit() else name), int(dim)


def parse_cli_dims(options: list[str], axis: ShapeAxis) -> ShapeAxis:
    """``axis`` with the places of ``--dim`` options: ``seq=input_ids:1``, ``seq=0:1,1:1``."""
    spec = {
        symbol: text.split(",")
        for _, symbol, text in _cli_options(
            options, "--dim", "expected SYMBOL=INPUT:DIM, e.g. seq=input_ids:1",
            "is given twice; list its places: {symbol}=0:1,1:1",
        )
    }
    return parse_dims(spec, axis)


def _cli_options(
    options: list[str], flag: str, expected: str, twice: str
) -> list[tuple[str, str, str]]:
    """(option, symbol, text) of each ``SYMBOL=TEXT`` option; ShapeError for one without
    ``=`` or text (``expected``) and for a symbol given twice (``twice``, which may name
    ``{symbol}``)."""
    result, seen = [], set()
    for option in options:
        symbol, sep, text = option.partition("=")
        if not sep or not text:
            raise ShapeError(f"{flag} {option!r}: {expected}")
        if symbol in seen:
            raise ShapeError(f"{flag} {symbol} " + twice.format(symbol=symbol))
        seen.add(symbol)
        result.append((option, symbol, text))
    return result


def label(point: Mapping[str, int]) -> str:
    """``h=64,w=64``: a point as pages, alerts and artifact folders name it."""
    return ",".join(f"{symbol}={value}" for symbol, value in point.items())


def label_order(text: str) -> tuple:
    """A :func:`label`'s sort key: its values as numbers in the label's own symbol order, so
    h=64 comes before h=256 (as text it would not); "" (no axis) first."""
    key = []
    for part in filter(None, text.split(",")):
        value = part.partition("=")[2]
        key.append((0, int(value), "") if value.isdigit() else (1, 0, value))
    return tuple(key)


def file_label(text: str) -> str:
    """A :func:`label` as a downloaded file's name carries it: ``h=64_w=64`` for
    ``h=64,w=64``, letters, digits and ``=_.-`` only, so no shell, zip tool or file system
    reads a separator into it."""
    return re.sub(r"[^A-Za-z0-9=_.-]+", "_", text).strip("_")


def _point_values(declared: Any, symbol: str) -> list[int]:
    if not isinstance(declared, list) or not declared:
        raise ShapeError(f"shapes.{symbol} must be a list of sizes, a bound table or a symbol")
    if not all(_is_size(v) for v in declared):
        raise ShapeError(f"shapes.{symbol}: every point must be a positive integer")
    if len(set(declared)) != len(declared):
        raise ShapeError(f"shapes.{symbol} lists a point twice")
    return sorted(declared)


def check_sizes(value: Any, what: str) -> dict[str, int]:
    """``value`` if it maps symbol names to positive sizes; ShapeError says why not."""
    if not isinstance(value, dict) or not value:
        raise ShapeError(f"{what} must map symbols to sizes")
    for symbol, size in value.items():
        _symbol(symbol)
        if not _is_size(size):
            raise ShapeError(f"{what}: {symbol} must be a positive integer")
    return dict(value)


def _symbol(name: Any) -> None:
    if not isinstance(name, str) or not _SYMBOL.match(name):
        raise ShapeError(f"{str(name)[:80]!r} is not a symbol name")


def _is_size(value: Any) -> bool:
    return (
        isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_DIMENSION
    )
