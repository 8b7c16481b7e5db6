"""Error pages: the API answers its errors in JSON, as its schema says; pages stay HTML."""

from __future__ import annotations

from django.http import JsonResponse
from django.views import defaults


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


def not_found(request, exception=None):
    if _is_api(request):
        return JsonResponse({"error": "not found"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    if _is_api(request):
        return JsonResponse({"error": "internal server error"}, status=500)
    return defaults.server_error(request)
