"""What Peakwatch stores: tracked repositories, their commits, runs and results."""

from __future__ import annotations

from django.db import models
from django.urls import reverse

from dashboard.querysets import CommitQuerySet, ResultQuerySet, RunQuerySet


class Repository(models.Model):
    """A git repository whose commits are run through the suite in its manifest."""

    name = models.SlugField(max_length=100, unique=True)
    clone_url = models.CharField(max_length=500, help_text="Any git URL or local path.")
    default_branch = models.CharField(max_length=200, default="main")
    webhook_secret = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "repositories"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Commit(models.Model):
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="commits")
    sha = models.CharField(max_length=64)
    parent_sha = models.CharField(max_length=64, blank=True)
    branch = models.CharField(max_length=200, blank=True)
    author = models.CharField(max_length=200, blank=True)
    message = models.TextField(blank=True)
    committed_at = models.DateTimeField()

    objects = CommitQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["repository", "sha"], name="unique_commit_per_repo")
        ]
        indexes = [models.Index(fields=["repository", "committed_at"])]
        ordering = ["committed_at", "id"]

    def __str__(self) -> str:
        return self.short_sha

    @property
    def short_sha(self) -> str:
        return self.sha[:10]

    @property
    def title(self) -> str:
        return self.message.strip().splitlines()[0] if self.message.strip() else ""

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
        return f"board.{self.name}"


class Run(models.Model):
    """One commit's suite: every model x strategy x board in its manifest."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
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

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.commit}"

    def get_absolute_url(self) -> str:
        return reverse("run-detail", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED)

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
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OK)
    planned_bytes = models.BigIntegerField(null=True, blank=True)
    intermediate_bytes = models.BigIntegerField(null=True, blank=True)
    output_bytes = models.BigIntegerField(null=True, blank=True)
    measured_peak_bytes = models.BigIntegerField(null=True, blank=True)
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

    objects = ResultQuerySet.as_manager()

    class Meta:
        constraints = [
            # A redelivered task finds its Result already there and updates it.
            models.UniqueConstraint(
                fields=["run", "model", "strategy", "board"], name="unique_result_per_run"
            )
        ]
        indexes = [models.Index(fields=["model", "strategy", "board", "commit"])]

    def __str__(self) -> str:
        return f"{self.model} / {self.strategy} / {self.board} @ {self.commit}"

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


def artifact_path(artifact: Artifact, filename: str) -> str:
    result = artifact.result
    return f"results/{result.run_id}/{result.pk}/{filename}"


class Artifact(models.Model):
    result = models.ForeignKey(Result, on_delete=models.CASCADE, related_name="artifacts")
    name = models.CharField(max_length=200)
    file = models.FileField(upload_to=artifact_path, max_length=500)
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
