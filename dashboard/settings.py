"""Peakwatch settings: one module, everything that varies read from the environment.

With no ``DATABASE_URL`` the project uses SQLite under ``var/``; with no ``REDIS_URL``
Celery tasks run in the calling process. The code path is the same either way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from dashboard.env import envbool, envint, envjson, envlist, envstr, local_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
# From a checkout, data lives beside the code in var/; an installed package (``pip install
# .``) sits in site-packages, so it keeps its data in the user's data folder instead, the
# same whichever folder ``peakwatch`` is run from.
CHECKOUT = (BASE_DIR / "manage.py").is_file()
DATA_DIR = Path(
    envstr(
        "PEAKWATCH_DATA_DIR",
        str(
            BASE_DIR / "var"
            if CHECKOUT
            else Path(envstr("XDG_DATA_HOME", str(Path.home() / ".local" / "share")))
            / "peakwatch"
        ),
    )
)

# The embedded default (no DATABASE_URL): SQLite under var/, one person on 127.0.0.1 over
# plain HTTP. Anything with a DATABASE_URL is treated as a deployment and fails closed.
EMBEDDED = not envstr("DATABASE_URL")
if EMBEDDED:
    # SQLite can create its file, but not the folder it lives in, which a fresh clone does
    # not have; the generated secret key lives there too.
    DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = envbool("DJANGO_DEBUG", False)
SECRET_KEY = envstr("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not (EMBEDDED or DEBUG):
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY must be set: a deployment (DATABASE_URL set, DJANGO_DEBUG off) "
            "has no default key"
        )
    SECRET_KEY = local_secret_key(DATA_DIR / "secret_key")
# Old keys, comma-separated, after a rotation: sessions and stored secrets still open.
SECRET_KEY_FALLBACKS = envlist("DJANGO_SECRET_KEY_FALLBACKS", [])
ALLOWED_HOSTS = envlist("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = envlist("DJANGO_CSRF_TRUSTED_ORIGINS", [])

# Behind TLS: HTTPS redirect, HSTS, cookies sent over HTTPS only. On for a deployment with
# DEBUG off; PEAKWATCH_TLS=0 for one served over plain HTTP, and each DJANGO_SECURE_*
# overrides one. Behind a proxy that terminates TLS, name the header it sets, e.g.
# DJANGO_SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO, or every request redirects.
TLS = envbool("PEAKWATCH_TLS", not (DEBUG or EMBEDDED))
SECURE_SSL_REDIRECT = envbool("DJANGO_SECURE_SSL_REDIRECT", TLS)
SECURE_HSTS_SECONDS = envint("DJANGO_SECURE_HSTS_SECONDS", 365 * 24 * 3600 if TLS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", TLS)
SECURE_HSTS_PRELOAD = envbool("DJANGO_SECURE_HSTS_PRELOAD", TLS)
SESSION_COOKIE_SECURE = envbool("DJANGO_SESSION_COOKIE_SECURE", TLS)
CSRF_COOKIE_SECURE = envbool("DJANGO_CSRF_COOKIE_SECURE", TLS)
if envstr("DJANGO_SECURE_PROXY_SSL_HEADER"):
    SECURE_PROXY_SSL_HEADER = (envstr("DJANGO_SECURE_PROXY_SSL_HEADER"), "https")

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
    "dashboard.middleware.RejectNulBytesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "dashboard.middleware.LoginRequiredUnlessPublicMiddleware",
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
                "dashboard.auth.maintainer_context",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        envstr("DATABASE_URL", f"sqlite:///{DATA_DIR / 'peakwatch.sqlite3'}"),
        conn_max_age=envint("DATABASE_CONN_MAX_AGE", 60),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # JIT compiles a query when the planner *estimates* it expensive; on tables never
    # analysed that estimate is far off, and compiling took longer than the 5 ms query
    # (benchmarks/unanalysed_trend.py). Page queries are short: JIT never pays off here.
    options = DATABASES["default"].setdefault("OPTIONS", {})
    options["options"] = f"{options.get('options', '')} -c jit=off".strip()
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default commits once or more per Result: with SQLite's rollback journal
    # each commit waits for the disk twice, which on a host busy writing builds took 16 ms a
    # commit (5.6 s of a demo). A write-ahead log waits only at checkpoints and never
    # corrupts on a crash; a power cut may lose the last commits, which a run redoes.
    options = DATABASES["default"].setdefault("OPTIONS", {})
    options.setdefault("init_command", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"

STATIC_URL = "/static/"
STATIC_ROOT = Path(
    envstr(
        "PEAKWATCH_STATIC_ROOT",
        str(BASE_DIR / "staticfiles" if CHECKOUT else DATA_DIR / "static"),
    )
)
# npm builds the front end into frontend/dist; Django serves that folder as it is. An
# installed package carries the same files under share/peakwatch/static (pyproject.toml).
STATICFILES_DIRS = [
    BASE_DIR / "frontend" / "dist" if CHECKOUT else Path(sys.prefix) / "share/peakwatch/static"
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
# With DEBUG off, runserver serves no static files: WhiteNoise serves them from
# frontend/dist for the embedded default; a deployment serves what collectstatic gathered.
WHITENOISE_USE_FINDERS = DEBUG or EMBEDDED
MEDIA_ROOT = Path(envstr("PEAKWATCH_ARTIFACT_DIR", str(DATA_DIR / "artifacts")))
MEDIA_URL = "/media/"

# Artifacts (plans, libraries, exports) are written by the worker that compiled them and
# served by the web app: both must reach the same storage. A folder (MEDIA_ROOT, above)
# serves one host whose processes share it; a fleet, with workers on other hosts, names an
# S3 bucket (AWS S3, MinIO, Ceph...). The bucket stays private: the dashboard streams each
# download itself, so private mode's access rules hold for artifacts too.
ARTIFACT_BUCKET = envstr("PEAKWATCH_ARTIFACT_BUCKET")
# Each unset one falls back to boto3's own: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL,
# AWS_REGION or AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or an
# instance role, ~/.aws/credentials).
_ARTIFACT_S3_OPTIONS = {
    "endpoint_url": "PEAKWATCH_ARTIFACT_S3_ENDPOINT_URL",
    "region_name": "PEAKWATCH_ARTIFACT_S3_REGION",
    "access_key": "PEAKWATCH_ARTIFACT_S3_ACCESS_KEY_ID",
    "secret_key": "PEAKWATCH_ARTIFACT_S3_SECRET_ACCESS_KEY",
    # A key prefix, for a bucket shared with something else.
    "location": "PEAKWATCH_ARTIFACT_S3_PREFIX",
    # "path" for servers that serve buckets under one host name (MinIO, moto).
    "addressing_style": "PEAKWATCH_ARTIFACT_S3_ADDRESSING_STYLE",
}
_artifact_s3 = {
    option: envstr(name) for option, name in _ARTIFACT_S3_OPTIONS.items() if envstr(name)
}
if not ARTIFACT_BUCKET:
    if _artifact_s3:
        named = ", ".join(_ARTIFACT_S3_OPTIONS[option] for option in _artifact_s3)
        raise ImproperlyConfigured(
            f"{named} set without PEAKWATCH_ARTIFACT_BUCKET: artifacts would stay in "
            f"{MEDIA_ROOT}"
        )
    # No location of its own: it follows MEDIA_ROOT.
    STORAGES["artifacts"] = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
else:
    if ("access_key" in _artifact_s3) != ("secret_key" in _artifact_s3):
        raise ImproperlyConfigured(
            "PEAKWATCH_ARTIFACT_S3_ACCESS_KEY_ID and PEAKWATCH_ARTIFACT_S3_SECRET_ACCESS_KEY "
            "are set together or not at all"
        )
    if _artifact_s3.get("addressing_style", "auto") not in ("auto", "path", "virtual"):
        raise ImproperlyConfigured(
            f"PEAKWATCH_ARTIFACT_S3_ADDRESSING_STYLE={_artifact_s3['addressing_style']!r} "
            "is not one of auto, path, virtual"
        )
    if "location" in _artifact_s3:
        _artifact_s3["location"] = _artifact_s3["location"].strip("/")
    STORAGES["artifacts"] = {
        "BACKEND": "dashboard.s3_storage.StreamingS3Storage",
        # Objects stay private whatever the bucket's default ACL.
        "OPTIONS": {"bucket_name": ARTIFACT_BUCKET, "default_acl": None, **_artifact_s3},
    }

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "dashboard.api_params.BoundedPagination",
    "PAGE_SIZE": 100,
    # Only sessions by default: the read-only API needs no password, and a view that takes
    # one (POST /api/repositories) names dashboard.sign_in_throttle's HTTP Basic itself.
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    # JSON nested too deep is a 400 before anything recursive parses it.
    "DEFAULT_PARSER_CLASSES": [
        "dashboard.json_bodies.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Peakwatch API",
    "DESCRIPTION": "Models, runs and memory-planning results tracked by Peakwatch.",
    "VERSION": "1",
    # Runs and Results both have a "status" field with different choices.
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "dashboard.models.Run.Status",
        "ResultStatusEnum": "dashboard.models.Result.Status",
        "RunRequestStatusEnum": "dashboard.models.RunRequest.Status",
        # Two query parameters named "state": an alert's triage state, a pull request's.
        "AlertStateEnum": "dashboard.models.Alert.State",
        "PullRequestStateEnum": "dashboard.api_find.PULL_REQUEST_STATES",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "dashboard.api_params.document_errors",
        "dashboard.api_runs.require_sha_or_branch",
    ],
    # POST /api/runs takes an API token (manage.py create_api_token) as a bearer token.
    "APPEND_COMPONENTS": {
        "securitySchemes": {"ApiToken": {"type": "http", "scheme": "bearer"}},
    },
}

# Celery's broker: CELERY_BROKER_URL (or BROKER_URL), e.g. RabbitMQ at amqp://...; else
# Redis at REDIS_URL; else none, and tasks run eagerly in process, which is what the
# embedded default and a laptop demo want. RabbitMQ is the one that hands a killed
# worker's run to another worker at once (see CELERY_BROKER_TRANSPORT_OPTIONS).
REDIS_URL = envstr("REDIS_URL", "")
CELERY_BROKER_URL = envstr("CELERY_BROKER_URL") or envstr("BROKER_URL") or REDIS_URL or "memory://"

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
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", CELERY_BROKER_URL == "memory://")
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
    # Redis only: longer than the longest task, or Redis would hand an unacknowledged run
    # to a second worker while the first is still compiling. So with Redis a killed
    # worker's run waits this long (70 minutes by default) before another worker resumes
    # it. RabbitMQ needs no timeout: it requeues a message the moment its consumer's
    # connection drops.
    "visibility_timeout": envint("PEAKWATCH_VISIBILITY_TIMEOUT", CELERY_TASK_TIME_LIMIT + 600),
    # Kombu looks for such runs every 10 s but, by default, scans only on every tenth look;
    # one scan is one small Redis query, so look each time: a run waits the timeout, not
    # up to 100 s more.
    "unacked_restore_throttle": 1,
}
# RabbitMQ: a worker whose machine vanished (no TCP reset) is noticed after two missed
# heartbeats, 40 s, and its message requeued. The prefork pool's main process keeps
# sending heartbeats while a child compiles; a --pool solo worker would not.
CELERY_BROKER_HEARTBEAT = envint("PEAKWATCH_BROKER_HEARTBEAT", 20)
CELERY_TASK_DEFAULT_QUEUE = "peakwatch"

LOGIN_URL = "login"
# Pages are public to read; with PEAKWATCH_PUBLIC=0 every page needs a logged-in user.
# Changing anything always needs the maintainer permission (dashboard/auth.py).
PEAKWATCH_PUBLIC = envbool("PEAKWATCH_PUBLIC", True)
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

# Failed sign-ins (HTTP Basic on the API, the login page, the admin's login), counted in the
# cache: this many failures for one account name, or from one client address, within
# WINDOW_SECONDS of the first, lock that name or address for LOCKOUT_SECONDS, the right
# password included (dashboard/sign_in_throttle.py). Behind a proxy every client has the
# proxy's address: name the header it sets (e.g. HTTP_X_FORWARDED_FOR, whose last address
# is taken), and only where a proxy of yours always sets it, or clients could choose theirs.
PEAKWATCH_SIGN_IN = {
    "FAILURES_PER_ACCOUNT": envint("PEAKWATCH_SIGN_IN_FAILURES_PER_ACCOUNT", 10),
    "FAILURES_PER_ADDRESS": envint("PEAKWATCH_SIGN_IN_FAILURES_PER_ADDRESS", 30),
    "WINDOW_SECONDS": envint("PEAKWATCH_SIGN_IN_WINDOW_SECONDS", 15 * 60),
    "LOCKOUT_SECONDS": envint("PEAKWATCH_SIGN_IN_LOCKOUT_SECONDS", 15 * 60),
    "CLIENT_IP_HEADER": envstr("PEAKWATCH_CLIENT_IP_HEADER", ""),
}
for _name, _value in PEAKWATCH_SIGN_IN.items():
    if _name != "CLIENT_IP_HEADER" and _value < 1:
        raise ImproperlyConfigured(f"PEAKWATCH_SIGN_IN_{_name}={_value} must be at least 1")

PEAKWATCH = {
    # Timing repeats per strategy; each is one interleaved round over all strategies.
    "LATENCY_REPEAT": envint("PEAKWATCH_LATENCY_REPEAT", 5),
    "WORK_DIR": DATA_DIR / "work",
    # Limits of the sandboxed process that compiles a model with a tracked repository's
    # code (workers/sandbox/): memory of the whole job (and each process's address space),
    # CPU seconds per process, largest file, wall clock, processes of the job (the kernel
    # counts each thread as one) and THREADS more for thread pools.
    # A root worker runs the job as USER:GROUP. Without bubblewrap's namespaces (the reduced
    # sandbox) no repository code runs unless ALLOW_REDUCED says so.
    "SANDBOX": {
        "MEMORY_BYTES": envint("PEAKWATCH_SANDBOX_MEMORY_BYTES", 8 << 30),
        "CPU_SECONDS": envint("PEAKWATCH_SANDBOX_CPU_SECONDS", 1800),
        "FILE_BYTES": envint("PEAKWATCH_SANDBOX_FILE_BYTES", 2 << 30),
        "WALL_SECONDS": envint("PEAKWATCH_SANDBOX_WALL_SECONDS", 1800),
        "PLANNER_SECONDS": envint("PEAKWATCH_SANDBOX_PLANNER_SECONDS", 60),
        "PROCESSES": envint("PEAKWATCH_SANDBOX_PROCESSES", 64),
        "THREADS": envint("PEAKWATCH_SANDBOX_THREADS", 4 * (os.cpu_count() or 1)),
        "SCRATCH_BYTES": envint("PEAKWATCH_SANDBOX_SCRATCH_BYTES", 4 << 30),
        "SCRATCH_FILES": envint("PEAKWATCH_SANDBOX_SCRATCH_FILES", 10_000),
        "DEVICE_MEMORY_BYTES": envint("PEAKWATCH_SANDBOX_DEVICE_MEMORY_BYTES", 16 << 30),
        "USER": envint("PEAKWATCH_SANDBOX_USER", 65534),
        "GROUP": envint("PEAKWATCH_SANDBOX_GROUP", 65534),
        "ALLOW_REDUCED": envbool("PEAKWATCH_SANDBOX_ALLOW_REDUCED", False),
        # A delegated cgroup v2 folder for the jobs' cgroups (default: the worker's own).
        "CGROUP": envstr("PEAKWATCH_SANDBOX_CGROUP", ""),
    },
    # Toolchains (TVM releases a suite compiles with) are created here on first use
    # (default: WORK_DIR/toolchains); local wheels and source folders a manifest names
    # must lie in one of TOOLCHAIN_PATHS.
    "TOOLCHAIN_DIR": envstr("PEAKWATCH_TOOLCHAIN_DIR", ""),
    "TOOLCHAIN_PATHS": envlist("PEAKWATCH_TOOLCHAIN_PATHS", []),
    # Git, which runs outside the sandbox on what a tracked repository holds
    # (dashboard/gitrepo.py GitLimits): the protocols a clone URL may use (file: a local
    # path, the embedded default's own demo; a deployment's hosts are not the repositories'
    # to read), each git command's wall clock, the low-speed limit of an HTTP transfer, and
    # a checkout's bytes, largest file and names.
    "GIT": {
        "PROTOCOLS": envlist(
            "PEAKWATCH_GIT_PROTOCOLS", ["https", "ssh", "git", *(["file"] if EMBEDDED else [])]
        ),
        "SECONDS": envint("PEAKWATCH_GIT_SECONDS", 600),
        "LOW_SPEED_BYTES": envint("PEAKWATCH_GIT_LOW_SPEED_BYTES", 1000),
        "LOW_SPEED_SECONDS": envint("PEAKWATCH_GIT_LOW_SPEED_SECONDS", 60),
        "CHECKOUT_BYTES": envint("PEAKWATCH_GIT_CHECKOUT_BYTES", 4 << 30),
        "CHECKOUT_FILE_BYTES": envint("PEAKWATCH_GIT_CHECKOUT_FILE_BYTES", 2 << 30),
        "CHECKOUT_FILES": envint("PEAKWATCH_GIT_CHECKOUT_FILES", 100_000),
        "FILE_BYTES": envint("PEAKWATCH_GIT_FILE_BYTES", 1 << 20),
        "MESSAGE_BYTES": envint("PEAKWATCH_GIT_MESSAGE_BYTES", 256 << 10),
    },
}
_unknown_protocols = set(PEAKWATCH["GIT"]["PROTOCOLS"]) - {"https", "http", "ssh", "git", "file"}
if _unknown_protocols:
    # ext:: runs a command and fd:: reads the worker's own descriptors: never a clone URL.
    raise ImproperlyConfigured(
        f"PEAKWATCH_GIT_PROTOCOLS names {', '.join(sorted(_unknown_protocols))}: it may name "
        "https, http, ssh, git and file"
    )

# The boards this worker serves beyond cpu and cuda, as a JSON object by board name (rpc
# address or tracker and key, target, memory capacity): see workers/boards/config.py.
PEAKWATCH_BOARDS = envjson("PEAKWATCH_BOARDS", {})
# How often a worker checks the health of each board it serves, for /boards/ (seconds; 0:
# only when a run starts and ends).
PEAKWATCH_BOARD_HEALTH_SECONDS = envint("PEAKWATCH_BOARD_HEALTH_SECONDS", 30)

# Regression tracking: where GitHub's REST API is (GitHub Enterprise has its own), and the
# address links in commit statuses, comments and Slack messages point back to.
PEAKWATCH_GITHUB_API_URL = envstr("PEAKWATCH_GITHUB_API_URL", "https://api.github.com")
PEAKWATCH_BASE_URL = envstr("PEAKWATCH_BASE_URL", "http://127.0.0.1:8000")
PEAKWATCH_NOTIFY_TIMEOUT = envint("PEAKWATCH_NOTIFY_TIMEOUT", 10)
# Webhook requests refused before verification are logged once per window (seconds) per
# kind and repository, and counted in between; 0 logs every one.
PEAKWATCH_WEBHOOK_REJECTION_WINDOW = envint("PEAKWATCH_WEBHOOK_REJECTION_WINDOW", 60)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "dashboard.redaction.RedactingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": envstr("PEAKWATCH_LOG_LEVEL", "INFO")},
}
