"""The session's accessibility tree as OSWorld's VM server gives it, for desktop-env's
`accessibility_tree` getter and the metrics that read it (`check_accessibility_tree`,
`check_left_panel`).

OSWorld's VM answers `/accessibility` with the desktop's AT-SPI tree as XML: one element per
accessible object, its tag the role name with hyphens (`page-tab-list`), `name` its name, its states
as `st:<state>="true"`, its object attributes as `attr:<key>`, position and size as `cp:screencoord`
/ `cp:size` for showing objects, its text as the element's text; the namespaces are desktop-env's
(`metrics.general._accessibility_ns_map["ubuntu"]`). Here the same tree is read inside the session's
sandbox: the session's own D-Bus starts AT-SPI's bus (`at-spi-bus-launcher`, Debian's at-spi2-core)
when the first application asks for it, the applications of the session register there, and the
sandbox's python3 walks them with pyatspi (Debian's python3-pyatspi). Nothing outside the session
is visible: the bus lives in the sandbox's /run/user/1000.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from workers.envs.osworld.common import MAX_READ_BYTES, CommandRunner, OSWorldError

PYATSPI = Path("/usr/lib/python3/dist-packages/pyatspi")
BUS_LAUNCHER = Path("/usr/libexec/at-spi-bus-launcher")
NAMESPACES = {  # desktop-env's "ubuntu" map (metrics.general._accessibility_ns_map)
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "txt": "https://accessibility.ubuntu.example.org/ns/text",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
}
# Chromium stands in for Google Chrome (`google-chrome` starts it): its application carries
# Chrome's name, which OSWorld's selectors use (`application[name=Google\\ Chrome]`).
APP_NAMES = {"Chromium": "Google Chrome"}
MAX_DEPTH = 50
MAX_WIDTH = 1024  # children read per object (a spreadsheet's table has millions of cells)
MAX_NODES = 30_000
TEXT_CHARS = 10_000

# Runs inside the sandbox with the system python3 (pyatspi + the standard library).
_DUMP = r"""
import json, sys, time
import xml.etree.ElementTree as ET
import pyatspi
args = json.loads(sys.argv[1])
NS = args["ns"]
for prefix, uri in NS.items():
    ET.register_namespace(prefix, uri)
count = 0
def node(acc, depth):
    global count
    count += 1
    attrib = {"name": acc.name or ""}
    try:
        states = acc.getState().getStates()
    except Exception:
        states = []
    for st in states:
        name = str(pyatspi.StateType(st)).split("_", 1)[-1].lower()  # STATE_MULTI_LINE -> multi_line
        if name:
            attrib["{%s}%s" % (NS["st"], name)] = "true"
    try:
        for key, value in acc.get_attributes().items():
            if key:
                attrib["{%s}%s" % (NS["attr"], key)] = str(value)
    except Exception:
        pass
    st_ns = "{%s}" % NS["st"]
    if attrib.get(st_ns + "visible") == "true" and attrib.get(st_ns + "showing") == "true":
        try:
            x, y, w, h = acc.queryComponent().getExtents(pyatspi.XY_SCREEN)
            attrib["{%s}screencoord" % NS["cp"]] = str((x, y))
            attrib["{%s}size" % NS["cp"]] = str((w, h))
        except Exception:
            pass
    text = ""
    try:
        t = acc.queryText()
        text = t.getText(0, min(t.characterCount, args["text_chars"]))
        text = text.replace("\ufffc", "").replace("\ufffd", "")
    except Exception:
        pass
    try:
        v = acc.queryValue()
        attrib["{%s}value" % NS["val"]] = str(v.currentValue)
    except Exception:
        pass
    role = (acc.getRoleName() or "unknown").strip().replace(" ", "-") or "unknown"
    element = ET.Element(role, attrib)
    if text:
        element.text = text
    if depth < args["max_depth"]:
        for i in range(min(acc.childCount, args["max_width"])):
            if count >= args["max_nodes"]:
                break
            try:
                child = acc.getChildAtIndex(i)
            except Exception:
                continue
            if child is not None:
                element.append(node(child, depth + 1))
    return element
desktop = pyatspi.Registry.getDesktop(0)
root = ET.Element("desktop-frame", {"name": desktop.name or "main"})
for i in range(desktop.childCount):
    app = desktop.getChildAtIndex(i)
    if app is not None:
        element = node(app, 1)
        element.set("name", args["app_names"].get(element.get("name"), element.get("name")))
        root.append(element)
sys.stdout.write(ET.tostring(root, encoding="unicode"))
"""


def unavailable() -> str | None:
    """Why the accessibility tree cannot be read here, or None."""
    if not PYATSPI.is_dir():
        return "the accessibility tree needs python3-pyatspi (make osworld-apps)"
    if not BUS_LAUNCHER.exists() or shutil.which("dbus-daemon") is None:
        return "the accessibility tree needs at-spi2-core and dbus-daemon (make osworld-apps)"
    return None


def accessibility_tree(runner: CommandRunner) -> str:
    """The session's AT-SPI tree as OSWorld's XML (desktop-frame > application > ...)."""
    problem = unavailable()
    if problem:
        raise OSWorldError(problem)
    args: dict[str, Any] = {
        "ns": NAMESPACES,
        "max_depth": MAX_DEPTH,
        "max_width": MAX_WIDTH,
        "max_nodes": MAX_NODES,
        "text_chars": TEXT_CHARS,
        "app_names": APP_NAMES,
    }
    result = runner.run_command(
        ["/usr/bin/python3", "-c", _DUMP, json.dumps(args)],
        timeout_s=60.0,
        separate_stderr=True,
        max_output=MAX_READ_BYTES,
    )
    if not result.ok:
        if result.timed_out:
            raise OSWorldError("accessibility tree: reading it took over 60 s")
        detail = (result.stderr or "no output").strip().splitlines()[-1:] or ["no output"]
        raise OSWorldError(f"accessibility tree: {detail[0][:300]} (exit {result.returncode})")
    return result.output
