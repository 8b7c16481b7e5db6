"""What Peakwatch stores: tracked repositories, their commits, runs and results."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlencode

from django.db import models
from django.urls import reverse
from django.utils.text import slugify

from dashboard.artifact_storage import get_artifact_storage
from dashboard.fields import EncryptedTextField
from dashboard.llm_memory import LLMMemory, function_note
from dashboard.querysets import (
    AlertQuerySet,
    CommitQuerySet,
    PullRequestQuerySet,
    RepositoryQuerySet,
    ResultQuerySet,
    RunQuerySet,
    SeriesQuerySet,
)
from dashboard.series_key import SeriesKey
from planner.shapes import file_label


class Repository(models.Model):
    """A git repository whose commits are run through the suite in its manifest."""

    name = models.SlugField(max_length=100, unique=True)
    clone_url = models.CharField(max_length=500, help_text="Any git URL or local path.")
    default_branch = models.CharField(max_length=200, default="main")
    run_branches = models.CharField(
        max_length=500, blank=True,
        help_text="Other branches whose pushes start runs: names or patterns such as "
                  "release/*, separated by spaces or commas (peakwatch.toml's [suite] "
                  "branches, on the default branch, adds more). Pushes to the default "
                  "branch always run.",
    )
    # Stored encrypted (dashboard/fields.py): HMAC verification needs the raw secret.
    webhook_secret = EncryptedTextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Change detection. Planned bytes are deterministic, so any growth above the threshold
    # is real; latency is noisy and needs a statistical test over earlier commits.
    bytes_threshold = models.BigIntegerField(
        default=0, help_text="Alert when planned bytes grow by more than this many bytes."
    )
    latency_min_increase = models.FloatField(
        default=0.05, help_text="Smallest median latency increase worth an alert (0.05 = 5%)."
    )
    latency_p_value = models.FloatField(
        default=0.01, help_text="Mann-Whitney U p-value below which a latency change is real."
    )
    latency_window = models.PositiveIntegerField(
        default=5, help_text="How many earlier commits the latency test compares against."
    )
    # Notifications: each is off while its field is empty.
    github_repository = models.CharField(
        max_length=200, blank=True, help_text="owner/name on GitHub, for statuses and comments."
    )
    github_token = EncryptedTextField(blank=True)
    slack_webhook_url = models.URLField(max_length=500, blank=True)

    class Trust(models.TextChoices):
        # Whose pull requests run without a maintainer's approval. Their code (models,
        # pipelines, planners) runs sandboxed either way; approval decides whether it runs.
        COLLABORATORS = "collaborators", "Collaborators (OWNER, MEMBER, COLLABORATOR)"
        EVERYONE = "everyone", "Everyone"
        NOBODY = "nobody", "Nobody: every pull request waits for approval"

    trust = models.CharField(max_length=20, choices=Trust.choices, default=Trust.COLLABORATORS)

    objects = RepositoryQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "repositories"
        ordering = ["name"]
        permissions = [
            # Who may change state from the pages: approve runs, triage alerts, re-run.
            ("maintain", "Can approve runs, triage alerts and change repository settings"),
        ]

    def __str__(self) -> str:
        return self.name

    def verifies_signature(self, body: bytes, signature: str) -> bool:
        """Whether ``signature`` (``sha256=<hex>``) is the HMAC of ``body`` under our secret.

        A repository without a secret verifies nothing: unsigned deliveries are never
        trusted.
        """
        if not self.webhook_secret or not signature.startswith("sha256="):
            return False
        expected = hmac.new(self.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(f"sha256={expected}", signature)

    @property
    def notifies_github(self) -> bool:
        return bool(self.github_repository and self.github_token)

    #: GitHub's author_association values of people with write access.
    TRUSTED_ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR")

    def trusts(self, *, author_association: str, from_fork: bool) -> bool:
        """Whether a pull request with this author and origin runs without approval."""
        if self.trust == self.Trust.EVERYONE:
            return True
        if self.trust == self.Trust.NOBODY:
            return False
        return not from_fork and author_association in self.TRUSTED_ASSOCIATIONS


class Commit(models.Model):
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="commits")
    sha = models.CharField(max_length=64)
    parent_sha = models.CharField(max_length=64, blank=True)
    branch = models.CharField(max_length=200, blank=True)
    author = models.CharField(max_length=200, blank=True)
    message = models.TextField(blank=True)
    committed_at = models.DateTimeField()
    # Code the repository has not vouched for: the head of a pull request it does not trust,
    # or a commit first met on none of its branches and tags (GitHub's refs/pull/*). Approval
    # belongs to the commit, not to one run: until a maintainer approves it (or the
    # repository pushes it to a branch), every run of it waits, whatever started it.
    from_outside = models.BooleanField(default=False)
    approved_by = models.CharField(max_length=150, blank=True)
    approved_at = models.DateTimeField(null=True, blank=True)

    objects = CommitQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["repository", "sha"], name="unique_commit_per_repo")
        ]
        indexes = [
            models.Index(fields=["repository", "committed_at"]),
            # Newest commits first across repositories: where the newest result of each
            # series is looked for (ResultQuerySet.latest_per_series).
            models.Index(fields=["committed_at", "id"], name="commit_chronological"),
            # A short sha in an address is a prefix match (``matching_sha``): on PostgreSQL
            # only a pattern index answers ``LIKE 'abc%'`` without reading every commit.
            models.Index(
                fields=["sha"], opclasses=["varchar_pattern_ops"], name="commit_sha_prefix"
            ),
            # Where a branch list walks from one name to the next (``branch_names``).
            models.Index(fields=["repository", "branch"], name="commit_branches"),
        ]
        ordering = ["committed_at", "id"]

    def __str__(self) -> str:
        return self.short_sha

    @property
    def short_sha(self) -> str:
        return self.sha[:10]

    @property
    def title(self) -> str:
        return self.message.strip().splitlines()[0] if self.message.strip() else ""

    @property
    def awaits_approval(self) -> bool:
        """Whether nothing of this commit may run before a maintainer approves it."""
        return self.from_outside and self.approved_at is None

    def parent(self) -> Commit | None:
        if not self.parent_sha:
            return None
        return Commit.objects.filter(repository=self.repository, sha=self.parent_sha).first()


class Model(models.Model):
    """A network in the tracked suite, as the manifest names it."""

    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="models")
    name = models.CharField(max_length=200)
    source = models.CharField(max_length=500, blank=True)
    description = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["repository", "name"], name="unique_model_per_repo")
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("model-trend", args=[self.repository.name, self.name])


class Strategy(models.Model):
    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)

    class Meta:
        verbose_name_plural = "strategies"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Board(models.Model):
    """A class of device results are measured on, served by the workers of its queue."""

    class Kind(models.TextChoices):
        CPU = "cpu", "Local CPU"
        CUDA = "cuda", "CUDA GPU"
        RPC = "rpc", "Remote board over TVM RPC"
        MICRO = "micro", "Micro-class board (C codegen)"

    name = models.SlugField(max_length=100, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.CPU)
    target = models.CharField(max_length=500, default="llvm")
    memory_capacity = models.BigIntegerField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    info = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def queue(self) -> str:
        from dashboard.queue import board_queue

        return board_queue(self.name)


class Toolchain(models.Model):
    """The Python environment a Result was compiled in: one TVM release, wheel or source build.

    The empty spec is the worker's own environment, the default for suites that list none.
    """

    spec = models.CharField(
        max_length=500,
        unique=True,
        blank=True,
        help_text=(
            "A pip requirement, a wheel file or a TVM source folder; empty: the worker's own."
        ),
    )
    tvm_version = models.CharField(max_length=100, blank=True)
    tvm_git_hash = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["spec"]

    def __str__(self) -> str:
        return self.spec or "worker environment"

    @property
    def label(self) -> str:
        if self.spec:
            return self.spec
        return f"worker environment (tvm {self.tvm_version})" if self.tvm_version else str(self)


def default_toolchain() -> int:
    """The worker's own environment, for Results recorded without a toolchain."""
    return Toolchain.objects.get_or_create(spec="")[0].pk


