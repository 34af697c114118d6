"""Production: secrets must come from the environment; nothing insecure falls back silently."""

from webapp.settings.base import *  # noqa: F403
from webapp.settings.env import ConfigError, env_bool, env_str

SECRET_KEY = env_str("SECRET_KEY")
if SECRET_KEY.startswith("dev-only") or len(SECRET_KEY) < 32:
    raise ConfigError("SECRET_KEY must be set to a random value of at least 32 characters in production")
DEBUG = False
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
