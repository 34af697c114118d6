"""The pages of the site, who may open each, and the navigation built from that one table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from webapp.accounts.roles import ALL_ROLES, Role


@dataclass(frozen=True)
class Page:
    name: str  # URL name, also the Vite entry of the page
    path: str
    label: str
    icon: str
    roles: frozenset[Role]
    summary: str

    def allows(self, held: Iterable[Role]) -> bool:
        return bool(self.roles & set(held))


PAGES: tuple[Page, ...] = (
    Page("home", "/", "Home", "⌂", frozenset(ALL_ROLES), "Your work at a glance"),
    Page(
        "workspace", "/workspace/", "Workspace", "✎", frozenset({Role.ANNOTATOR, Role.ADMIN}),
        "Annotate tasks on live machines",
    ),
    Page("review", "/review/", "Review", "✓", frozenset({Role.REVIEWER, Role.ADMIN}), "Review trajectories"),
    Page("runs", "/runs/", "Runs", "▶", frozenset({Role.RESEARCHER, Role.ADMIN}), "RL runs and checkpoints"),
    Page(
        "pools", "/pools/", "Task pools", "▦", frozenset({Role.RESEARCHER, Role.ADMIN}),
        "Pools, tasks and success rates",
    ),
    Page(
        "flywheel", "/flywheel/", "Flywheel", "↻", frozenset({Role.RESEARCHER, Role.ADMIN}),
        "Validated data and model lineage",
    ),
    Page(
        "fleet", "/fleet/", "Fleet", "▣", frozenset({Role.RESEARCHER, Role.ADMIN}),
        "Env hosts, environments and who holds them",
    ),
)  # fmt: skip

PAGES_BY_NAME: dict[str, Page] = {page.name: page for page in PAGES}


@dataclass(frozen=True)
class NavLink:
    label: str
    href: str
    icon: str
    active: bool = False


def nav_links(held: Iterable[Role], current_path: str) -> list[NavLink]:
    """The pages a user with roles `held` may open, the one at `current_path` marked active.

    A user with no role gets no links: home tells them to ask an admin for one.
    """
    roles = set(held)
    if not roles:
        return []
    return [
        NavLink(page.label, page.path, page.icon, active=_is_active(page.path, current_path))
        for page in PAGES
        if page.allows(roles)
    ]


def _is_active(page_path: str, current_path: str) -> bool:
    """Home only on `/`; any other page also for the pages under it (`/workspace/12/`, `/runs/3/`)."""
    if page_path == "/":
        return current_path == "/"
    return current_path.startswith(page_path)


def tool_links(held: Iterable[Role]) -> list[NavLink]:
    """Links out of the site's pages: the API docs for every role, Django admin for admins."""
    roles = set(held)
    links = [NavLink("API docs", "/api/docs/", "{}")] if roles else []
    if Role.ADMIN in roles:
        links.append(NavLink("Django admin", "/admin/", "⚙"))
    return links
