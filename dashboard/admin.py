from django.contrib import admin

from dashboard.models import (
    Alert,
    ApiToken,
    Artifact,
    Board,
    Commit,
    Model,
    Notification,
    PullRequest,
    Repository,
    Result,
    Run,
    SeriesThreshold,
    Strategy,
    WebhookDelivery,
)


@admin.register(Repository)
class RepositoryAdmin(admin.ModelAdmin):
    list_display = ("name", "clone_url", "default_branch", "created_at")


@admin.register(Commit)
class CommitAdmin(admin.ModelAdmin):
    list_display = ("short_sha", "repository", "branch", "author", "committed_at")
    list_filter = ("repository", "branch")
    search_fields = ("sha", "message", "author")


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("pk", "commit", "status", "trigger", "progress_done", "progress_total")
    list_filter = ("status", "trigger")


@admin.register(Result)
class ResultAdmin(admin.ModelAdmin):
    list_display = (
        "model", "strategy", "board", "commit", "status", "planned_bytes", "reused_from"
    )
    list_filter = ("status", "strategy", "board")
    raw_id_fields = ("run", "commit", "reused_from")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    """Every delivery GitHub sent and what became of it: the first place to look."""

    list_display = (
        "received_at", "event", "action", "repository", "guid", "outcome", "status_code",
        "processed_at",
    )
    list_filter = ("outcome", "event", "repository")
    search_fields = ("guid", "detail")
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ("commit", "model", "strategy", "board", "kind", "baseline_value", "value",
                    "state", "created_at")
    list_filter = ("state", "kind", "repository")
    list_editable = ("state",)
    raw_id_fields = ("commit", "run", "result", "baseline")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "repository", "created_at", "last_used_at")
    # Only the hash is stored; tokens are made with manage.py create_api_token.
    readonly_fields = ("token_hash", "created_at", "last_used_at")

    def has_add_permission(self, request):
        return False


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("sent_at", "run", "channel", "url", "status_code", "error")
    list_filter = ("channel",)


@admin.register(PullRequest)
class PullRequestAdmin(admin.ModelAdmin):
    list_display = ("repository", "number", "title", "head_sha", "base_sha", "updated_at")


admin.site.register([Model, Strategy, Board, Artifact, SeriesThreshold])
