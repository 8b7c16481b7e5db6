"""The key that tells one series (one line of a trend) from another.

Its own module, below both ``models`` and ``querysets``: each of them names series, and
neither has to import the other to do so.
"""

from __future__ import annotations

from typing import NamedTuple


class SeriesKey(NamedTuple):
    """A model under one strategy, on one board, with one toolchain, at one shape point.

    The fields are named as the columns of ``Result``, ``Series`` and ``Alert``, so a key
    filters any of them: ``Result.objects.filter(**key._asdict())``.
    """

    model_id: int
    strategy_id: int
    board_id: int
    toolchain_id: int
    #: ``Result.shape_label`` ("h=256,w=256"); "" for a model without a shape axis.
    shape_label: str

    @classmethod
    def of(cls, row) -> SeriesKey:
        """The series of ``row``: anything with those five attributes (a Result, a Series,
        an Alert)."""
        return cls(row.model_id, row.strategy_id, row.board_id, row.toolchain_id, row.shape_label)
