"""Finding a model, a commit or a pull request from what a user types: a name, words of a
title, a SHA prefix, a pull request's number.

Any string is a query. It is cut to ``MAX_QUERY`` characters and ``MAX_WORDS`` words,
control characters are dropped (a NUL never reaches PostgreSQL), and each kind answers at
most ``LIMIT`` matches, so no input makes a search slow or fail.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from django.db.models import Case, F, OuterRef, Q, Subquery, When
from django.db.models.functions import Left

from dashboard.models import Commit, Model, PullRequest, Run

#: Characters of a query that are read; the rest is left out (and the answer says so).
MAX_QUERY = 200
#: Words of a query that must all match a title; more are left out.
MAX_WORDS = 8
#: Matches of each kind shown at most.
LIMIT = 20
#: Characters of a commit message read for its title.
TITLE_CHARS = 300
#: The shortest SHA prefix looked up: fewer hex digits match too much to mean a commit.
MIN_SHA = 4

_HEX = re.compile(rf"[0-9a-f]{{{MIN_SHA},64}}")
_NUMBER = re.compile(r"#?(\d{1,9})")


@dataclass
class Query:
    """What is searched for: ``text`` as read, its ``words``, and whether it was cut."""

    text: str
    words: list[str]
    truncated: bool

    @classmethod
    def parse(cls, raw: str) -> Query:
        # Control and format characters (a NUL among them) and odd spaces read as spaces;
        # only so much is read of a long string.
        cleaned = "".join(
            " " if unicodedata.category(char)[0] in "CZ" else char
            for char in raw[: MAX_QUERY * 4]
        )
        text = " ".join(cleaned.split())
        truncated = len(text) > MAX_QUERY
        text = text[:MAX_QUERY].strip()
        words = text.split()
        return cls(
            text=text, words=words[:MAX_WORDS], truncated=truncated or len(words) > MAX_WORDS
        )

    @property
    def sha_prefix(self) -> str:
        """The query as a SHA prefix ("" when it is not one word of 4 to 64 hex digits)."""
        word = self.text.lower()
        return word if len(self.words) == 1 and _HEX.fullmatch(word) else ""

    @property
    def number(self) -> int | None:
        """The query as a pull request's number ("42" or "#42"), else None."""
        found = _NUMBER.fullmatch(self.text) if len(self.words) == 1 else None
        return int(found.group(1)) if found else None


@dataclass
class Found:
    """The matches of one kind, ``more`` when there were more than shown."""

    items: list = field(default_factory=list)
    more: bool = False

    @classmethod
    def of(cls, queryset) -> Found:
        items = list(queryset[: LIMIT + 1])
        return cls(items=items[:LIMIT], more=len(items) > LIMIT)


@dataclass
class Results:
    query: Query
    models: Found
    commits: Found
    pull_requests: Found

    @property
    def empty(self) -> bool:
        return not (self.models.items or self.commits.items or self.pull_requests.items)


def search(raw: str) -> Results:
    """Models, commits and pull requests matching ``raw``, each kind best match first."""
    query = Query.parse(raw)
    if not query.words:
        return Results(query, Found(), Found(), Found())
    commits = Found.of(_commits(query))
    for commit in commits.items:
        head = commit.message_head.strip()
        commit.search_title = head.splitlines()[0] if head else ""
    pull_requests = Found.of(_pull_requests(query))
    attach_latest_runs(commits.items + pull_requests.items)
    return Results(
        query, models=Found.of(_models(query)), commits=commits, pull_requests=pull_requests
    )


def _all_words(fields: tuple[str, ...], words: list[str]) -> Q:
    """Every word in one of ``fields`` (case-insensitive)."""
    condition = Q()
    for word in words:
        either = Q()
        for name in fields:
            either |= Q(**{f"{name}__icontains": word})
        condition &= either
    return condition


def _models(query: Query):
    # Of a model's own name or its repository's; the exact name first.
    return (
        Model.objects.filter(_all_words(("name", "repository__name"), query.words))
        .select_related("repository")
        .annotate(exact=Case(When(name__iexact=query.text, then=0), default=1))
        .order_by("exact", "name", "repository__name")
    )


def _commits(query: Query):
    matches = _all_words(("message",), query.words)
    if query.sha_prefix:
        matches |= Q(sha__startswith=query.sha_prefix)
    runs = Run.objects.filter(commit=OuterRef("pk")).order_by("-created_at", "-id")
    return (
        Commit.objects.filter(matches)
        .select_related("repository")
        .annotate(
            latest_run_id=Subquery(runs.values("id")[:1]),
            # A message may be 256 KiB: its title is in its first line.
            message_head=Left("message", TITLE_CHARS),
        )
        .defer("message")
        .order_by("-committed_at", "-id")
    )


def _pull_requests(query: Query):
    matches = _all_words(("title", "head_ref"), query.words)
    if query.number is not None:
        matches |= Q(number=query.number)
    if query.sha_prefix:
        matches |= Q(head_sha__startswith=query.sha_prefix)
    return (
        PullRequest.objects.filter(matches)
        .select_related("repository")
        .with_latest_run()
        # Open ones first, then those closed last.
        .order_by(F("closed_at").desc(nulls_first=True), "-number", "repository__name")
    )


def attach_latest_runs(rows: list) -> None:
    """Set ``latest_run`` on each of ``rows`` (annotated with ``latest_run_id``) from one
    query: the run whose status a list shows beside a commit, pull request or repository."""
    runs = Run.objects.select_related("commit").in_bulk(
        {row.latest_run_id for row in rows if row.latest_run_id}
    )
    for row in rows:
        row.latest_run = runs.get(row.latest_run_id)
