"""With FLYWHEEL_REQUIRE_OSWORLD_APPS="libreoffice chrome os" (CI sets it, after `make osworld-apps`
for those domains), a test skipped for want of an application of one of those domains fails instead:
CI must run the app path, not skip it quietly (issue 33). A skip's reason names its domain as
`make osworld-apps DOMAINS=<domain>`; one naming no domain (`make osworld-apps installs pyautogui`)
counts as `os`, the set every domain installs. Skips for other domains (gimp, vlc) stay skips."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

ENV = "FLYWHEEL_REQUIRE_OSWORLD_APPS"
_DOMAIN = re.compile(r"make osworld-apps(?: DOMAINS=([\w-]+))?")


def required_domain(reason: str, required: set[str]) -> str | None:
    """The required domain a skip's reason names, or None."""
    for match in _DOMAIN.finditer(reason):
        domain = match.group(1) or "os"
        if domain in required:
            return domain
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    required = set(os.environ.get(ENV, "").split())
    if not required or not report.skipped:
        return
    domain = required_domain(str(report.longrepr), required)
    if domain is not None:
        report.outcome = "failed"
        report.longrepr = f"{ENV} names {domain!r}, yet the test skipped: {report.longrepr}"
