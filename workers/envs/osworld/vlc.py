"""OSWorld's `vlc_playing_info` getter on a session: VLC's web interface inside the sandbox.

OSWorld's VM runs VLC with its web interface on (`extraintf=http`, password `password`, port 8080)
and desktop-env's `get_vlc_playing_info` fetches `/requests/status.xml` over the VM's network into
`cache_dir/dest`, which its `is_vlc_playing` metric parses. Here VLC gets the same settings from
its profile (`setup._VLC_PROFILE`), and the request is made inside the session's sandbox by the
sandbox's own python3: the port listens on the sandbox's loopback, which nothing outside reaches.
The answer is written where OSWorld's getter writes it.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from workers.envs.osworld.common import CommandRunner, OSWorldError

VLC_PORT = 8080  # OSWorld's `vlc_port`
VLC_PASSWORD = "password"  # OSWorld's getter's

# Runs inside the sandbox (python3 stdlib only): the status as base64, or exit with the reason.
_STATUS = r"""
import base64, json, sys, urllib.request
args = json.loads(sys.argv[1])
req = urllib.request.Request(f"http://127.0.0.1:{args['port']}/requests/status.xml")
req.add_header("Authorization", "Basic " + base64.b64encode(b":" + args["password"].encode()).decode())
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        sys.stdout.write(base64.b64encode(r.read()).decode())
except OSError as exc:
    sys.exit(f"VLC's web interface did not answer on port {args['port']}: {exc}")
"""


def playing_info(runner: CommandRunner, config: dict[str, Any], cache_dir: Path) -> str:
    """OSWorld's `get_vlc_playing_info`: VLC's status.xml saved as `cache_dir/<dest>`; its path."""
    dest = Path(str(config.get("dest") or "status.xml")).name
    result = runner.run_command(
        ["/usr/bin/python3", "-c", _STATUS, json.dumps({"port": VLC_PORT, "password": VLC_PASSWORD})],
        timeout_s=20.0,
        separate_stderr=True,
    )
    if not result.ok:
        detail = (result.stderr or result.output).strip().splitlines()[-1:] or ["no output"]
        raise OSWorldError(f"vlc_playing_info: {detail[0][:300]}")
    path = cache_dir / dest
    path.write_bytes(base64.b64decode(result.output.strip()))
    return str(path)
