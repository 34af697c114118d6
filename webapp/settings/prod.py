"""Production: secrets must come from the environment; nothing insecure falls back silently."""

import os

from webapp.settings.base import *  # noqa: F403
from webapp.settings.env import ConfigError, env_bool, env_int, env_secret, refuse_secret_values

SECRET_KEY = env_secret("SECRET_KEY")
if SECRET_KEY.startswith("dev-only") or len(SECRET_KEY) < 32:
    raise ConfigError("SECRET_KEY must be set to a random value of at least 32 characters in production")
DEBUG = False
# docker compose sets this: every secret comes as a file mounted into the services that need it, and
# one left in the `.env` every app container reads stops the container with that reason.
if CREDENTIALS_FROM_FILES:
    refuse_secret_values(os.environ)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# HSTS: browsers that reached us over HTTPS keep to HTTPS (sent on HTTPS responses only; 0 = off).
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
