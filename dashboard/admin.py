from django import forms
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
from dashboard.redaction import redact
from dashboard.sign_in_throttle import ThrottledAdminAuthenticationForm

SECRET_FIELDS = ("webhook_secret", "github_token")


class RepositoryForm(forms.ModelForm):
    """Secrets are write-only here, and a clone URL's password is never sent to the page.

    A secret field is empty on the page: left empty it keeps the stored value, filled it
    replaces it, and its checkbox clears it. The clone URL is shown with its password
    masked; sent back unchanged it keeps the stored URL.
    """

    webhook_secret = forms.CharField(
        required=False, max_length=200, strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave empty to keep the current secret.",
    )
    github_token = forms.CharField(
        required=False, max_length=200, strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave empty to keep the current token.",
    )
    clear_webhook_secret = forms.BooleanField(required=False, label="Clear the webhook secret")
    clear_github_token = forms.BooleanField(required=False, label="Clear the GitHub token")

    class Meta:
        model = Repository
        fields = "__all__"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        stored = self.instance.clone_url if self.instance.pk else ""
        if stored:
            self.initial["clone_url"] = redact(stored)
        for name in SECRET_FIELDS:
            is_set = bool(getattr(self.instance, name, ""))
            self.fields[name].help_text += " Currently set." if is_set else " Currently empty."

    def clean_clone_url(self):
        value = self.cleaned_data["clone_url"]
        stored = self.instance.clone_url if self.instance.pk else ""
        if stored and value == redact(stored):
            return stored
        return value

    def _post_clean(self):
        # Before the instance is updated from the form: an empty field keeps the stored
        # secret, a ticked box clears it.
        for name in SECRET_FIELDS:
            if self.cleaned_data.get(f"clear_{name}"):
                self.cleaned_data[name] = ""
            elif not self.cleaned_data.get(name):
                self.cleaned_data[name] = getattr(self.instance, name, "")
        super()._post_clean()


@admin.register(Repository)
class RepositoryAdmin(admin.ModelAdmin):
    form = RepositoryForm
    list_display = ("name", "clone_url_shown", "default_branch", "created_at")

    @admin.display(description="clone URL")
    def clone_url_shown(self, repository):
        return redact(repository.clone_url)


@admin.register(Commit)
class CommitAdmin(admin.ModelAdmin):
    list_display = (
        "short_sha", "repository", "branch", "author", "committed_at", "from_outside",
        "approved_by", "approved_at",
    )
    list_filter = ("repository", "branch", "from_outside")
    search_fields = ("sha", "message", "author")
    # Approving releases the commit's waiting runs: that happens on a run's page, where
    # the action does it, not by editing these fields here.
    readonly_fields = ("from_outside", "approved_by", "approved_at")


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
    list_display = ("name", "scope", "created_at", "last_used_at")
    list_select_related = ("repository",)
    # Only the hash is stored; tokens are made with manage.py create_api_token. The scope
    # is set there too: clearing a token's repository here would widen it to every one.
    fields = ("name", "scope", "token_hash", "created_at", "last_used_at")
    readonly_fields = ("scope", "token_hash", "created_at", "last_used_at")

    def has_add_permission(self, request):
        return False

    @admin.display(description="Scope", ordering="repository__name")
    def scope(self, token: ApiToken) -> str:
        return token.scope


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("sent_at", "run", "channel", "url", "status_code", "error")
    list_filter = ("channel",)


@admin.register(PullRequest)
class PullRequestAdmin(admin.ModelAdmin):
    list_display = ("repository", "number", "title", "head_sha", "base_sha", "updated_at")


admin.site.register([Model, Strategy, Board, Artifact, SeriesThreshold])
# The admin's login takes the same passwords as the API: it counts failures the same way.
admin.site.login_form = ThrottledAdminAuthenticationForm
