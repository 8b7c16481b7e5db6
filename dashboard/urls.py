from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from dashboard import api, views

router = DefaultRouter()
router.register("repositories", api.RepositoryViewSet, basename="repository")
router.register("models", api.ModelViewSet, basename="model")
router.register("runs", api.RunViewSet, basename="run")
router.register("results", api.ResultViewSet, basename="result")

urlpatterns = [
    path("", views.home, name="home"),
    path(
        "repos/<slug:repository>/models/<str:model>/",
        views.model_trend_page,
        name="model-trend",
    ),
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("runs/<int:pk>/progress.json", views.run_progress, name="run-progress"),
    path("runs/<int:pk>/results/", views.run_results, name="run-results"),
    path("artifacts/<int:pk>/download", views.artifact_download, name="artifact-download"),
    # Namespaced: the router's "model-trend" would otherwise shadow the page of that name.
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/", include((router.urls, "api"), namespace="api")),
    path("admin/", admin.site.urls),
]
