"""The window manager's configuration for one session: what its menus offer is what the task allows.

openbox runs inside the session's sandbox with `--config-file /etc/xdg/openbox/rc.xml`, where the
session's configuration directory is bound read-only: `openbox/rc.xml` (right-click on the desktop
shows the root menu; the one key binding that starts a program is Ctrl+Alt+T, another terminal, as on
OSWorld's Ubuntu, and only when the task offers the terminal) and a `menu.xml` written here whose
root menu lists only the task's apps. Whatever a menu entry or key starts runs in the sandbox with
openbox.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from xml.sax.saxutils import quoteattr

RC_XML = Path(__file__).with_name("openbox") / "rc.xml"
CONFIG_INSIDE = "/etc/xdg/openbox"
APP_LABELS = {
    "xterm": "Terminal",
    "chromium": "Web browser",
    "editor": "Text editor",
    "mousepad": "Text editor",
}


def write_config(conf_dir: Path) -> None:
    """rc.xml and an empty root menu; the directory is readable by the sandbox user."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    conf_dir.chmod(0o755)
    write_menu(conf_dir, [])


def write_menu(conf_dir: Path, entries: Iterable[tuple[str, Sequence[str]]]) -> None:
    """The root menu: one item per (app name, argv inside the sandbox); Ctrl+Alt+T opens another
    terminal when the terminal ('xterm') is one of them."""
    entries = list(entries)
    terminal = next((argv for name, argv in entries if name == "xterm"), None)
    rc = RC_XML.read_text()
    if terminal is not None:
        key = (
            '  <keybind key="C-A-t">\n'
            f'    <action name="Execute"><execute>{_escape(shlex.join(terminal))}</execute></action>\n'
            "  </keybind>\n"
        )
        rc = rc.replace("</keyboard>", key + "</keyboard>", 1)
    (conf_dir / "rc.xml").write_text(rc)
    (conf_dir / "rc.xml").chmod(0o644)
    items = "".join(
        f"  <item label={quoteattr(APP_LABELS.get(name, name))}>"
        f'<action name="Execute"><execute>{_escape(shlex.join(argv))}</execute></action></item>\n'
        for name, argv in entries
    )
    text = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<openbox_menu xmlns="http://openbox.org/">\n'
        f'<menu id="root-menu" label="Session">\n{items}</menu>\n</openbox_menu>\n'
    )
    path = conf_dir / "menu.xml"
    path.write_text(text)
    path.chmod(0o644)


def wm_argv() -> list[str]:
    return ["openbox", "--sm-disable", "--config-file", f"{CONFIG_INSIDE}/rc.xml"]


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
