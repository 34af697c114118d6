"""Issue 30, finding 9: a VNC token outlived its user's logout and the revocation of their API token
(up to its 1 h TTL). Now signing out, revoking one's API token, and an admin revoking it all delete
every VNC token minted for that user (the proxy drops open connections within seconds); other users'
tokens stay. Real PostgreSQL and Redis."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.conftest import PASSWORD
from webapp.accounts.tokens import token_issue
from webapp.fleet import services as fleet
from workers.envs.vnc.server import VncTarget
from workers.envs.vnc.tokens import TOKEN_PREFIX, mint_token

pytestmark = [pytest.mark.django_db, pytest.mark.security]
TARGET = VncTarget(socket="/run/flywheel-vnc/x11vnc-100/vnc.sock")


def _mint(user_id: int, session: str) -> str:
    """A token as `fleet.vnc_token_mint` stores it (same function, key and Redis)."""
    return mint_token(fleet.registry().r, session, user_id, TARGET, False, 3600, key=fleet.vnc_grant_key())


def _alive(token: str) -> bool:
    return bool(fleet.registry().r.exists(TOKEN_PREFIX + token))


def test_logout_revokes_the_users_vnc_tokens(users) -> None:
    annotator, other = users["annotator"], users["annotator2"]
    client = Client()
    assert client.login(username=annotator.username, password=PASSWORD)
    mine = [_mint(annotator.pk, "annotation:1"), _mint(annotator.pk, "annotation:2")]
    theirs = _mint(other.pk, "annotation:3")
    assert all(_alive(t) for t in mine)
    assert client.post("/logout/").status_code in (200, 302)
    assert not any(_alive(t) for t in mine)
    assert _alive(theirs)


def test_revoking_an_api_token_revokes_the_users_vnc_tokens(users) -> None:
    annotator, admin = users["annotator"], users["admin"]
    client = APIClient()
    _, key = token_issue(user=annotator)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    token = _mint(annotator.pk, "annotation:4")
    assert client.delete("/api/auth/token/").json() == {"revoked": True}
    assert not _alive(token)
    # An admin revoking someone's API token ends their VNC tokens too.
    token_issue(user=annotator)
    token = _mint(annotator.pk, "annotation:5")
    admin_client = APIClient()
    admin_client.force_authenticate(admin)
    assert admin_client.delete(f"/api/auth/tokens/{annotator.pk}/").json() == {"revoked": True}
    assert not _alive(token)
