"""Settings shared by every environment. Values come from the environment via typed helpers."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from webapp.security_headers import content_security_policy, origin_of
from webapp.settings.env import (
    database_from_url,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_secret,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(env_str("FLYWHEEL_VAR_DIR", str(BASE_DIR / "var")))

# Public (it is in this file): for tests and a development server only; settings.dev refuses it with
# DEBUG off, settings.prod always. `make up` generates a random one (var/secrets).
INSECURE_DEV_SECRET_KEY = "dev-only-insecure-key-change-me"
SECRET_KEY = env_secret("SECRET_KEY", INSECURE_DEV_SECRET_KEY)
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "axes",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc assets served by us (no CDN)
    "channels",
    "webapp",
    "webapp.accounts",
    "webapp.store",
    "webapp.fleet",
    "webapp.pages",
    "annotation",
    "rl_control",
    "webapp.flywheel",
    "demo",  # `manage.py demo_setup`, `manage.py policy_starter`
    "benchmarks",  # `manage.py bench` (benchmarks/management/commands/bench.py)
]

MIDDLEWARE = [
    "webapp.client_address.ClientAddressMiddleware",  # first: REMOTE_ADDR as the lockout counts it
    "webapp.overload.OverloadMiddleware",  # no free database connection: 503, never 500
    "django.middleware.security.SecurityMiddleware",
    "webapp.security_headers.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "webapp.api_input.NulQueryMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a lockout into webapp.accounts.lockout's 429
]

ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"
WSGI_APPLICATION = "project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "webapp" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "webapp.accounts.context.roles",
            ],
        },
    },
]

# Database connections: every process has its own bounded pool (Django's psycopg pool), sized by the
# role it plays, so the sum over every process stays under PostgreSQL's max_connections (the budget:
# docs/scale.md). web: the ASGI server; worker: one Celery prefork child (one task at a time);
# envhost: an env-host worker (one threads pool); command: manage.py commands, beat, the policy server.
DB_POOL_ROLES = ("web", "worker", "envhost", "command")
DB_POOL_ROLE = env_choice("DB_POOL_ROLE", "web", DB_POOL_ROLES)
DB_POOL_WEB_MIN = env_int("DB_POOL_WEB_MIN", 2, minimum=0)
DB_POOL_MAX = {
    "web": env_int("DB_POOL_WEB_MAX", 20, minimum=1),
    "worker": env_int("DB_POOL_WORKER_MAX", 2, minimum=1),
    "envhost": env_int("DB_POOL_ENVHOST_MAX", 4, minimum=1),
    "command": env_int("DB_POOL_COMMAND_MAX", 2, minimum=1),
}
# How long a request (or task) waits for a free connection; then 503 with Retry-After (webapp/overload.py).
DB_POOL_TIMEOUT_S = env_float("DB_POOL_TIMEOUT_S", 5.0)
DB_OVERLOAD_RETRY_AFTER_S = env_int("DB_OVERLOAD_RETRY_AFTER_S", 2, minimum=1)
# A pool closes one connection above its minimum per this many idle seconds (psycopg_pool max_idle).
DB_POOL_MAX_IDLE_S = env_float("DB_POOL_MAX_IDLE_S", 10.0)
DATABASES = {
    "default": database_from_url(
        # docker compose: the password from a secret file (DATABASE_PASSWORD_FILE), not in the URL
        env_url("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/flywheel", "DATABASE_PASSWORD"),
        pool={
            "min_size": min(DB_POOL_WEB_MIN, DB_POOL_MAX["web"]) if DB_POOL_ROLE == "web" else 0,
            "max_size": DB_POOL_MAX[DB_POOL_ROLE],
            "timeout": DB_POOL_TIMEOUT_S,
            "max_idle": DB_POOL_MAX_IDLE_S,
        },
        # pg_stat_activity shows which role holds which connections.
        application_name=env_str("DB_APPLICATION_NAME", f"flywheel-{DB_POOL_ROLE}"),
    ),
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", "REDIS_PASSWORD")

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # socket_timeout None: redis-py 8 defaults to 5 s, which drops idle consumers' group reads.
        # max_connections: redis-py 8 caps a pool at 100; 500 dashboards closing at once need more
        # for their group_discard calls (measured by `bench dashboard`).
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": None, "max_connections": 2000}],
            "capacity": 1500,
            "expiry": 30,
        },
    },
}

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
    },
}

AUTHENTICATION_BACKENDS = [
    "webapp.accounts.backends.AxesBackend",  # login rate limit: both /login/ and /api/auth/token/
    "django.contrib.auth.backends.ModelBackend",
]
# django-axes: AXES_FAILURE_LIMIT failed sign-ins for one username from one address lock that pair
# for AXES_COOLOFF_MINUTES (429 with a message); a successful sign-in resets the count.
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_float("AXES_COOLOFF_MINUTES", 15.0))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# A retry during a lock (even with the right password) is refused and does not restart the cool-off.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "webapp.accounts.lockout.lockout_response"
AXES_HTTP_RESPONSE_CODE = 429
# The client address is REMOTE_ADDR, which webapp.client_address sets from X-Forwarded-For only when
# the request comes from one of TRUSTED_PROXIES (addresses, CIDR networks, host names; empty: none,
# as on `make up`; compose: nginx, which overwrites the header with the client's address).
AXES_IPWARE_META_PRECEDENCE_ORDER = ["REMOTE_ADDR"]
AXES_VERBOSE = False  # no start-up banner in every management command's output
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", [])
# API tokens (`POST /api/auth/token/`) expire this long after they were issued.
API_TOKEN_TTL_S = env_int("API_TOKEN_TTL_S", 7 * 24 * 3600, minimum=60)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [d for d in [BASE_DIR / "frontend" / "dist"] if d.exists()]

MEDIA_URL = env_str("MEDIA_URL", "/media/")
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
# What one install computes once and every later install on the machine reuses (the starter model).
FLYWHEEL_CACHE_DIR = Path(env_str("FLYWHEEL_CACHE_DIR", str(Path.home() / ".cache" / "flywheel")))
# Media is served only after a permission check (webapp/store/media.py). Empty: Django sends the
# bytes (`make up`); set (e.g. /internal-media/) when nginx serves MEDIA_ROOT at that `internal`
# location: the view then answers with X-Accel-Redirect (docker-compose.yml, deploy/nginx.conf).
MEDIA_ACCEL_REDIRECT_PREFIX = env_str("MEDIA_ACCEL_REDIRECT_PREFIX", "")

# Media storage: local filesystem by default, any S3-compatible store when FLYWHEEL_S3_BUCKET is set.
_S3_BUCKET = env_str("FLYWHEEL_S3_BUCKET", "")
if _S3_BUCKET:
    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": _S3_BUCKET,
            "endpoint_url": env_str("FLYWHEEL_S3_ENDPOINT_URL", "") or None,
            # docker compose: files mounted only into the services that read or write media
            "access_key": env_secret("FLYWHEEL_S3_ACCESS_KEY", "", empty_file_ok=True) or None,
            "secret_key": env_secret("FLYWHEEL_S3_SECRET_KEY", "", empty_file_ok=True) or None,
            "region_name": env_str("FLYWHEEL_S3_REGION", "") or None,
            "querystring_auth": True,
        },
    }
else:
    _default_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(MEDIA_ROOT), "base_url": MEDIA_URL},
    }
STORAGES = {
    "default": _default_storage,
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "webapp.accounts.tokens.ExpiringTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # NUL characters refused with a 400 in every body (webapp/api_input.py).
    "DEFAULT_PARSER_CLASSES": [
        "webapp.api_input.NulSafeJSONParser",
        "webapp.api_input.NulSafeFormParser",
        "webapp.api_input.NulSafeMultiPartParser",
    ],
    "EXCEPTION_HANDLER": "webapp.api_input.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # One timestamp format in every response: UTC, 6 fractional digits (webapp/timestamps.py).
    "DATETIME_FORMAT": "%Y-%m-%dT%H:%M:%S.%f+00:00",
    "DEFAULT_RENDERER_CLASSES": [
        "webapp.timestamps.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # `?format=` selects an export format (jsonl, sharegpt, ...), not a DRF renderer.
    "URL_FORMAT_OVERRIDE": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Flywheel API",
    "DESCRIPTION": "Tasks, trajectories, annotation, RL runs and export for GUI agents.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # One name per choice set that several models share a field name for (status, source, ...).
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "rl_control.models.RunStatus",
        "RunAlgorithmEnum": "rl_control.models.RunAlgorithm",
        "JobStatusEnum": "webapp.store.models.JobStatus",
        "TrajectoryStatusEnum": "webapp.store.models.TrajectoryStatus",
        "TrajectorySourceEnum": "webapp.store.models.TrajectorySource",
        "ExportFormatEnum": "webapp.store.models.ExportFormat",
        "TrackEnum": "annotation.models.Track",
        "RunModeEnum": "rl_control.models.RunMode",
        "ValidationModeEnum": "webapp.store.models.ValidationMode",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "webapp.openapi.add_error_responses",
    ],
}

# Celery: one queue per kind of work so each can be scaled on its own.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600)}
FLYWHEEL_QUEUES = ["default", "env", "rollout", "train", "asr.live", "asr", "export"]

# Environment fleet (workers/envs/leases.py): lease time-to-live, reaper period, Redis key prefix.
FLEET_REDIS_PREFIX = env_str("FLEET_REDIS_PREFIX", "flywheel:fleet")
FLEET_LEASE_TTL_S = env_float("FLEET_LEASE_TTL_S", 60.0)
FLEET_REAPER_PERIOD_S = env_float("FLEET_REAPER_PERIOD_S", 2.0)
# Env hosts (Celery workers started with FLYWHEEL_ENV_HOST=<name>): warm pool and capacity per kind.
FLEET_WARM_POOL = env_str("FLEET_WARM_POOL", "desktop=1,browser=2,game=1,phone=1,terminal=1")
FLEET_CAPACITY = env_str("FLEET_CAPACITY", "")
FLEET_HOST_PERIOD_S = env_float("FLEET_HOST_PERIOD_S", 1.0)
# Annotation before RL: RL rollouts leave this many idle envs of each kind to annotators.
FLEET_INTERACTIVE_RESERVE = env_int("FLEET_INTERACTIVE_RESERVE", 1, minimum=0)
# An annotator who finds no idle env waits up to this long (hosts boot more up to their capacity,
# RL gives envs back) before the session start answers 503.
FLEET_INTERACTIVE_WAIT_S = env_float("FLEET_INTERACTIVE_WAIT_S", 20.0)
# The websocket→VNC proxy (workers/envs/vnc/proxy.py): where it listens, where browsers reach it
# (by default the listen address, so a stack on other ports gives out its own proxy's URL), token
# lifetime.
VNC_PROXY_LISTEN = env_str("VNC_PROXY_LISTEN", "127.0.0.1:6080")
VNC_PROXY_PUBLIC_URL = env_str(
    "VNC_PROXY_PUBLIC_URL", f"ws://{VNC_PROXY_LISTEN.replace('0.0.0.0:', '127.0.0.1:')}"
)
VNC_TOKEN_TTL_S = env_int("VNC_TOKEN_TTL_S", 3600, minimum=1)
# The key VNC grants are signed with (the proxy follows no other); made 0600 at first use.
VNC_GRANT_KEY_FILE = Path(env_str("FLYWHEEL_VNC_GRANT_KEY_FILE", str(VAR_DIR / "secrets" / "vnc_grant_key")))
# Content-Security-Policy of every response (webapp/security_headers.py): scripts from our origin
# only; websockets also to the VNC proxy; images and audio also from the S3 store when media is there.
CONTENT_SECURITY_POLICY = env_str("CONTENT_SECURITY_POLICY", "") or content_security_policy(
    vnc_proxy_url=VNC_PROXY_PUBLIC_URL,
    media_origins=[origin_of(env_str("FLYWHEEL_S3_ENDPOINT_URL", "")) or "https://*.amazonaws.com"]
    if _S3_BUCKET
    else [],
)
CELERY_BEAT_SCHEDULE = {
    "reap-leases": {
        "task": "webapp.fleet.tasks.reap_leases",
        "schedule": FLEET_REAPER_PERIOD_S,
        "options": {"queue": "env", "expires": FLEET_REAPER_PERIOD_S},
    },
    "reap-abandoned-annotation-sessions": {
        "task": "annotation.tasks.reap_abandoned_sessions",
        "schedule": 10.0,
        "options": {"queue": "default", "expires": 10.0},
    },
    "persist-fleet-events": {
        "task": "webapp.fleet.tasks.persist_fleet_events",
        "schedule": 5.0,
        "options": {"queue": "default", "expires": 5.0},
    },
    "enforce-run-budgets": {
        "task": "rl_control.tasks.runs_enforce_budgets",
        "schedule": 60.0,
        "options": {"queue": "default", "expires": 60.0},
    },
}

# Annotation requests call the session's environment with no transaction or connection held (STYLE
# 16): one call waits at most ANNOTATION_ENV_TIMEOUT_S (then 504); a decision's claim on a session
# lapses after ANNOTATION_CLAIM_TTL_S (a web process that died between claim and store).
ANNOTATION_ENV_TIMEOUT_S = env_float("ANNOTATION_ENV_TIMEOUT_S", 30.0)
ANNOTATION_CLAIM_TTL_S = env_float("ANNOTATION_CLAIM_TTL_S", 120.0)

# Review (seed 000 §2.4.3): independent reviews per trajectory, click agreement radius, duplicate cut-off
REVIEWS_PER_TRAJECTORY = env_int("REVIEWS_PER_TRAJECTORY", 2, minimum=1)
REVIEW_AGREEMENT_RADIUS_PX = env_float("REVIEW_AGREEMENT_RADIUS_PX", 14.0)
REVIEW_DUPLICATE_THRESHOLD = env_float("REVIEW_DUPLICATE_THRESHOLD", 0.95)
REVIEW_REPLAY_QUEUE = env_str("REVIEW_REPLAY_QUEUE", "default")

# Task import uploads (the pools page sends a chosen folder's files in one request, each with its
# path): Django's own caps (100 files, 1,000 fields) answered a folder of more than 100 files with
# "The request was not valid". The bytes stay capped by TASK_IMPORT_MAX_UPLOAD_BYTES.
DATA_UPLOAD_MAX_NUMBER_FILES = env_int("TASK_IMPORT_MAX_UPLOAD_FILES", 5000, minimum=1)
DATA_UPLOAD_MAX_NUMBER_FIELDS = env_int(
    "DATA_UPLOAD_MAX_NUMBER_FIELDS", 2 * DATA_UPLOAD_MAX_NUMBER_FILES + 100, minimum=100
)

# Export
EXPORT_MAX_SYNC_STEPS = env_int("EXPORT_MAX_SYNC_STEPS", 10_000_000, minimum=1)
EXPORT_CHUNK_SIZE = env_int("EXPORT_CHUNK_SIZE", 2000, minimum=1)

# Policy serving (SPEC §7): the embedded server by default; a vLLM URL in production.
POLICY_BASE_URL = env_str("POLICY_BASE_URL", "http://127.0.0.1:8100/v1")
POLICY_TIMEOUT_S = env_float("POLICY_TIMEOUT_S", 30.0)
# The model name the server is asked for when no checkpoint is promoted, and how to talk to it:
# "embedded" (our CPU model: screen pixels, element list), "ui-tars-1.5" (smart_resize pixels),
# "ui-tars-1.0" (relative 0..1000).
POLICY_MODEL = env_str("POLICY_MODEL", "embedded")
POLICY_PROFILE = env_str("POLICY_PROFILE", "embedded")
# The secret the annotation model's server asks of a weight hot-swap (empty: derived from SECRET_KEY,
# except under docker compose, where each tier has its own SECRET_KEY: only the model's callers hold it).
POLICY_WEIGHTS_SECRET = env_secret("POLICY_WEIGHTS_SECRET", "")
# docker compose: every secret is a file mounted only where it is needed (settings.prod).
CREDENTIALS_FROM_FILES = env_bool("FLYWHEEL_CREDENTIALS_FROM_FILES", False)

# Public base URL used when exports reference media by URL.
PUBLIC_BASE_URL = env_str("PUBLIC_BASE_URL", "http://127.0.0.1:8000")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "filters": {"pool_discards": {"()": "webapp.overload.PoolDiscardFilter"}},
    "loggers": {"psycopg.pool": {"filters": ["pool_discards"]}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# think-aloud (issue 6): annotator speech -> Whisper -> words aligned to steps (annotation/thinkaloud)
THINKALOUD_QUEUE = env_str("THINKALOUD_QUEUE", "asr")  # full passes over a finished recording
# Live chunks (transcripts while the annotator speaks) on their own queue, consumed ahead of the full
# passes: a worker at interactive CPU priority serves only it (the full passes run at a lower one).
THINKALOUD_LIVE_QUEUE = env_str("THINKALOUD_LIVE_QUEUE", "asr.live")
# The live pass decodes greedily (beam 1) and never twice; the full pass keeps the tuned settings.
THINKALOUD_LIVE_BEAM_SIZE = env_int("THINKALOUD_LIVE_BEAM_SIZE", 1, minimum=1)
# Each live chunk is decoded with this many seconds of the chunk before it in front (workers/asr/
# pipeline.py, LIVE_OVERLAP_S); 0 decodes every chunk alone.
THINKALOUD_LIVE_OVERLAP_S = env_float("THINKALOUD_LIVE_OVERLAP_S", 2.0)
# A recording whose speech is less than this many dB above the room's noise is flagged noisy to the
# annotator and the reviewer (Whisper mishears more there: benchmarks/HISTORY.md, asr).
THINKALOUD_NOISY_SNR_DB = env_float("THINKALOUD_NOISY_SNR_DB", 20.0)
THINKALOUD_MAX_CHUNK_BYTES = env_int("THINKALOUD_MAX_CHUNK_BYTES", 2_000_000, minimum=1)
THINKALOUD_MAX_CHUNK_S = env_float("THINKALOUD_MAX_CHUNK_S", 120.0)
THINKALOUD_CLOCK_TOLERANCE_S = env_float("THINKALOUD_CLOCK_TOLERANCE_S", 5.0)
# tiny.en (empty), base, or a CTranslate2 directory (workers/asr/models.py)
THINKALOUD_MODEL_PATH = env_str("THINKALOUD_MODEL_PATH", "")
THINKALOUD_DEVICE = env_str("THINKALOUD_DEVICE", "cpu")
THINKALOUD_COMPUTE_TYPE = env_str("THINKALOUD_COMPUTE_TYPE", "int8")
THINKALOUD_LEAD_S = env_float("THINKALOUD_LEAD_S", 0.5)
THINKALOUD_LAG_S = env_float("THINKALOUD_LAG_S", 1.5)
THINKALOUD_MAX_ATTEMPTS = env_int("THINKALOUD_MAX_ATTEMPTS", 4, minimum=1)
THINKALOUD_REFINE_BASE_URL = env_str("THINKALOUD_REFINE_BASE_URL", "")  # empty: no LLM refinement
THINKALOUD_REFINE_MODEL = env_str("THINKALOUD_REFINE_MODEL", "")
# docker compose: a file mounted into the full-pass ASR worker only (the one that refines)
THINKALOUD_REFINE_API_KEY = env_secret("THINKALOUD_REFINE_API_KEY", "", empty_file_ok=True)

# RL engine (rl_control.engine): every run serves its own policy (rl_control.engine.serving): the
# trainer worker starts the run's embedded policy servers on free ports, bound to RL_POLICY_BIND and
# reached by the rollout workers at RL_POLICY_HOST (compose: the trainer container's name), with
# RL_POLICY_THREADS torch threads each; or the run names external OpenAI-compatible endpoints (vLLM).
# Then: where run checkpoints go, when a rollout slot whose heartbeat stopped is reclaimed, and how
# many updates one trainer chunk runs.
RL_POLICY_BIND = env_str("RL_POLICY_BIND", "127.0.0.1")
RL_POLICY_HOST = env_str("RL_POLICY_HOST", "127.0.0.1")
RL_POLICY_THREADS = env_int("RL_POLICY_THREADS", 1, minimum=1)
RL_POLICY_START_S = env_float("RL_POLICY_START_S", 120.0)
# Launching checks what the run needs first (rl_control.engine.preflight): tasks, environments,
# workers / endpoints, start checkpoint.
RL_PREFLIGHT = env_bool("RL_PREFLIGHT", True)
RL_CHECKPOINT_ROOT = env_str("RL_CHECKPOINT_ROOT", str(VAR_DIR / "rl"))
RL_SLOT_TIMEOUT_S = env_float("RL_SLOT_TIMEOUT_S", 60.0)
RL_UPDATES_PER_CHUNK = env_int("RL_UPDATES_PER_CHUNK", 10, minimum=1)
RL_REDIS_PREFIX = env_str("RL_REDIS_PREFIX", "rl")
RL_ROLLOUT_CHUNK_S = env_float("RL_ROLLOUT_CHUNK_S", 120.0)
CELERY_BEAT_SCHEDULE["rl-engine-watch"] = {
    "task": "rl_control.tasks.engine_watch",
    "schedule": 15.0,
    "options": {"queue": "default", "expires": 15.0},
}
RL_ROLLOUT_QUEUE = env_str("RL_ROLLOUT_QUEUE", "rollout")
RL_TRAIN_QUEUE = env_str("RL_TRAIN_QUEUE", "train")
# Fair share among running runs (rl_control.engine.share): a slot task refused a rollout process
# pauses this long before it goes back to the queue; a slot queued (not yet running) is restarted
# only after RL_SLOT_QUEUED_TIMEOUT_S; a trainer chunk holds the train worker at least
# RL_TRAIN_SHARE_S before yielding it to another run's trainer (at once when it only waits for data),
# a rollout slot at least RL_ROLLOUT_SHARE_S.
RL_SHARE_REFUSED_PAUSE_S = env_float("RL_SHARE_REFUSED_PAUSE_S", 1.0)
RL_SLOT_QUEUED_TIMEOUT_S = env_float("RL_SLOT_QUEUED_TIMEOUT_S", 900.0)
RL_TRAIN_SHARE_S = env_float("RL_TRAIN_SHARE_S", 30.0)
# A launched run's policy servers start on this queue at once (not when its trainer gets the train
# worker); they run on that worker's machine, as they do on the trainer's.
RL_SERVING_START_QUEUE = env_str("RL_SERVING_START_QUEUE", "default")
RL_ROLLOUT_SHARE_S = env_float("RL_ROLLOUT_SHARE_S", 10.0)
