"""Failed sign-ins lock out the account name and the client address for a while.

Every place that takes a password (HTTP Basic on the API, the login page, the admin's login)
goes through :func:`authenticate`. Failures are counted in Django's cache, Redis in a
deployment, so every gunicorn worker sees the same counts: ``FAILURES_PER_ACCOUNT`` failures
for one account name, or ``FAILURES_PER_ADDRESS`` from one client address (whatever names
they tried), within ``WINDOW_SECONDS`` of the first, lock that name or address for
``LOCKOUT_SECONDS``. While locked, no password is checked, so the right one is refused too:
otherwise a guesser would only have to wait for the answer to change. A success clears the
account's count, not the address's: one account of one's own must not reset the count of an
address that guesses others' passwords.

A name is counted whether or not an account has it, and the answers are the same either way,
so the lock tells nobody which names exist.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
import unicodedata

from django import forms
from django.conf import settings
from django.contrib import auth
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from rest_framework import exceptions
from rest_framework.authentication import BasicAuthentication


class Locked(Exception):
    """Too many failures for this account name or from this address; ``retry_after`` s."""

    def __init__(self, retry_after: int):
        self.retry_after = retry_after
        minutes = math.ceil(retry_after / 60)
        super().__init__(
            f"too many failed sign-ins: try again in {minutes} minute{'s' * (minutes != 1)}"
        )


def client_address(request) -> str:
    """The address failures are counted against: ``REMOTE_ADDR``, or behind a proxy the last
    address of the header ``PEAKWATCH_CLIENT_IP_HEADER`` names (the one the proxy itself
    appended; earlier ones are whatever the client sent). IPv6 clients are counted by /64,
    the block one host is usually given."""
    raw = request.META.get("REMOTE_ADDR", "")
    header = settings.PEAKWATCH_SIGN_IN["CLIENT_IP_HEADER"]
    if header and request.META.get(header):
        raw = request.META[header].split(",")[-1].strip()
    try:
        address = ipaddress.ip_address(raw)
    except ValueError:
        return raw[:64]
    if address.version == 6:
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def _digest(value: str) -> str:
    # Bounded keys whatever was sent, and no names or addresses kept in plain in the cache.
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _subjects(username: str, address: str) -> list[tuple[str, int]]:
    """(key, failures allowed) for the account name and the address."""
    limits = settings.PEAKWATCH_SIGN_IN
    # One name however it is cased or composed, so "Admin" is not a fresh ten tries at "admin".
    name = unicodedata.normalize("NFKC", username).casefold()
    return [
        (f"sign-in:account:{_digest(name)}", limits["FAILURES_PER_ACCOUNT"]),
        (f"sign-in:address:{_digest(address)}", limits["FAILURES_PER_ADDRESS"]),
    ]


def locked_for(username: str, address: str) -> int:
    """Seconds until this name and address may try again; 0 when they may now."""
    deadlines = cache.get_many([f"{key}:locked" for key, _ in _subjects(username, address)])
    remaining = max(deadlines.values(), default=0) - time.time()
    return math.ceil(remaining) if remaining > 0 else 0


def record_failure(username: str, address: str) -> None:
    limits = settings.PEAKWATCH_SIGN_IN
    for key, allowed in _subjects(username, address):
        # The window starts at the first failure: ``add`` sets its expiry, ``incr`` keeps it.
        cache.add(f"{key}:failures", 0, timeout=limits["WINDOW_SECONDS"])
        try:
            failures = cache.incr(f"{key}:failures")
        except ValueError:  # expired between the two calls
            cache.set(f"{key}:failures", failures := 1, timeout=limits["WINDOW_SECONDS"])
        if failures >= allowed:
            lockout = limits["LOCKOUT_SECONDS"]
            cache.set(f"{key}:locked", time.time() + lockout, timeout=lockout)
            # Once the lock ends, the name or address starts again from no failures.
            cache.delete(f"{key}:failures")


def record_success(username: str) -> None:
    cache.delete(f"{_subjects(username, '')[0][0]}:failures")


def forget(username: str = "", address: str = "") -> None:
    """Lift the lock and failures of a name, an address, or both (a maintainer's remedy)."""
    keys = _subjects(username, address)
    chosen = [keys[0][0]] * bool(username) + [keys[1][0]] * bool(address)
    cache.delete_many([f"{key}:{part}" for key in chosen for part in ("failures", "locked")])


def authenticate(request, username: str, password: str):
    """``django.contrib.auth.authenticate``, counted: the user, None for wrong credentials,
    or :class:`Locked` (no password checked) while the name or the address is locked."""
    address = client_address(request)
    wait = locked_for(username, address)
    if wait:
        raise Locked(wait)
    if "\x00" in username or "\x00" in password:
        # No account can have it, and PostgreSQL refuses to compare it: a 500, not a 401,
        # before this check (found by tests/dashboard/test_api_fuzzing.py).
        user = None
    else:
        user = auth.authenticate(request, username=username, password=password)
    if user is None:
        record_failure(username, address)
    else:
        record_success(username)
    return user


class ThrottledBasicAuthentication(BasicAuthentication):
    """HTTP Basic through :func:`authenticate`: 429 with ``Retry-After`` while locked."""

    def authenticate_credentials(self, userid, password, request=None):
        try:
            user = authenticate(request, userid, password)
        except Locked as locked:
            throttled = exceptions.Throttled(detail=str(locked))
            throttled.wait = locked.retry_after  # DRF sends it as Retry-After
            raise throttled from None
        if user is None:
            raise exceptions.AuthenticationFailed("Invalid username/password.")
        return (user, None)


class _Throttled:
    """The login forms' ``clean`` through :func:`authenticate`; ``locked`` says for how long."""

    locked: Locked | None = None

    def clean(self):
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is not None and password:
            try:
                self.user_cache = authenticate(self.request, username, password)
            except Locked as locked:
                self.locked = locked
                raise forms.ValidationError(str(locked), code="locked") from None
            if self.user_cache is None:
                raise self.get_invalid_login_error()
            self.confirm_login_allowed(self.user_cache)
        return self.cleaned_data


class ThrottledAuthenticationForm(_Throttled, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(_Throttled, AdminAuthenticationForm):
    pass


class LoginView(auth_views.LoginView):
    """The login page, answering 429 with ``Retry-After`` while locked."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.locked is not None:
            response.status_code = 429
            response["Retry-After"] = str(form.locked.retry_after)
        return response
