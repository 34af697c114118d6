"""Local development and `make up`: debug on, everything on this machine."""

from webapp.settings.base import *  # noqa: F403
from webapp.settings.env import env_bool

DEBUG = env_bool("DEBUG", True)
