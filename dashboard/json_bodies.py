"""JSON request bodies, refused before anything parses them when they nest too deep.

Python's ``json`` module recurses once per level of nesting, and so does any code that
walks what it returns: a body of a few kilobytes nested thousands deep (``[[[[...``) ends
in RecursionError, a 500, however well it is signed. Every JSON body Peakwatch accepts
(``POST /api/runs``, GitHub's webhooks, any DRF view through :class:`BoundedJSONParser`)
is measured first by :func:`nesting_depth`, a loop over its brackets, and refused (400)
beyond :data:`MAX_DEPTH`: GitHub's real payloads nest about six deep.
"""

from __future__ import annotations

import io
import json
import re

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

#: The deepest nesting of arrays and objects a request body may have.
MAX_DEPTH = 64

# A JSON string, escapes included (``\"`` does not end it); brackets inside it are text.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_OPENING = frozenset(b"[{")
_NOT_A_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


class TooDeep(ValueError):
    """The body nests arrays and objects deeper than the limit."""


def nesting_depth(data: bytes | str, *, stop_above: int | None = None) -> int:
    """How deep arrays and objects nest in the JSON text ``data`` (0: a scalar), counting
    only brackets outside strings; counting stops once the depth passes ``stop_above``.

    Iterative, so any depth is measured without recursing. Text that is not JSON gets
    some number: the parser that runs next refuses it.
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    # Strings removed and everything but brackets dropped, both at C speed: the loop below
    # only sees the brackets, however large the body.
    brackets = _STRING.sub(b"", data).translate(None, _NOT_A_BRACKET)
    depth = deepest = 0
    for byte in brackets:
        if byte in _OPENING:
            depth += 1
            if depth > deepest:
                deepest = depth
                if stop_above is not None and deepest > stop_above:
                    break
        else:
            depth -= 1
    return deepest


def check_depth(data: bytes | str, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`TooDeep` when ``data`` nests deeper than ``limit``."""
    if nesting_depth(data, stop_above=limit) > limit:
        raise TooDeep(f"the JSON body nests arrays and objects deeper than {limit} levels")


def loads(data: bytes | str):
    """``json.loads`` for a request body; :class:`TooDeep` (a ValueError) before parsing
    when it nests too deep."""
    check_depth(data)
    return json.loads(data)


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser, answering 400 to a body nested too deep before parsing it."""

    def parse(self, stream, media_type=None, parser_context=None):
        data = stream.read()
        try:
            check_depth(data)
        except TooDeep as exc:
            raise ParseError(str(exc)) from None
        return super().parse(io.BytesIO(data), media_type, parser_context)
