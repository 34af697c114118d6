"""Shared fixtures: users per role and API clients, on the real PostgreSQL and Redis."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from webapp.accounts.roles import Role
from webapp.accounts.services import user_create

# CI turns skips for a missing OSWorld application into failures (FLYWHEEL_REQUIRE_OSWORLD_APPS=1).
pytest_plugins = ["tests.plugins.require_apps"]

PASSWORD = "pw-for-tests-1"


@pytest.fixture
def make_user(db):
    def make(username: str, *roles: Role):
        return user_create(username=username, password=PASSWORD, roles=list(roles))

    return make


@pytest.fixture
def users(make_user):
    """One user per role, plus one with no role."""
    return {
        "annotator": make_user("ann", Role.ANNOTATOR),
        "annotator2": make_user("ann2", Role.ANNOTATOR),
        "reviewer": make_user("rev", Role.REVIEWER),
        "researcher": make_user("res", Role.RESEARCHER),
        "admin": make_user("adm", Role.ADMIN),
        "nobody": make_user("nobody"),
    }


@pytest.fixture
def api(users):
    """`api("researcher")` → an APIClient logged in as that role's user; `api(None)` → anonymous."""

    def client_for(role: str | None) -> APIClient:
        client = APIClient()
        if role is not None:
            client.force_authenticate(users[role])
        return client

    return client_for
