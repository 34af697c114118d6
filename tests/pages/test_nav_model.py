"""The page table gives each role its navigation."""

from __future__ import annotations

from webapp.accounts.roles import Role
from webapp.pages.nav import nav_links, tool_links


def _labels(roles: set[Role], path: str = "/") -> list[str]:
    return [link.label for link in nav_links(roles, path)]


def test_each_role_gets_its_pages_in_a_stable_order() -> None:
    assert _labels({Role.ANNOTATOR}) == ["Home", "Workspace"]
    assert _labels({Role.REVIEWER}) == ["Home", "Review"]
    assert _labels({Role.RESEARCHER}) == ["Home", "Runs", "Task pools", "Flywheel", "Fleet"]
    assert _labels({Role.ADMIN}) == ["Home", "Workspace", "Review", "Runs", "Task pools", "Flywheel", "Fleet"]


def test_roles_combine() -> None:
    assert _labels({Role.ANNOTATOR, Role.REVIEWER}) == ["Home", "Workspace", "Review"]


def test_no_role_no_links() -> None:
    assert nav_links(set(), "/") == []
    assert tool_links(set()) == []


def test_active_link_follows_the_path() -> None:
    active = [link.label for link in nav_links({Role.ADMIN}, "/runs/") if link.active]
    assert active == ["Runs"]


def test_tools_api_docs_for_all_admin_for_admins() -> None:
    assert [t.label for t in tool_links({Role.ANNOTATOR})] == ["API docs"]
    assert [t.label for t in tool_links({Role.ADMIN})] == ["API docs", "Django admin"]


def test_pages_under_a_section_keep_its_link_active() -> None:
    assert [link.label for link in nav_links({Role.ADMIN}, "/workspace/12/") if link.active] == ["Workspace"]
    assert [link.label for link in nav_links({Role.ADMIN}, "/runs/3/compare/") if link.active] == ["Runs"]
    assert [link.label for link in nav_links({Role.ADMIN}, "/") if link.active] == ["Home"]
    assert not [link.label for link in nav_links({Role.ADMIN}, "/accounts/login/") if link.active]
