"""Test settings: the real PostgreSQL and Redis, a throwaway media root, fast password hashing.

Tests use Redis database 15 (TEST_REDIS_URL) so they never consume tasks or events of a running
`make up` stack, and FLYWHEEL_TEST_DB_SUFFIX lets several test runs share one PostgreSQL server.
"""

import os
import tempfile
from pathlib import Path

from webapp.settings.base import *  # noqa: F403
from webapp.settings.base import DATABASES, STORAGES
from webapp.settings.env import env_str

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

_suffix = os.environ.get("FLYWHEEL_TEST_DB_SUFFIX", "")
DATABASES["default"]["TEST"] = {
    "NAME": f"test_{DATABASES['default']['NAME']}{'_' + _suffix if _suffix else ''}"
}

# A worker subprocess started by a test must write where the test reads: it inherits this variable.
MEDIA_ROOT = Path(
    os.environ.get("FLYWHEEL_TEST_MEDIA_ROOT") or tempfile.mkdtemp(prefix="flywheel-test-media-")
)
os.environ["FLYWHEEL_TEST_MEDIA_ROOT"] = str(MEDIA_ROOT)
STATIC_ROOT = Path(tempfile.mkdtemp(prefix="flywheel-test-static-"))
STORAGES = {
    **STORAGES,
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(MEDIA_ROOT), "base_url": "/media/"},
    },
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

REDIS_URL = env_str("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None}]},
    },
}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}

# Unit tests launch runs with no worker, env host or policy server; the preflight tests switch it on.
RL_PREFLIGHT = False