class Run(models.Model):
    """One commit's suite: every model x strategy x board in its manifest."""

    class Status(models.TextChoices):
        #: A pull request from outside: nothing of it runs before a maintainer approves.
        AWAITING_APPROVAL = "awaiting-approval", "awaiting approval"
        QUEUED = "queued"
        RUNNING = "running"
        #: Every result recorded, and every one of them ok.
        SUCCEEDED = "succeeded"
        #: Every result recorded; some failed, some are ok (``failed_results`` says how many).
        PARTIAL = "partial"
        #: The run itself failed (``error`` says why), or no result of it succeeded.
        FAILED = "failed"

    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="runs")
    commit = models.ForeignKey(Commit, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    trigger = models.CharField(max_length=50, default="manual")
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    log = models.TextField(blank=True)
    pull_request = models.ForeignKey(
        "PullRequest", on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    approved_by = models.CharField(max_length=150, blank=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    #: The boards the manifest names, once the run is planned: the queues it waits on.
    boards = models.JSONField(default=list, blank=True)
    #: How many of its Results failed, counted when the run closed (``actions.finish_run``).
    failed_results = models.PositiveIntegerField(default=0)

    objects = RunQuerySet.as_manager()

    #: The statuses of a run that is over: nothing more will be recorded for it.
    FINISHED = (Status.SUCCEEDED, Status.PARTIAL, Status.FAILED)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["status"]),
            # The overview's recent runs: the newest few, without sorting every run.
            models.Index(fields=["created_at", "id"], name="run_chronological"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.commit}"

    def get_absolute_url(self) -> str:
        return reverse("run-detail", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @classmethod
    def outcome(cls, *, recorded: int, failed: int) -> str:
        """The status of a run that closes with ``recorded`` Results, ``failed`` of them
        failed: a run only succeeds when everything it measured is ok, and only says
        "partial" when something is."""
        if recorded == 0 or failed >= recorded:
            return cls.Status.FAILED
        return cls.Status.PARTIAL if failed else cls.Status.SUCCEEDED

    @property
    def failures(self) -> str:
        """How many of its Results failed, where any did ("3 of 12 failed", "none of 12
        succeeded"); empty where none did."""
        failed = self.failed_results
        if not failed:
            return ""
        recorded = max(self.progress_done, failed)
        if failed >= recorded:
            return f"none of {recorded} succeeded"
        return f"{failed} of {recorded} failed"

    @property
    def status_text(self) -> str:
        """The status as a badge or a command says it, with how many Results failed where
        any did: "partial: 3 of 12 failed", "failed: none of 12 succeeded"."""
        if self.is_finished and self.failures:
            return f"{self.status}: {self.failures}"
        return self.status

    @property
    def awaits_approval(self) -> bool:
        return self.status == self.Status.AWAITING_APPROVAL

    @property
    def progress_percent(self) -> int:
        if not self.progress_total:
            return 100 if self.is_finished else 0
        return round(100 * self.progress_done / self.progress_total)


class Result(models.Model):
    """One model under one strategy on one board, for one run."""

    class Status(models.TextChoices):
        OK = "ok"
        FAILED = "failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="results")
    # Denormalised from the run so trend queries need no join through runs.
    commit = models.ForeignKey(Commit, on_delete=models.CASCADE, related_name="results")
    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="results")
    strategy = models.ForeignKey(Strategy, on_delete=models.PROTECT, related_name="results")
    board = models.ForeignKey(Board, on_delete=models.PROTECT, related_name="results")
    # A series is (model, strategy, board, toolchain): a new TVM is a new line, not a jump.
    toolchain = models.ForeignKey(
        Toolchain, on_delete=models.PROTECT, related_name="results", default=default_toolchain
    )
    # A model with a shape axis has one Result per point, and each point is a series of
    # its own: memory at h=64 and at h=1024 are different figures, not one noisy line.
    #: The point this was measured at, by symbol (``{"h": 256, "w": 256}``); empty for a
    #: model without a shape axis.
    shape_point = models.JSONField(default=dict, blank=True)
    #: ``planner.shapes.label(shape_point)`` ("h=256,w=256"), "" without an axis: the key
    #: that tells a point's series and Result apart.
    shape_label = models.CharField(max_length=500, blank=True, default="")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OK)
    planned_bytes = models.BigIntegerField(null=True, blank=True)
    #: What TVM's planner reserves when the model is built once for the whole range
    #: (symbols at their bound): upper-bound planning's cost against ``planned_bytes``.
    reserved_at_bound_bytes = models.BigIntegerField(null=True, blank=True)
    #: The strategy's peak as a formula of the symbols, and where it was checked.
    peak_formula = models.JSONField(default=dict, blank=True)
    intermediate_bytes = models.BigIntegerField(null=True, blank=True)
    output_bytes = models.BigIntegerField(null=True, blank=True)
    measured_peak_bytes = models.BigIntegerField(null=True, blank=True)
    #: The RAM a micro board's image uses (static RAM and the stack's measured high-water
    #: mark), as its build and run found it; a column of its own, since it is the figure
    #: a micro user's trend and alerts follow. None on a board that does not measure it.
    board_ram_bytes = models.BigIntegerField(null=True, blank=True)
    lower_bound_bytes = models.BigIntegerField(null=True, blank=True)
    latency_median_ms = models.FloatField(null=True, blank=True)
    latency_p90_ms = models.FloatField(null=True, blank=True)
    latency_samples_ms = models.JSONField(default=list, blank=True)
    outputs_match = models.BooleanField(null=True)
    max_abs_diff = models.FloatField(null=True, blank=True)
    compile_seconds = models.FloatField(null=True, blank=True)
    proven_optimal = models.BooleanField(null=True)
    tvm_version = models.CharField(max_length=100, blank=True)
    target = models.CharField(max_length=500, blank=True)
    environment = models.JSONField(default=dict, blank=True)
    details = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The compile cache: what was compiled (model content, strategy, TVM version, target).
    cache_key = models.CharField(max_length=64, blank=True, db_index=True)
    #: What the compile's import read of the checkout (``files``, ``folders``) and the cache
    #: key those paths gave at this commit (``key``): a later commit at which they give the
    #: same key reuses these figures (workers/compile_cache.py). Empty: not recorded.
    reads = models.JSONField(default=dict, blank=True)
    # Set when the figures were copied from an earlier identical compile, not measured anew.
    reused_from = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="reused_by"
    )

    objects = ResultQuerySet.as_manager()

    class Meta:
        constraints = [
            # A redelivered task finds its Result already there and updates it.
            models.UniqueConstraint(
                fields=["run", "model", "strategy", "board", "toolchain", "shape_label"],
                name="unique_result_per_run",
            )
        ]
        indexes = [
            models.Index(
                fields=["model", "strategy", "board", "toolchain", "shape_label", "commit"],
                name="result_series",
            ),
            # A model's trend reads only these columns of its successful results: on
            # PostgreSQL it is answered from the index alone, without touching the table.
            models.Index(
                fields=["model", "board", "strategy", "toolchain", "shape_label", "commit"],
                include=[
                    "run", "planned_bytes", "intermediate_bytes", "measured_peak_bytes",
                    "lower_bound_bytes", "latency_median_ms", "board_ram_bytes",
                ],
                condition=models.Q(status="ok"),
                name="result_trend",
            ),
        ]

    def __str__(self) -> str:
        at = f" at {self.shape_label}" if self.shape_label else ""
        return f"{self.model} / {self.strategy} / {self.board}{at} @ {self.commit}"

    @property
    def series_key(self) -> SeriesKey:
        """The series this belongs to, as ``Series.key`` names it."""
        return SeriesKey.of(self)

    @property
    def at_point(self) -> str:
        """" at h=256,w=256" where this was measured at a shape point, else ""."""
        return f" at {self.shape_label}" if self.shape_label else ""

    @property
    def file_stem(self) -> str:
        """What files downloaded of this result are named after, in safe characters:
        model, strategy, shape point, board and commit (``pool-best-fit-seq=512-cpu-
        02eeeeeeee``). Every point of an axis has the same artifacts, so without the point
        the downloads of two points would overwrite each other."""
        names = [slugify(self.model.name), slugify(self.strategy.name)]
        if self.shape_label:
            names.append(file_label(self.shape_label))
        names += [slugify(self.board.name), slugify(self.commit.short_sha)]
        return "-".join(names)

    def trend_url(self) -> str:
        """The model's page, opened at this result's shape point."""
        url = self.model.get_absolute_url()
        return f"{url}?{urlencode({'point': self.shape_label})}" if self.shape_label else url

    def savings_vs(self, other: Result) -> float | None:
        """Fraction of ``other``'s planned bytes this result saves (negative: uses more)."""
        if not self.planned_bytes or not other.planned_bytes:
            return None
        return 1 - self.planned_bytes / other.planned_bytes

    @property
    def bound_ratio(self) -> float | None:
        if not self.intermediate_bytes or not self.lower_bound_bytes:
            return None
        return self.intermediate_bytes / self.lower_bound_bytes

    @property
    def is_reused(self) -> bool:
        return self.reused_from_id is not None

    def artifact_named(self, name: str) -> Artifact | None:
        # Uses a prefetched artifacts list when there is one.
        return next((a for a in self.artifacts.all() if a.name == name), None)

    @property
    def has_plan(self) -> bool:
        return self.artifact_named("plan.json") is not None


