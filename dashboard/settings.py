"""Peakwatch settings: one module, everything that varies read from the environment.

With no ``DATABASE_URL`` the project uses SQLite under ``var/``; with no ``REDIS_URL``
Celery tasks run in the calling process. The code path is the same either way.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from dashboard.env import envbool, envint, envjson, envlist, envstr

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(envstr("PEAKWATCH_DATA_DIR", str(BASE_DIR / "var")))

DEBUG = envbool("DJANGO_DEBUG", True)
SECRET_KEY = envstr("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off")
    SECRET_KEY = "peakwatch-development-only-key"
ALLOWED_HOSTS = envlist("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = envlist("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "dashboard",
    # Worker-side management commands (bisect); the web process never imports its tasks.
    "workers",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "dashboard.urls"
WSGI_APPLICATION = "dashboard.wsgi.application"
ASGI_APPLICATION = "dashboard.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if not envstr("DATABASE_URL"):
    # The embedded default: SQLite can create its file, but not the folder it lives in,
    # which a fresh clone does not have.
    DATA_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": dj_database_url.parse(
        envstr("DATABASE_URL", f"sqlite:///{DATA_DIR / 'peakwatch.sqlite3'}"),
        conn_max_age=envint("DATABASE_CONN_MAX_AGE", 60),
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# npm builds the front end into frontend/dist; Django serves that folder as it is.
STATICFILES_DIRS = [BASE_DIR / "frontend" / "dist"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
MEDIA_ROOT = Path(envstr("PEAKWATCH_ARTIFACT_DIR", str(DATA_DIR / "artifacts")))
MEDIA_URL = "/media/"

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Peakwatch API",
    "DESCRIPTION": "Models, runs and memory-planning results tracked by Peakwatch.",
    "VERSION": "1",
    # Runs and Results both have a "status" field with different choices.
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "dashboard.models.Run.Status",
        "ResultStatusEnum": "dashboard.models.Result.Status",
    },
}

# Celery: the broker is Redis when REDIS_URL is set; otherwise tasks run eagerly in
# process, which is what the embedded default and a laptop demo want.
REDIS_URL = envstr("REDIS_URL", "")
CELERY_BROKER_URL = REDIS_URL or "memory://"

# The cache holds the rendered overview tables and the serialised trend payloads. With
# REDIS_URL it is Redis, shared by every gunicorn worker; otherwise each process keeps its
# own in memory. PEAKWATCH_CACHE_VERSION starts from an empty cache without flushing Redis.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "peakwatch",
        "VERSION": envint("PEAKWATCH_CACHE_VERSION", 1),
    }
    if REDIS_URL
    else {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "peakwatch",
        "VERSION": envint("PEAKWATCH_CACHE_VERSION", 1),
    }
}
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", not REDIS_URL)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Our own tables hold run state; the result backend is not needed.
CELERY_TASK_IGNORE_RESULT = True
# A worker killed mid-run must not lose the run: the message is acknowledged only after
# the task finished, and a worker takes one message at a time.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = envint("PEAKWATCH_RUN_SOFT_TIME_LIMIT", 3300)
CELERY_TASK_TIME_LIMIT = envint("PEAKWATCH_RUN_TIME_LIMIT", 3600)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Longer than the longest task, or Redis would hand an unacknowledged run to a
    # second worker while the first is still compiling.
    "visibility_timeout": envint("PEAKWATCH_VISIBILITY_TIMEOUT", CELERY_TASK_TIME_LIMIT + 600),
}
CELERY_TASK_DEFAULT_QUEUE = "peakwatch"

PEAKWATCH = {
    # Timing repeats per strategy; each is one interleaved round over all strategies.
    "LATENCY_REPEAT": envint("PEAKWATCH_LATENCY_REPEAT", 5),
    "WORK_DIR": DATA_DIR / "work",
    # Limits of the sandboxed process that compiles a model with a tracked repository's
    # code (workers/sandbox.py): address space, CPU seconds, largest file, wall clock.
    "SANDBOX": {
        "MEMORY_BYTES": envint("PEAKWATCH_SANDBOX_MEMORY_BYTES", 8 << 30),
        "CPU_SECONDS": envint("PEAKWATCH_SANDBOX_CPU_SECONDS", 1800),
        "FILE_BYTES": envint("PEAKWATCH_SANDBOX_FILE_BYTES", 2 << 30),
        "WALL_SECONDS": envint("PEAKWATCH_SANDBOX_WALL_SECONDS", 1800),
    },
}

# The boards this worker serves beyond cpu and cuda, as a JSON object by board name (rpc
# address or tracker and key, target, memory capacity): see workers/boards/config.py.
PEAKWATCH_BOARDS = envjson("PEAKWATCH_BOARDS", {})

# Regression tracking: where GitHub's REST API is (GitHub Enterprise has its own), and the
# address links in commit statuses, comments and Slack messages point back to.
PEAKWATCH_GITHUB_API_URL = envstr("PEAKWATCH_GITHUB_API_URL", "https://api.github.com")
PEAKWATCH_BASE_URL = envstr("PEAKWATCH_BASE_URL", "http://127.0.0.1:8000")
PEAKWATCH_NOTIFY_TIMEOUT = envint("PEAKWATCH_NOTIFY_TIMEOUT", 10)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("PEAKWATCH_LOG_LEVEL", "INFO")},
}
