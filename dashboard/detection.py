"""Change detection: which series of a finished run got worse, and compared with what.

Planned bytes are deterministic: the same model, strategy and TVM give the same plan, so
any growth above the series' tolerance is a real change (:func:`tolerance_of`: what the
manifest at the commit sets, a series' admin row over it). A micro board's RAM is exact
too (its image and an emulated run measure it) and is held to the same tolerance.

Latency is noisy: a commit is compared with a window of earlier commits by a one-sided
Mann-Whitney U test over the timed samples (leaving out a commit whose median is an
outlier in the window: :func:`steady`), and only a median increase of at least the
repository's minimum effect counts.

The baseline of a commit is found by following first parents (its recorded ``parent_sha``),
so a commit is compared with its own history, not with whatever ran just before it; a pull
request's head is compared with its merge base first.

A series is (model, strategy, board, toolchain, shape point): a new TVM starts a new line,
and each point of a model's shape axis is compared only with the same point. Where a line
starts (no earlier result of its toolchain), it is compared with the same model, strategy
and board under the next older toolchain at the same commit, so a new TVM release that
makes a model worse alerts once, when it arrives.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from dashboard.models import Commit, Result, Run, SeriesThreshold
from dashboard.series_key import SeriesKey

#: How far up the first-parent chain a baseline is looked for.
MAX_ANCESTORS = 50


@dataclass(frozen=True)
class Finding:
    kind: str
    result: Result
    baseline: Result
    baseline_value: float
    value: float
    p_value: float | None = None
    #: The tolerance the change went past, and where it was set, as pages show it.
    tolerance: str = ""


def bytes_regressed(value: int, baseline: int, threshold: int) -> bool:
    """Planned bytes grew by more than ``threshold`` bytes."""
    return value - baseline > threshold


@dataclass(frozen=True)
class Tolerance:
    """How much worse one result's series may get before it alerts: planned bytes may grow
    by ``bytes`` or by ``percent`` of the baseline, whichever allows more; a median latency
    must rise by ``latency`` (a fraction) at least. ``source`` says where it was set."""

    bytes: int
    percent: float
    latency: float
    source: str

    def allowed_bytes(self, baseline: int) -> int:
        return max(self.bytes, math.floor(baseline * self.percent / 100))

    def describe_bytes(self, baseline: int) -> str:
        said = f"{self.bytes:,} B"
        if self.percent:
            said += f" or {self.percent:g}% ({self.allowed_bytes(baseline):,} B here)"
        return f"{said}, from {self.source}"

    def describe_latency(self) -> str:
        return f"a median {self.latency:.0%} slower at least, from {self.source}"


def tolerance_of(result: Result, repository, admin: dict) -> Tolerance:
    """``result``'s tolerance: a series' admin row (an override, in bytes), else what the
    manifest at its commit set (``details["alert_tolerance"]``, written by the worker),
    its gaps filled from the repository's settings."""
    said = (result.details or {}).get("alert_tolerance") or {}
    source = said.get("from") or "the repository's settings"
    bytes_, percent = said.get("bytes"), said.get("percent")
    if bytes_ is None:
        bytes_ = repository.bytes_threshold
    override = admin.get(result.series_key[:3])
    if override is not None:
        bytes_, percent, source = override, None, "the series' threshold in the admin"
    return Tolerance(
        bytes=int(bytes_), percent=float(percent or 0),
        latency=float(said.get("latency", repository.latency_min_increase)), source=source,
    )


def latency_test(
    samples: list[float], baseline_samples: list[float], *, min_increase: float, alpha: float
) -> tuple[bool, float | None]:
    """(regressed, p-value): is ``samples`` slower than ``baseline_samples``?

    Needs both a small p-value (one-sided Mann-Whitney U) and a median increase of at least
    ``min_increase``; a significant but tiny slowdown is not worth anyone's time.
    """
    if not samples or not baseline_samples:
        return False, None
    baseline_median = statistics.median(baseline_samples)
    if baseline_median <= 0:
        return False, None
    increase = statistics.median(samples) / baseline_median - 1
    p_value = mann_whitney_greater(samples, baseline_samples)
    return (increase >= min_increase and p_value < alpha), p_value