class Series(models.Model):
    """One line of a trend: a model under one strategy, on one board, with one toolchain.

    Summarised whenever one of its Results is recorded, rerun or removed
    (``actions.summarise_series``), so pages read a row per line instead of its history.
    """

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="series")
    strategy = models.ForeignKey(Strategy, on_delete=models.CASCADE, related_name="+")
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="+")
    toolchain = models.ForeignKey(Toolchain, on_delete=models.CASCADE, related_name="+")
    #: The shape point of the line (``Result.shape_label``), "" for a model without an axis.
    shape_label = models.CharField(max_length=500, blank=True, default="")
    #: The newest successful Result (latest commit; of one commit run twice, the later run).
    latest_result = models.ForeignKey(
        Result, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    #: Commits with a successful Result, each counted once however often it ran.
    commits = models.PositiveIntegerField(default=0)
    #: The points worth drawing, oldest first, at most ``trends.MAX_POINTS``: arrays of
    #: ``trends.STORED_POINT_FIELDS``.
    points = models.JSONField(default=list, blank=True)
    #: The overview's cell for this line (newest figures and a sparkline), rendered when it
    #: was summarised; empty until then.
    latest_html = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SeriesQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "series"
        constraints = [
            models.UniqueConstraint(
                fields=["model", "strategy", "board", "toolchain", "shape_label"],
                name="unique_series",
            )
        ]

    def __str__(self) -> str:
        line = f"{self.model} / {self.strategy} / {self.board} / {self.toolchain}"
        return f"{line} at {self.shape_label}" if self.shape_label else line

    @property
    def key(self) -> SeriesKey:
        return SeriesKey.of(self)


class TrendSnapshot(models.Model):
    """A model's trend over every series, as the trend API serves it (less its alerts, read
    live), stored whenever one of its series is summarised: an unfiltered trend is one row.
    """

    model = models.OneToOneField(Model, on_delete=models.CASCADE, related_name="trend_snapshot")
    #: ``"commits":[...],"series":[...]``: the payload's members built from the series.
    body = models.TextField()
    #: The trend page's history table (``trends.Trend.history``), and as the page shows it.
    history = models.JSONField(default=dict)
    history_html = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"trend of {self.model}"


class Fragment(models.Model):
    """A part of a page rendered for one version of the data it shows (``fragments.get``):
    pages read it back instead of rendering it again, whatever the cache holds, and render
    it anew once the data's version moves on."""

    key = models.CharField(max_length=200, unique=True)
    #: A digest of what the data looked like when ``html`` was rendered.
    version = models.CharField(max_length=64)
    html = models.TextField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.key


def artifact_path(artifact: Artifact, filename: str) -> str:
    result = artifact.result
    return f"results/{result.run_id}/{result.pk}/{filename}"


class Artifact(models.Model):
    result = models.ForeignKey(Result, on_delete=models.CASCADE, related_name="artifacts")
    name = models.CharField(max_length=200)
    file = models.FileField(
        upload_to=artifact_path, storage=get_artifact_storage, max_length=500
    )
    size = models.BigIntegerField(default=0)
    content_type = models.CharField(max_length=100, default="application/octet-stream")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["result", "name"], name="unique_artifact_name")
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("artifact-download", args=[self.pk])

    @property
    def download_name(self) -> str:
        """The file name a download gets: the artifact's own (``plan.json``), led by its
        result's ``file_stem`` where the result is at a shape point, whose every point
        has a ``plan.json`` of its own."""
        result = Result.objects.select_related("model", "strategy", "board", "commit").get(
            pk=self.result_id
        )
        return f"{result.file_stem}-{self.name}" if result.shape_label else self.name


