"""Local development and `make up`: everything on this machine.

`make up` writes var/secrets/env (its generated SECRET_KEY, the app role's DATABASE_URL, the `web`
Redis user's REDIS_URL, DEBUG off unless FLYWHEEL_DEBUG=1); it is read here first, so
`python manage.py ...` after `make up` reaches the same services. Without it (no `make up` yet):
DEBUG on and the insecure development key, which is refused when DEBUG is off.
"""

import os
from pathlib import Path

from webapp.settings.env import ConfigError, env_bool, load_env_file

_VAR_DIR = Path(os.environ.get("FLYWHEEL_VAR_DIR") or Path(__file__).resolve().parents[2] / "var")
load_env_file(_VAR_DIR / "secrets" / "env")

from webapp.settings.base import *  # noqa: E402, F403
from webapp.settings.base import INSECURE_DEV_SECRET_KEY, SECRET_KEY  # noqa: E402

DEBUG = env_bool("DEBUG", True)
if not DEBUG and SECRET_KEY == INSECURE_DEV_SECRET_KEY:
    raise ConfigError("SECRET_KEY is the public development key: set it, or run `make up` (var/secrets/env)")