def mann_whitney_greater(x: list[float], y: list[float]) -> float:
    """The p-value of the one-sided Mann-Whitney U test that ``x`` is greater than ``y``,
    as SciPy's ``mannwhitneyu(x, y, alternative="greater")`` gives it: exact where a sample
    has at most 8 values and none tie, else the normal approximation with the tie and
    continuity corrections. Here because importing ``scipy.stats`` cost a worker or a web
    process a second (measured in the demo) for one small test."""
    n1, n2 = len(x), len(y)
    values = sorted(x + y)
    rank: dict[float, float] = {}
    ties: list[int] = []
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and values[end + 1] == values[start]:
            end += 1
        rank[values[start]] = (start + end) / 2 + 1  # the average of ranks start+1..end+1
        ties.append(end - start + 1)
        start = end + 1
    u = sum(rank[value] for value in x) - n1 * (n1 + 1) / 2
    if (n1 <= 8 or n2 <= 8) and max(ties) == 1:
        p = _exact_sf(round(u), n1, n2)
    else:
        n = n1 + n2
        tie_term = sum(t**3 - t for t in ties)
        spread = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
        numerator = u - n1 * n2 / 2 - 0.5
        if spread:
            z = numerator / spread
        else:  # every value the same: as SciPy divides by zero
            z = math.copysign(math.inf, numerator) if numerator else math.nan
        p = 0.5 * math.erfc(z / math.sqrt(2))
    return p if math.isnan(p) else min(max(p, 0.0), 1.0)


def _exact_sf(u: int, n1: int, n2: int) -> float:
    """P(U >= u) when the two samples are exchangeable: the share of the C(n1+n2, n1)
    orderings whose U is at least ``u``, counted exactly."""
    # ways[k]: orderings of i values of x and j of y with U = k, built up one value at a time.
    counts = [[[1] for _ in range(n2 + 1)] for _ in range(n1 + 1)]
    for i in range(1, n1 + 1):
        for j in range(1, n2 + 1):
            # The largest value is x's (it beats all j of y) or y's (it beats none of x).
            with_x, with_y = counts[i - 1][j], counts[i][j - 1]
            ways = [0] * (i * j + 1)
            for k, count in enumerate(with_x):
                ways[k + j] += count
            for k, count in enumerate(with_y):
                ways[k] += count
            counts[i][j] = ways
    ways = counts[n1][n2]
    return sum(ways[max(u, 0):]) / math.comb(n1 + n2, n1)


def steady(window: list[Result], min_increase: float) -> list[Result]:
    """``window`` without the commits whose median latency is an outlier among them.

    One noisy run (a busy machine) in the window skews the pooled samples: a later
    commit 155% slower went unreported on one toolchain while the same change alerted on
    another whose window held no such run. A commit is an outlier when its median is off
    the window's median of medians by more than three scaled median absolute deviations
    and by more than the minimum effect; with fewer than three commits none can be told
    apart, so all are kept.
    """
    if len(window) < 3:
        return window
    medians = [statistics.median(r.latency_samples_ms) for r in window]
    centre = statistics.median(medians)
    spread = 1.4826 * statistics.median(abs(m - centre) for m in medians)
    limit = max(3 * spread, min_increase * centre)
    kept = [r for r, m in zip(window, medians, strict=True) if abs(m - centre) <= limit]
    return kept or window


def ancestors(run: Run, limit: int = MAX_ANCESTORS) -> list[int]:
    """Commit ids to compare ``run`` with, nearest first.

    A pull request run starts at its merge base; any other run at its commit's parent.
    """
    commits = {
        sha: (pk, parent)
        for pk, sha, parent in Commit.objects.for_repository(run.repository).values_list(
            "id", "sha", "parent_sha"
        )
    }
    pull_request = run.pull_request
    if pull_request is not None and pull_request.base_sha:
        sha = pull_request.base_sha
    else:
        sha = run.commit.parent_sha
    chain: list[int] = []
    seen = set()
    while sha and sha in commits and sha not in seen and len(chain) < limit:
        seen.add(sha)
        pk, parent = commits[sha]
        if pk != run.commit_id:
            chain.append(pk)
        sha = parent
    return chain


