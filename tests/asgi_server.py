"""The ASGI app (websockets included) under a real uvicorn on the test database: the e2e tests and
the connection-pool tests start one the same way."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

SERVE = (
    "import sys, uvicorn\n"
    "from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler\n"
    "from project.asgi import application\n"
    "uvicorn.run(ASGIStaticFilesHandler(application), host='127.0.0.1', port=int(sys.argv[1]), log_level='warning')\n"
)


@contextmanager
def serve_asgi(extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """The ASGI app under uvicorn on the test database, with static files served from the finders
    (frontend/dist) as `runserver` would; yields its base URL, stops it after."""
    from tests.env_host import _kill
    from tests.service_urls import subprocess_database_url

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings.test",
        "DATABASE_URL": subprocess_database_url(),
        **(extra_env or {}),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(port)], env=env, cwd=settings.BASE_DIR, start_new_session=True
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None, "uvicorn exited"
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        _kill(proc)
