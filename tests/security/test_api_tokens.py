"""Issue 30, finding 10 (tokens): API tokens were stored in plain text (a reader of the database
held every key, the admin's included) and every sign-in returned the same key again. Now only a
digest is stored, each sign-in issues a new key shown that once, and a user lists and revokes them."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.conftest import PASSWORD

pytestmark = [pytest.mark.django_db, pytest.mark.security]


def _sign_in(username: str = "res") -> dict:
    response = APIClient().post(
        "/api/auth/token/", {"username": username, "password": PASSWORD}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def _as(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _database_holds(text: str) -> bool:
    """Whether any text column of any table holds `text` (as a reader of the database would look)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND data_type IN ('character varying', 'text')"
        )
        columns = cursor.fetchall()
        for table, column in columns:
            cursor.execute(f'SELECT 1 FROM "{table}" WHERE "{column}" LIKE %s LIMIT 1', [f"%{text}%"])
            if cursor.fetchone():
                return True
    return False


def test_tokens_are_stored_hashed_and_each_sign_in_gets_a_new_one(users) -> None:
    first, second = _sign_in(), _sign_in()
    assert first["token"] != second["token"]
    for issued in (first, second):
        assert _as(issued["token"]).get("/api/me/").status_code == 200
        assert not _database_holds(issued["token"])  # the key is nowhere in the database
        assert _database_holds(hashlib.sha256(issued["token"].encode()).hexdigest())
        assert issued["prefix"] == issued["token"][:8]
    listed = _as(first["token"]).get("/api/auth/token/").json()
    assert {t["id"] for t in listed} == {first["id"], second["id"]}
    assert all("token" not in t and "digest" not in t for t in listed)


def test_a_user_revokes_one_token_or_the_one_in_use(users) -> None:
    first, second, third = _sign_in(), _sign_in(), _sign_in()
    other = _sign_in("ann")
    owner = _as(first["token"])
    assert owner.delete(f"/api/auth/token/{other['id']}/").status_code == 404  # not yours
    assert _as(other["token"]).get("/api/me/").status_code == 200
    assert owner.delete(f"/api/auth/token/{second['id']}/").json() == {"revoked": True}
    assert _as(second["token"]).get("/api/me/").status_code in (401, 403)
    assert owner.delete("/api/auth/token/").json() == {"revoked": True}  # the one in use
    assert owner.get("/api/me/").status_code in (401, 403)
    assert _as(third["token"]).get("/api/me/").status_code == 200  # the others stay
    assert _as(third["token"][:8] + "x" * 35).get("/api/me/").json()["detail"] == "Invalid token."


def test_admins_see_tokens_by_prefix_in_django_admin_and_revoke_them(users) -> None:
    from django.test import Client

    from webapp.accounts.models import ApiToken

    issued = _sign_in()
    admin = Client()
    admin.force_login(users["admin"])  # the admin role, not a superuser
    page = admin.get("/admin/accounts/apitoken/")
    assert page.status_code == 200 and issued["prefix"] in page.content.decode()
    assert issued["token"] not in page.content.decode()
    assert admin.get("/admin/accounts/apitoken/add/").status_code == 403  # made by signing in only
    done = admin.post(f"/admin/accounts/apitoken/{issued['id']}/delete/", {"post": "yes"})
    assert done.status_code == 302 and not ApiToken.objects.filter(pk=issued["id"]).exists()
    assert _as(issued["token"]).get("/api/me/").status_code in (401, 403)
