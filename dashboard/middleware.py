"""Checks every request passes before any view runs: inputs at the edge, private mode."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponseBadRequest, JsonResponse
from django.urls import Resolver404, resolve, reverse

from dashboard.models import ApiToken, Run, RunRequest

NUL = "\x00"


class RejectNulBytesMiddleware:
    """A NUL byte in the path or a query parameter is answered 400.

    PostgreSQL cannot store or compare a string holding NUL: left to the views, any filter
    on such a value fails inside the database driver, as a 500.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if NUL in request.path or any(
            NUL in key or any(NUL in value for value in values)
            for key, values in request.GET.lists()
        ):
            message = "the path or a query parameter contains a NUL byte"
            if request.path.startswith("/api/"):
                return JsonResponse({"error": message}, status=400)
            return HttpResponseBadRequest(message)
        return self.get_response(request)


class LoginRequiredUnlessPublicMiddleware:
    """With ``PEAKWATCH_PUBLIC=0`` every page needs a logged-in user.

    Webhooks, ``POST /api/runs`` (its own token), ``POST /api/repositories`` (HTTP Basic or
    a session, which it checks itself) and the admin (its own login) keep their own
    authentication; the login page and static files stay reachable. The token that started
    a run may follow it: a CI job polls its run (and the run request that names it) with
    nothing but that token, so it reads those of its repository and nothing else.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if settings.PEAKWATCH_PUBLIC or request.user.is_authenticated:
            return self.get_response(request)
        if self._exempt(request.path) or self._token_may_read(request):
            return self.get_response(request)
        if request.path.startswith("/api/"):
            return JsonResponse({"error": "log in to read this Peakwatch"}, status=401)
        return redirect_to_login(request.get_full_path())

    @staticmethod
    def _exempt(path: str) -> bool:
        exact = {reverse("api-trigger-run"), reverse("api-track-repository")}
        prefixes = (
            reverse("login"), reverse("logout"), reverse("admin:index"),
            reverse("github-webhook"), settings.STATIC_URL,
        )
        return path in exact or path.startswith(prefixes)

    @staticmethod
    def _token_may_read(request) -> bool:
        if request.method not in ("GET", "HEAD"):
            return False
        try:
            match = resolve(request.path)
        except Resolver404:
            return False
        models = {"api:run-detail": Run, "api:run-request-detail": RunRequest}
        model = models.get(match.view_name)
        if model is None:
            return False
        scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() not in ("bearer", "token") or not raw.strip():
            return False
        token = ApiToken.objects.filter(token_hash=ApiToken.hash(raw.strip())).first()
        if token is None:
            return False
        row = model.objects.select_related("repository").filter(pk=match.kwargs["pk"]).first()
        return row is not None and token.allows(row.repository)