class PullRequest(models.Model):
    """A GitHub pull request whose head is run and compared against its merge base."""

    repository = models.ForeignKey(
        Repository, on_delete=models.CASCADE, related_name="pull_requests"
    )
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=500, blank=True)
    url = models.URLField(max_length=500, blank=True)
    head_ref = models.CharField(max_length=200, blank=True)
    head_sha = models.CharField(max_length=64)
    base_ref = models.CharField(max_length=200, blank=True)
    # The merge base of head and the base branch: what the pull request really changes.
    base_sha = models.CharField(max_length=64, blank=True)
    comment_id = models.BigIntegerField(
        null=True, blank=True, help_text="Our summary comment, edited on later pushes."
    )
    author = models.CharField(max_length=200, blank=True)
    author_association = models.CharField(max_length=50, blank=True)
    from_fork = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)
    #: When GitHub said it was closed (merged or not); None while open or since reopened.
    closed_at = models.DateTimeField(null=True, blank=True)
    merged = models.BooleanField(default=False)

    objects = PullRequestQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["repository", "number"], name="unique_pr_per_repo")
        ]
        ordering = ["-number"]

    def __str__(self) -> str:
        return f"{self.repository} #{self.number}"

    def get_absolute_url(self) -> str:
        return reverse("pull-request-compare", args=[self.repository.name, self.number])

    @property
    def state(self) -> str:
        """"open", "merged" or "closed", as GitHub last said."""
        if self.closed_at is None:
            return "open"
        return "merged" if self.merged else "closed"


