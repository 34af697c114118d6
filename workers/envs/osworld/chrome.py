"""OSWorld's Chrome steps on a session: Chromium stands in for Google Chrome, inside the sandbox.

OSWorld starts Chrome as `google-chrome --remote-debugging-port=1337` (plus `socat` 9222 → 1337)
and then opens or closes tabs over the DevTools protocol. Here `google-chrome` is Debian's Chromium
with the session's flags and its profile where OSWorld's getters read it
(`~/.config/google-chrome`), and the DevTools calls are made *inside* the session's sandbox by its
own python3 (the debugging port listens on the sandbox's loopback, which nothing outside reaches).

Only local pages can load: sessions have no network, so a tab of a web site is refused with that
reason (`url_problems`); `file://` pages under the session's home (put there by a `download` from
the task's bundle) and `about:`/`chrome:` pages open.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from workers.envs.osworld.common import OSWORLD_HOME, CommandRunner, OSWorldError

PROFILE_DIR = f"{OSWORLD_HOME}/.config/google-chrome"
DEBUG_PORTS = (1337, 9222)  # OSWorld's Chrome port and its socat forward
LOCAL_SCHEMES = frozenset({"file", "about", "chrome", "data"})

# Runs inside the sandbox (python3 stdlib only): waits for the DevTools endpoint, then does `op`.
_DEVTOOLS = r"""
import json, sys, time, urllib.parse, urllib.request
op, args = sys.argv[1], json.loads(sys.argv[2])
def call(path, method="GET"):
    last = None
    for port in PORTS:
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
            with urllib.request.urlopen(req, timeout=5) as r:
                body = r.read()
            try:
                return json.loads(body)
            except ValueError:  # /json/close answers plain text
                return body.decode(errors="replace")
        except OSError as exc:
            last = exc
    raise last
deadline = time.monotonic() + float(args.get("wait_s", 20))
while True:
    try:
        call("/json/version"); break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("Chrome's DevTools endpoint did not answer")
        time.sleep(0.3)
if op == "open":
    for url in args["urls"]:
        call("/json/new?" + urllib.parse.quote(url, safe=""), "PUT")
elif op == "close":
    for url in args["urls"]:
        for tab in call("/json/list"):
            if tab.get("type") == "page" and tab.get("url", "").rstrip("/") == url.rstrip("/"):
                call("/json/close/" + tab["id"])
                break
elif op == "tabs":
    pages = [t for t in call("/json/list") if t.get("type") == "page"]
    print(json.dumps([{"title": t.get("title", ""), "url": t.get("url", "")} for t in reversed(pages)]))
"""


def chrome_argv(parts: list[str]) -> list[str]:
    """`google-chrome ARGS` as the session's Chromium: its flags, OSWorld's profile path."""
    from workers.envs.desktop.apps import CHROMIUM_FLAGS

    extra = [] if any(p.startswith("--user-data-dir") for p in parts) else [f"--user-data-dir={PROFILE_DIR}"]
    return ["chromium", *CHROMIUM_FLAGS, *extra, *parts[1:]]


def url_problems(url: str) -> list[str]:
    """Why a tab of `url` cannot open here ([] when it can)."""
    scheme = urlsplit(url).scheme
    if scheme in LOCAL_SCHEMES:
        return []
    if scheme in {"http", "https"}:
        return [f"opens the web page {url!r}, a live site that needs the network (sessions have none)"]
    return [f"opens {url!r}: only file:, about: and chrome: pages can load here"]


def _devtools(runner: CommandRunner, op: str, args: dict[str, Any], timeout_s: float = 40.0) -> str:
    code = _DEVTOOLS.replace("PORTS", repr(DEBUG_PORTS))
    result = runner.run_command(
        ["/usr/bin/python3", "-c", code, op, json.dumps(args)], timeout_s=timeout_s, separate_stderr=True
    )
    if not result.ok:
        detail = (result.stderr or result.output).strip().splitlines()[-1:] or ["no output"]
        raise OSWorldError(f"chrome {op}: {detail[0][:300]}")
    return result.output


def open_tabs(runner: CommandRunner, urls: list[str]) -> None:
    """OSWorld's `chrome_open_tabs`: each URL in a new tab of the running Chrome."""
    for url in urls:
        problems = url_problems(url)
        if problems:
            raise OSWorldError(problems[0])
    _devtools(runner, "open", {"urls": urls})


def close_tabs(runner: CommandRunner, urls: list[str]) -> None:
    """OSWorld's `chrome_close_tabs`: close the first tab showing each URL."""
    _devtools(runner, "close", {"urls": urls})


def open_tabs_info(runner: CommandRunner) -> list[dict[str, str]]:
    """OSWorld's `open_tabs_info` getter: [{title, url}] of every tab, oldest first."""
    tabs: list[dict[str, str]] = json.loads(_devtools(runner, "tabs", {"wait_s": 5}))
    return tabs