def find_regressions(run: Run) -> list[Finding]:
    """Every bytes, board RAM or latency regression among ``run``'s successful results."""
    repository = run.repository
    results = list(
        Result.objects.for_run(run)
        .succeeded()
        .select_related("commit", "model", "strategy", "board", "toolchain")
    )
    chain = ancestors(run)
    if not results:
        return []
    findings = toolchain_regressions(run, results, chain)
    if not chain:
        return findings
    rank = {commit_id: i for i, commit_id in enumerate(chain)}
    # Per series, the newest successful result of each ancestor commit, nearest first.
    history: dict[SeriesKey, dict[int, Result]] = {}
    earlier = (
        Result.objects.succeeded()
        .filter(
            commit_id__in=chain,
            model_id__in={r.model_id for r in results},
            board_id__in={r.board_id for r in results},
        )
        .select_related("commit")
        .order_by("id")
    )
    for result in earlier:
        series = result.series_key
        history.setdefault(series, {})[result.commit_id] = result
    overrides = _threshold_overrides(repository)
    for result in results:
        series = result.series_key
        before = sorted(history.get(series, {}).values(), key=lambda r: rank[r.commit_id])
        if not before:
            continue
        nearest = before[0]
        tolerance = tolerance_of(result, repository, overrides)
        findings += _bytes_finding(result, nearest, tolerance)
        # A reused result measured nothing new: its samples are an older commit's.
        if result.is_reused or not result.latency_samples_ms:
            continue
        window = [r for r in before if r.latency_samples_ms][: repository.latency_window]
        pooled = [
            s for r in steady(window, tolerance.latency)
            for s in r.latency_samples_ms
        ]
        regressed, p_value = latency_test(
            result.latency_samples_ms,
            pooled,
            min_increase=tolerance.latency,
            alpha=repository.latency_p_value,
        )
        if regressed:
            findings.append(
                Finding(
                    "latency",
                    result,
                    window[0],
                    statistics.median(pooled),
                    statistics.median(result.latency_samples_ms),
                    p_value,
                    tolerance.describe_latency(),
                )
            )
    return findings


def toolchain_regressions(run: Run, results: list[Result], chain: list[int]) -> list[Finding]:
    """Results of ``run`` whose toolchain is new to their series (no result of it at any
    ancestor in ``chain``) and that are worse than the next older toolchain's result of the
    same model, strategy and board at the same commit."""
    from dashboard.compare import toolchain_order

    repository = run.repository
    at_commit = (
        Result.objects.for_commit(run.commit)
        .select_related("toolchain", "commit")
        .newest_by_series()
    )
    if len({key.toolchain_id for key in at_commit}) < 2:
        return []
    seen_before = set(
        Result.objects.succeeded()
        .filter(commit_id__in=chain, model_id__in={r.model_id for r in results})
        .values_list("model_id", "strategy_id", "board_id", "toolchain_id", "shape_label")
        .distinct()
    )
    overrides = _threshold_overrides(repository)
    findings = []
    for result in results:
        key = result.series_key
        if key in seen_before:
            continue
        older = _older_toolchain_result(result, at_commit, toolchain_order)
        if older is None:
            continue
        tolerance = tolerance_of(result, repository, overrides)
        findings += _bytes_finding(result, older, tolerance)
        if result.is_reused or not result.latency_samples_ms or not older.latency_samples_ms:
            continue
        regressed, p_value = latency_test(
            result.latency_samples_ms, older.latency_samples_ms,
            min_increase=tolerance.latency, alpha=repository.latency_p_value,
        )
        if regressed:
            findings.append(Finding(
                "latency", result, older, statistics.median(older.latency_samples_ms),
                statistics.median(result.latency_samples_ms), p_value,
                tolerance.describe_latency(),
            ))
    return findings


def _threshold_overrides(repository) -> dict[tuple[int, int, int], int]:
    """Per-series byte thresholds set for (model, strategy, board), under any toolchain."""
    return {
        (t.model_id, t.strategy_id, t.board_id): t.bytes_threshold
        for t in SeriesThreshold.objects.filter(model__repository=repository)
    }


#: What each kind of byte alert follows: planned bytes everywhere, and where a board
#: measures its own RAM (a micro board), that too, under the same tolerance.
BYTE_FIGURES = (("bytes", "planned_bytes"), ("ram", "board_ram_bytes"))


def _bytes_finding(result: Result, baseline: Result, tolerance: Tolerance) -> list[Finding]:
    """A finding for each byte figure (:data:`BYTE_FIGURES`) that ``result`` measured
    above ``baseline``'s by over what ``tolerance`` allows."""
    findings = []
    for kind, figure in BYTE_FIGURES:
        value, before = getattr(result, figure), getattr(baseline, figure)
        if value is None or before is None:
            continue
        if bytes_regressed(value, before, tolerance.allowed_bytes(before)):
            findings.append(Finding(
                kind, result, baseline, before, value,
                tolerance=tolerance.describe_bytes(before),
            ))
    return findings


def _older_toolchain_result(result: Result, at_commit: dict, order) -> Result | None:
    """The same model, strategy, board and shape point at the same commit under the newest
    toolchain older than ``result``'s; None when its toolchain is the oldest there."""
    mine = order(result.toolchain)
    candidates = [
        other for key, other in at_commit.items()
        if key[:3] == (result.model_id, result.strategy_id, result.board_id)
        and key.shape_label == result.shape_label and key.toolchain_id != result.toolchain_id
        and order(other.toolchain) < mine
    ]
    return max(candidates, key=lambda r: order(r.toolchain)) if candidates else None
