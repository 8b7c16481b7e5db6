"""Who may change state from the pages: logged-in maintainers.

Reading stays public (or private behind login, by a setting). Changing anything (approving
a pull request's run, triaging an alert, re-running) needs the ``dashboard.maintain``
permission, which superusers have and a maintainer is given in the admin.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied

MAINTAIN = "dashboard.maintain"


def is_maintainer(user) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(MAINTAIN))


def maintainer_required(view):
    """Anonymous visitors are sent to the login page; others need the permission (403)."""

    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not is_maintainer(request.user):
            raise PermissionDenied("this needs the maintainer permission")
        return view(request, *args, **kwargs)

    return guarded


def maintainer_context(request) -> dict:
    """``is_maintainer`` in every template, so pages offer controls only to those allowed."""
    return {"is_maintainer": is_maintainer(getattr(request, "user", None))}