class SeriesThreshold(models.Model):
    """A per-series override of the repository's planned-bytes alert threshold."""

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="thresholds")
    strategy = models.ForeignKey(Strategy, on_delete=models.CASCADE, related_name="+")
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="+")
    bytes_threshold = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["model", "strategy", "board"], name="unique_threshold_per_series"
            )
        ]

    def __str__(self) -> str:
        return f"{self.model} / {self.strategy} / {self.board}: {self.bytes_threshold} B"


class Alert(models.Model):
    """One series that got worse at one commit, compared with a baseline result.

    One per series, commit and kind, however many runs measure the commit (a pull request's
    run, then CI's, retries, redeliveries): it follows the newest figure measured and keeps
    the state a maintainer gave it (``actions.raise_alert``).
    """

    class Kind(models.TextChoices):
        BYTES = "bytes", "Planned bytes"
        LATENCY = "latency", "Latency"
        #: A micro board's RAM (static RAM and stack), as its image and run measured it.
        RAM = "ram", "Board RAM"

    class State(models.TextChoices):
        NEW = "new"
        ACKNOWLEDGED = "acknowledged"
        #: The commit meant to change the model: closed without being a regression.
        INTENDED = "intended", "Intended change"
        INVALID = "invalid"
        FIXED = "fixed"

    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="alerts")
    commit = models.ForeignKey(Commit, on_delete=models.CASCADE, related_name="alerts")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="alerts")
    result = models.ForeignKey(Result, on_delete=models.CASCADE, related_name="alerts")
    baseline = models.ForeignKey(Result, on_delete=models.CASCADE, related_name="+")
    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="alerts")
    strategy = models.ForeignKey(Strategy, on_delete=models.CASCADE, related_name="+")
    board = models.ForeignKey(Board, on_delete=models.CASCADE, related_name="+")
    toolchain = models.ForeignKey(
        Toolchain, on_delete=models.CASCADE, related_name="+", default=default_toolchain
    )
    #: The shape point that got worse (its Result's ``shape_label``); "" without an axis.
    shape_label = models.CharField(max_length=500, blank=True, default="")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    baseline_value = models.FloatField()
    value = models.FloatField()
    p_value = models.FloatField(null=True, blank=True)
    #: The tolerance the change went past and where it was set ("4,096 B or 1% (...),
    #: from peakwatch.toml: the model's"), as detection found it.
    tolerance = models.CharField(max_length=300, blank=True, default="")
    state = models.CharField(max_length=20, choices=State.choices, default=State.NEW)
    #: ``value`` before a later run of the commit measured another figure (the alert then
    #: took the new one), and when; None while the figure first measured stands.
    previous_value = models.FloatField(null=True, blank=True)
    remeasured_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = AlertQuerySet.as_manager()

    class Meta:
        constraints = [
            # Every run of a commit measures its series again (a pull request's run, CI's,
            # a retry), and detection runs again when a late baseline arrives: each finds
            # the alert already there instead of raising another, and its triage stands.
            models.UniqueConstraint(
                fields=[
                    "commit", "model", "strategy", "board", "toolchain", "shape_label", "kind"
                ],
                name="unique_alert_per_series_commit_kind",
            )
        ]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        # The toolchain too: a suite with two TVMs has each series twice.
        # And the point: one commit can grow a model at h=256 and leave h=64 alone.
        return (
            f"{self.get_kind_display()} of {self.model} / {self.strategy} / {self.board}"
            f"{self.at_point} with {self.toolchain.label} @ {self.commit}"
        )

    @property
    def series_key(self) -> SeriesKey:
        return SeriesKey.of(self)

    @property
    def at_point(self) -> str:
        """" at h=256,w=256" where the alert is on a shape point, else ""."""
        return f" at {self.shape_label}" if self.shape_label else ""

    @property
    def function_note(self) -> str:
        """For an LLM deployment, the function that moved ("decode grew most: ... ; worst
        function prefill"); "" for any other model."""
        return function_note(
            LLMMemory.of(self.baseline.details), LLMMemory.of(self.result.details)
        )

    def trend_url(self) -> str:
        """The model's page opened on this alert: its board and toolchain, its shape point
        and its strategy's curve."""
        query = {"board": self.board.name, "toolchain": self.toolchain_id}
        if self.shape_label:
            query["point"] = self.shape_label
        query["strategy"] = self.strategy.name
        return f"{self.model.get_absolute_url()}?{urlencode(query)}"

    @property
    def change(self) -> float:
        return self.value - self.baseline_value

    @property
    def relative_change(self) -> float | None:
        if not self.baseline_value:
            return None
        return self.change / self.baseline_value

    @property
    def is_open(self) -> bool:
        return self.state in (self.State.NEW, self.State.ACKNOWLEDGED)

    @property
    def kind_rank(self) -> int:
        """Where this alert's kind comes among a series' alerts of one commit: bytes, board
        RAM, latency; exact figures before noisy ones."""
        return [self.Kind.BYTES, self.Kind.RAM, self.Kind.LATENCY].index(self.kind)

    @property
    def kind_in_a_sentence(self) -> str:
        """"planned bytes", "latency", "board RAM": the kind as a sentence names it."""
        label = self.get_kind_display()
        return label[:1].lower() + label[1:]

    @property
    def in_bytes(self) -> bool:
        """Whether this alert's figures are bytes (planned bytes, a board's RAM), not
        milliseconds."""
        return self.kind != self.Kind.LATENCY

    def format_figure(self, value: float) -> str:
        """``value`` as this alert's kind is read: bytes or milliseconds."""
        return f"{value:,.0f} B" if self.in_bytes else f"{value:,.3f} ms"

    @property
    def remeasured_note(self) -> str:
        """"re-measured: 131,072 B → 524,288 B" once a later run of the commit measured
        another figure, else ""."""
        if self.previous_value is None:
            return ""
        before, now = self.format_figure(self.previous_value), self.format_figure(self.value)
        return f"re-measured: {before} → {now}"

    @property
    def is_toolchain_change(self) -> bool:
        """Whether the baseline is another toolchain at the same commit: a new TVM made
        this series worse, not a commit."""
        return self.baseline.toolchain_id != self.toolchain_id

    def compare_url(self) -> str:
        if self.is_toolchain_change:
            query = urlencode({"base": self.baseline.toolchain.spec, "head": self.toolchain.spec})
            url = reverse("toolchain-compare", args=[self.repository.name, self.commit.sha])
            return f"{url}?{query}"
        return reverse(
            "compare-commits",
            args=[self.repository.name, self.baseline.commit.sha, self.commit.sha],
        )

    def plan_diff_url(self) -> str:
        return reverse("plan-diff", args=[self.baseline_id, self.result_id])


