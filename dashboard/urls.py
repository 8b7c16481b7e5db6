from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from dashboard import (
    api,
    api_find,
    api_repositories,
    api_runs,
    boards_views,
    find_views,
    sign_in_throttle,
    tracking_views,
    views,
)
from dashboard.webhooks import github

router = DefaultRouter()
router.register("repositories", api.RepositoryViewSet, basename="repository")
router.register("models", api.ModelViewSet, basename="model")
router.register("runs", api.RunViewSet, basename="run")
router.register("results", api.ResultViewSet, basename="result")
router.register("alerts", api.AlertViewSet, basename="alert")
router.register("run-requests", api.RunRequestViewSet, basename="run-request")
router.register("pull-requests", api_find.PullRequestViewSet, basename="pull-request")

urlpatterns = [
    path("", views.home, name="home"),
    path("repos/", find_views.repositories_page, name="repositories"),
    path("search/", find_views.search_page, name="search"),
    path(
        "repos/<slug:repository>/models/<str:model>/",
        views.model_trend_page,
        name="model-trend",
    ),
    path(
        "repos/<slug:repository>/models/<str:model>/series.csv",
        views.series_csv,
        name="series-csv",
    ),
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("runs/<int:pk>/approve", tracking_views.approve_run, name="run-approve"),
    path("runs/<int:pk>/progress.json", views.run_progress, name="run-progress"),
    path("runs/<int:pk>/results/", views.run_results, name="run-results"),
    path("artifacts/<int:pk>/download", views.artifact_download, name="artifact-download"),
    path("results/<int:pk>/plan/", views.result_plan, name="result-plan"),
    path(
        "results/<int:pk>/artifacts.zip", views.result_artifacts_zip, name="result-artifacts-zip"
    ),
    path(
        "repos/<slug:repository>/compare/<str:base>...<str:head>/",
        tracking_views.compare_commits_page,
        name="compare-commits",
    ),
    path(
        "repos/<slug:repository>/pulls/<int:number>/",
        tracking_views.pull_request_compare,
        name="pull-request-compare",
    ),
    path(
        "repos/<slug:repository>/commits/<str:sha>/strategies/",
        tracking_views.strategy_compare,
        name="strategy-compare",
    ),
    path(
        "repos/<slug:repository>/commits/<str:sha>/toolchains/",
        tracking_views.toolchain_compare,
        name="toolchain-compare",
    ),
    path(
        "repos/<slug:repository>/branch-compare/<path:branch>",
        tracking_views.branch_compare,
        name="branch-compare",
    ),
    path("results/<int:base>/diff/<int:head>/", tracking_views.plan_diff_page, name="plan-diff"),
    path(
        "results/<int:base>/diff/<int:head>.json",
        tracking_views.plan_diff_json,
        name="plan-diff-json",
    ),
    path("boards/", boards_views.boards_page, name="boards"),
    path("alerts/", tracking_views.alerts_page, name="alerts"),
    path("alerts/<int:pk>/triage", tracking_views.triage_alert, name="alert-triage"),
    path(
        "commits/<int:pk>/alerts/triage",
        tracking_views.triage_commit_alerts,
        name="commit-alerts-triage",
    ),
    path("webhooks/github", github.receive, name="github-webhook"),
    path("webhooks/github/<slug:repository>", github.receive, name="github-webhook-repository"),
    # POST only; the router's read-only /api/runs/ (with a slash) lists runs.
    path("api/runs", api_runs.trigger_run, name="api-trigger-run"),
    # POST only, as above; GET /api/repositories/ (with a slash) lists them.
    path("api/repositories", api_repositories.track_repository, name="api-track-repository"),
    # Namespaced: the router's "model-trend" would otherwise shadow the page of that name.
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "api/",
        include(
            ([*router.urls, path("search/", api_find.SearchView.as_view(), name="search")], "api"),
            namespace="api",
        ),
    ),
    path("admin/", admin.site.urls),
    path("accounts/login/", sign_in_throttle.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
]

# The API's errors are JSON, like its answers (only used with DEBUG off).
handler404 = "dashboard.error_views.not_found"
handler500 = "dashboard.error_views.server_error"
