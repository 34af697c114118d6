"""The test settings (DEBUG off) with one page and one API path that fail (urls_failing), for a real
server process showing the 500 page (tests/e2e/test_e2e_role_doors.py)."""

from webapp.settings.test import *  # noqa: F403

ROOT_URLCONF = "tests.security.urls_failing"