class WebhookDelivery(models.Model):
    """Every webhook request received, with what became of it."""

    class Outcome(models.TextChoices):
        QUEUED = "queued", "Queued for processing"
        PROCESSED = "processed", "Processed"
        PING = "ping", "Ping answered"
        IGNORED = "ignored", "Ignored (event or action not tracked)"
        DUPLICATE = "duplicate", "Redelivery of a delivery already accepted"
        BAD_SIGNATURE = "bad-signature", "Rejected: signature does not verify"
        MALFORMED = "malformed", "Rejected: malformed payload"
        UNKNOWN_REPOSITORY = "unknown-repository", "Rejected: unknown repository"
        FAILED = "failed", "Processing failed"

    repository = models.ForeignKey(
        Repository, on_delete=models.SET_NULL, null=True, blank=True, related_name="deliveries"
    )
    guid = models.CharField("X-GitHub-Delivery", max_length=100, blank=True)
    event = models.CharField(max_length=100, blank=True)
    action = models.CharField(max_length=100, blank=True)
    # Whether the delivery was verified and taken on; a redelivery of an accepted one is a
    # duplicate, while one rejected before (a wrong secret since fixed) may be retried.
    accepted = models.BooleanField(default=False)
    outcome = models.CharField(max_length=30, choices=Outcome.choices)
    status_code = models.PositiveSmallIntegerField()
    detail = models.TextField(blank=True)
    # Kept only for verified deliveries: the task re-reads it by id.
    payload = models.JSONField(null=True, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)


    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["guid"],
                condition=models.Q(accepted=True),
                name="unique_accepted_delivery",
            )
        ]
        ordering = ["-received_at", "-id"]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.event or 'delivery'} {self.guid or self.pk}: {self.outcome}"


