"""Rendered parts of pages kept in the database under the version of the data they show.

The overview's tables and its open alerts change only when results are recorded or alerts
triaged, yet rendering them was most of the page's time. They are rendered when a run
finishes (``refresh_overview``) and otherwise on the first request that finds the data
moved on, and every request in between reads one row: fast from a cold cache, and never
stale, because the version is read from the data on each request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from dashboard.models import Fragment


def version_of(*parts) -> str:
    # Hashed: what makes up a version (timestamps, counts) is of any length.
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def get_many(parts: dict[str, tuple[str, Callable[[], str]]]) -> dict[str, str]:
    """``get`` for several parts at once, ``{key: (version, render)}``: one query when all
    are stored for their versions."""
    stored = {
        key: (version, html)
        for key, version, html in Fragment.objects.filter(key__in=parts).values_list(
            "key", "version", "html"
        )
    }
    return {
        key: _fresh(key, version, render, stored.get(key))
        for key, (version, render) in parts.items()
    }


def get(key: str, version: str, render: Callable[[], str]) -> str:
    """The HTML stored under ``key`` if it was rendered for ``version``; else ``render()``,
    stored for the next request. Two requests racing both render; whichever writes last,
    a reader still compares versions, so an older rendering is never served as new."""
    stored = Fragment.objects.filter(key=key).values_list("version", "html").first()
    return _fresh(key, version, render, stored)


def _fresh(key: str, version: str, render: Callable[[], str], stored) -> str:
    if stored is not None and stored[0] == version:
        return stored[1]
    html = render()
    Fragment.objects.update_or_create(key=key, defaults={"version": version, "html": html})
    return html
