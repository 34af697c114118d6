"""A leased desktop seen live in the real noVNC client (`@novnc/novnc` core/rfb.js) in Chromium,
through the token proxy, with a token Django minted; a driving token moves the X pointer, a
read-only one cannot."""

from __future__ import annotations

import functools
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from webapp.fleet import services as fleet

ROOT = Path(__file__).resolve().parents[2]
NOVNC = ROOT / "frontend" / "node_modules" / "@novnc" / "novnc"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]  # fmt: skip

pytestmark = pytest.mark.e2e

PAGE = """<!doctype html><html><body style="margin:0">
<div id="screen" style="width:1280px;height:800px"></div>
<script type="module">
import RFB from "/novnc/core/rfb.js";
const params = new URLSearchParams(location.search);
const rfb = new RFB(document.getElementById("screen"), params.get("url"));
rfb.viewOnly = params.get("viewonly") === "1";
window.__state = "connecting";
rfb.addEventListener("connect", () => { window.__state = "connected"; });
rfb.addEventListener("disconnect", (e) => { window.__state = "disconnected:" + e.detail.clean; });
window.__rfb = rfb;
</script></body></html>"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[dict[str, str]]:
    if not (NOVNC / "core" / "rfb.js").is_file():
        pytest.fail("noVNC is not installed: run `make build` (npm ci in frontend/)")
    name = f"vn{uuid.uuid4().hex[:8]}"
    prefix = f"test:fleet:{name}"
    proxy_port = _free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test", "FLEET_REDIS_PREFIX": prefix}
    host = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-n", f"{name}@%h", "-Q", f"env.{name}", "-P",
         "threads", "-c", "4", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"],
        env={**env, "FLYWHEEL_ENV_HOST": name, "FLEET_WARM_POOL": "desktop=1"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    proxy = subprocess.Popen(
        [sys.executable, "-m", "workers.envs.vnc.proxy", "--listen", f"127.0.0.1:{proxy_port}",
         "--redis-url", settings.REDIS_URL],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(PAGE)
    (site / "novnc").symlink_to(NOVNC)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    with override_settings(FLEET_REDIS_PREFIX=prefix, VNC_PROXY_PUBLIC_URL=f"ws://127.0.0.1:{proxy_port}"):
        fleet.registry.cache_clear()
        try:
            yield {"page": f"http://127.0.0.1:{web.server_address[1]}/index.html"}
        finally:
            web.shutdown()
            for proc in (host, proxy):
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            fleet.registry().clear()
            fleet.registry.cache_clear()


def _pointer(lease: fleet.Lease) -> tuple[int, int]:
    """Where the X pointer is, read from the X server side (a screenshot of xdotool is overkill)."""
    out = fleet.env_call(lease=lease, op="pointer")
    return int(out["x"]), int(out["y"])


def test_novnc_in_chromium_through_the_token_proxy(stack: dict[str, str]) -> None:
    from playwright.sync_api import sync_playwright

    deadline = time.monotonic() + 60
    while fleet.registry().idle_count("desktop") < 1:
        assert time.monotonic() < deadline, "no desktop booted"
        time.sleep(0.2)
    lease = fleet.lease_acquire(kind="desktop", owner="test:novnc")
    fleet.env_call(lease=lease, op="reset", payload={"task": {"task_id": "t", "instruction": "watch", "kind": "desktop",
                                                              "source": "custom", "setup": {"apps": ["xterm"]}}})  # fmt: skip
    drive = fleet.vnc_token_mint(lease=lease, session_key="test:novnc", user_id=1, read_only=False)
    watch = fleet.vnc_token_mint(lease=lease, session_key="test:novnc", user_id=2, read_only=True)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"{stack['page']}?url={drive['url']}")
            page.wait_for_function("window.__state === 'connected'", timeout=20_000)
            page.wait_for_timeout(500)
            # The canvas shows the desktop: not one flat colour.
            colours = page.evaluate(
                """() => { const c = document.querySelector('#screen canvas');
                           const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                           const seen = new Set(); for (let i = 0; i < d.length; i += 4097) seen.add(d[i] << 16 | d[i+1] << 8 | d[i+2]);
                           return [c.width, c.height, seen.size]; }"""
            )
            assert colours[:2] == [1280, 800] and colours[2] > 1, colours
            page.mouse.move(300, 200)
            page.mouse.move(321, 234)
            page.wait_for_timeout(500)
            assert _pointer(lease) == (321, 234)

            watcher = browser.new_page(viewport={"width": 1280, "height": 800})
            watcher.goto(f"{stack['page']}?url={watch['url']}")
            watcher.wait_for_function("window.__state === 'connected'", timeout=20_000)
            # Even with noVNC's own view-only switch off, the proxy drops a watcher's input.
            watcher.evaluate("window.__rfb.viewOnly = false")
            watcher.mouse.move(700, 500)
            watcher.mouse.move(711, 522)
            watcher.wait_for_timeout(500)
            assert _pointer(lease) == (321, 234)
            page.screenshot(path=str(Path(os.environ.get("E2E_SHOTS", "/tmp")) / "novnc-desktop.png"))
        finally:
            browser.close()
    bad = f"{stack['page']}?url={drive['url'].rsplit('=', 1)[0]}=not-a-token"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(bad)
            page.wait_for_function("window.__state.startsWith('disconnected')", timeout=20_000)
        finally:
            browser.close()
    fleet.lease_release(lease_id=lease.lease_id)