class ApiToken(models.Model):
    """A bearer token for ``POST /api/runs``; only its SHA-256 is stored."""

    PREFIX = "pw_"

    name = models.CharField(max_length=200)
    token_hash = models.CharField(max_length=64, unique=True)
    # The scope: a token for one repository cannot trigger runs of another. None: every
    # repository, which only an explicit --all-repositories makes (create_api_token).
    repository = models.ForeignKey(
        Repository, on_delete=models.CASCADE, null=True, blank=True, related_name="api_tokens"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.scope})"

    @property
    def scope(self) -> str:
        """What the token may start runs of, in words."""
        if self.repository_id is None:
            return "all repositories"
        return f"repository {self.repository.name}"

    @staticmethod
    def generate() -> str:
        return ApiToken.PREFIX + secrets.token_urlsafe(32)

    @staticmethod
    def hash(token: str) -> str:
        # Tokens are 256 random bits: a plain digest is enough, no slow KDF needed.
        return hashlib.sha256(token.encode()).hexdigest()

    def allows(self, repository: Repository) -> bool:
        return self.repository_id is None or self.repository_id == repository.pk


class RunRequest(models.Model):
    """A run asked for through ``POST /api/runs`` by a revision Peakwatch had to look up in
    the repository's mirror first (a branch, a commit not recorded yet): what CI polls until
    it names the run, or says why there is none."""

    class Status(models.TextChoices):
        RESOLVING = "resolving"
        #: The revision was found and recorded: ``run`` is its run.
        RESOLVED = "resolved"
        #: The revision could not be found or fetched: ``error`` says why.
        FAILED = "failed"

    repository = models.ForeignKey(
        Repository, on_delete=models.CASCADE, related_name="run_requests"
    )
    rev = models.CharField(max_length=200)
    branch = models.CharField(max_length=200, blank=True)
    trigger = models.CharField(max_length=50, default="api")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RESOLVING)
    run = models.ForeignKey(
        Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="requests"
    )
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"run request {self.pk}: {self.rev} of {self.repository_id}"

    def get_absolute_url(self) -> str:
        return reverse("api:run-request-detail", args=[self.pk])


class Notification(models.Model):
    """One message sent about a run: a commit status, a pull request comment, a Slack post."""

    class Channel(models.TextChoices):
        COMMIT_STATUS = "commit-status"
        PR_COMMENT = "pr-comment"
        SLACK = "slack"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="notifications")
    channel = models.CharField(max_length=20, choices=Channel.choices)
    url = models.CharField(max_length=500)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-sent_at", "-id"]

    def __str__(self) -> str:
        return f"{self.channel} for {self.run}: {self.status_code or self.error}"

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300
