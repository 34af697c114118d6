"""Anonymous errors show the project's own pages, never Django's debug page (issue 30, finding 6;
docs/threat-model.md, "Web and API"). `make up` runs with DEBUG off (tests/security/
test_local_accounts.py); here: what a 404 and a 500 then show an anonymous caller."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = [pytest.mark.django_db, pytest.mark.security]

LEAKS = ("URLconf", "SECRET_KEY", "Traceback", "DATABASES", "api/auth/token", "sk-test-123")


def test_an_anonymous_404_is_the_projects_page() -> None:
    page = Client().get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
    assert "There is no page here" in page.content.decode()
    assert not [leak for leak in LEAKS if leak in page.content.decode()]


def test_an_api_404_stays_json() -> None:
    response = Client().get("/api/no-such-endpoint/")
    assert response.status_code == 404 and response.json() == {"detail": "Not found."}


@pytest.mark.urls("tests.security.urls_failing")
def test_an_anonymous_500_is_the_projects_page() -> None:
    client = Client(raise_request_exception=False)
    page = client.get("/boom/")
    assert page.status_code == 500 and "Something went wrong on our side" in page.content.decode()
    assert not [leak for leak in LEAKS if leak in page.content.decode()]
    api = client.get("/api/boom/")
    assert api.status_code == 500 and api.json() == {"detail": "Server error."}
