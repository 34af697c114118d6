"""Every page × every role: allowed → 200, forbidden → 403 page, anonymous → login redirect."""

from __future__ import annotations

import pytest
from django.test import Client

PAGES = ["/", "/workspace/", "/review/", "/runs/", "/pools/", "/flywheel/", "/fleet/"]

# Written out by hand (not derived from webapp.pages.nav) so a change to the page table shows here.
ALLOWED = {
    "annotator": {"/", "/workspace/"},
    "reviewer": {"/", "/review/"},
    "researcher": {"/", "/runs/", "/pools/", "/flywheel/", "/fleet/"},
    "admin": set(PAGES),
    "nobody": {"/"},
}


def _client_for(users, role: str) -> Client:
    client = Client()
    client.force_login(users[role])
    return client


@pytest.mark.parametrize("role", sorted(ALLOWED))
@pytest.mark.parametrize("path", PAGES)
def test_page_status_by_role(users, role: str, path: str) -> None:
    response = _client_for(users, role).get(path)
    expected = 200 if path in ALLOWED[role] else 403
    assert response.status_code == expected, response.content[:300]
    if expected == 403:
        body = response.content.decode()
        assert "You don't have access to this page" in body
        assert "is open to:" in body
        assert "Back to home" in body


@pytest.mark.parametrize("path", PAGES)
def test_anonymous_is_sent_to_login(db, path: str) -> None:
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={path}"


@pytest.mark.parametrize("role", sorted(ALLOWED))
def test_nav_links_are_exactly_the_allowed_pages(users, role: str) -> None:
    body = _client_for(users, role).get("/").content.decode()
    nav = body.split('data-testid="nav"', 1)[1].split("</ul>", 1)[0] if role != "nobody" else ""
    for path in PAGES:
        shown = f'href="{path}"' in nav
        assert shown == (path in ALLOWED[role] and role != "nobody"), (role, path)
    assert ('href="/admin/"' in body) == (role == "admin")
    assert ('href="/api/docs/"' in body) == (role != "nobody")


def test_current_page_is_marked_active(users) -> None:
    body = _client_for(users, "researcher").get("/pools/").content.decode()
    assert '<a href="/pools/" class="active" aria-current="page">' in body


@pytest.mark.parametrize(
    ("role", "present", "absent"),
    [
        (
            "annotator",
            ["home-annotator", "Start annotating"],
            ["home-reviewer", "home-researcher", "home-admin"],
        ),
        (
            "reviewer",
            ["home-reviewer", "review_state=pending"],
            ["home-annotator", "home-researcher", "home-admin"],
        ),
        (
            "researcher",
            ["home-researcher", 'data-widget="export"', "/runs/"],
            ["home-annotator", "home-admin"],
        ),
        (
            "admin",
            ["home-admin", "/admin/store/taskpool/", 'data-testid="users"', 'data-widget="asr-model"'],
            ["home-annotator"],
        ),
        ("nobody", ["No role yet"], ["home-annotator", "home-reviewer", "home-researcher", "home-admin"]),
    ],
)
def test_home_shows_the_sections_of_the_role(users, role: str, present: list[str], absent: list[str]) -> None:
    body = _client_for(users, role).get("/").content.decode()
    for text in present:
        assert text in body, (role, text)
    for text in absent:
        assert text not in body, (role, text)


def test_export_form_offers_every_export_format(users) -> None:
    from webapp.store.models import ExportFormat

    body = _client_for(users, "researcher").get("/").content.decode()
    for value in ExportFormat.values:
        assert f'<option value="{value}">' in body


def test_admin_home_lists_users_with_their_roles(users) -> None:
    body = _client_for(users, "admin").get("/").content.decode()
    users_section = body.split('data-testid="users"', 1)[1]
    for name in ("adm", "ann", "ann2", "nobody", "res", "rev"):
        assert f">{name}</a>" in users_section
    assert "6 in all" in users_section


def test_superuser_sees_every_role_section(db, django_user_model) -> None:
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-123")
    client = Client()
    client.force_login(root)
    body = client.get("/").content.decode()
    for role in ("annotator", "reviewer", "researcher", "admin"):
        assert f'data-testid="home-{role}"' in body


def test_login_form_signs_in_and_logout_signs_out(users) -> None:
    from tests.conftest import PASSWORD

    client = Client()
    page = client.get("/login/")
    assert page.status_code == 200
    assert b'name="username"' in page.content and b'name="password"' in page.content

    bad = client.post("/login/", {"username": "ann", "password": "wrong"})
    assert bad.status_code == 200
    assert b"didn't match" in bad.content

    good = client.post("/login/", {"username": "ann", "password": PASSWORD, "next": "/workspace/"})
    assert good.status_code == 302 and good["Location"] == "/workspace/"
    assert client.get("/workspace/").status_code == 200
    assert client.get("/login/")["Location"] == "/"  # already signed in

    out = client.post("/logout/")
    assert out.status_code == 302 and out["Location"] == "/login/"
    assert client.get("/").status_code == 302


def test_fix_view_page_opens_only_the_annotators_own_trajectory(users) -> None:
    from tests.factories import TrajectoryFactory

    mine = TrajectoryFactory(source="annotation", annotator=users["annotator"])
    other = TrajectoryFactory(source="annotation", annotator=users["admin"])
    client = _client_for(users, "annotator")
    page = client.get(f"/workspace/fix/{mine.pk}/")
    assert page.status_code == 200 and f'data-workspace-fix="{mine.pk}"'.encode() in page.content
    assert client.get(f"/workspace/fix/{other.pk}/").status_code == 404
    assert _client_for(users, "reviewer").get(f"/workspace/fix/{mine.pk}/").status_code == 403
    assert _client_for(users, "admin").get(f"/workspace/fix/{other.pk}/").status_code == 200


def test_pools_page_offers_the_task_import_to_admins_only(users) -> None:
    assert b'data-widget="task-import"' in _client_for(users, "admin").get("/pools/").content
    assert b'data-widget="task-import"' not in _client_for(users, "researcher").get("/pools/").content
