from django.contrib import admin

from dashboard.models import Artifact, Board, Commit, Model, Repository, Result, Run, Strategy


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
    list_display = ("model", "strategy", "board", "commit", "status", "planned_bytes")
    list_filter = ("status", "strategy", "board")


admin.site.register([Model, Strategy, Board, Artifact])
