"""Scripted solutions of our own OSWorld-format tasks (tests/envs/osworld_tasks/): the actions that
solve each through the environment, with the pauses a real application needs between them. The
suite (tests/envs/test_osworld_suite.py) and `bench osworld` play them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import openpyxl

from workers.actions.types import Action, Point

TASKS_DIR = Path(__file__).resolve().parents[3] / "tests" / "envs" / "osworld_tasks"

# task id -> [(action, pause in seconds after it)]
SOLUTIONS: dict[str, list[tuple[Action, float]]] = {
    "fw-calc-001-total": [
        (Action("wait"), 2.0),
        (Action("click", point=Point(70, 140)), 0.5),  # Calc's Name Box
        (Action("type", text="B5\n"), 0.5),
        (Action("type", text="=SUM(B2:B4)\n"), 0.5),
    ],
    "fw-os-101-settings-and-notes": [
        (Action("click", point=Point(200, 200)), 0.3),  # the terminal (top left)
        (Action("type", text="gsettings set org.gnome.desktop.interface text-scaling-factor 1.5\n"), 0.5),
        (Action("type", text="echo 'hello flywheel' > ~/notes.txt\n"), 0.5),
    ],
    "fw-chrome-201-open-tab": [
        (Action("hotkey", keys=("ctrl", "t")), 2.0),
        (Action("hotkey", keys=("ctrl", "l")), 0.5),  # the address bar
        (Action("type", text="file:///home/user/pages/todo.html"), 0.5),
        (Action("hotkey", keys=("enter",)), 2.0),
    ],
    # VLC writes its settings to ~/.config/vlc/vlcrc; the terminal (top left) sets the one asked for
    # once VLC has quit (it rewrites the file when it exits).
    "fw-vlc-401-recordings-folder": [
        (Action("hotkey", keys=("ctrl", "q")), 2.0),
        (Action("click", point=Point(200, 200)), 0.3),
        (
            Action(
                "type",
                text="pkill -x vlc; sleep 1; mkdir -p ~/.config/vlc; "
                "echo input-record-path=/home/user/Desktop >> ~/.config/vlc/vlcrc\n",
            ),
            3.0,
        ),
    ],
    # Infeasible: the right answer is to give up (OSWorld's FAIL, our call_user).
    "fw-gimp-301-infeasible": [(Action("call_user", text="GIMP cannot make 3D models"), 0.0)],
}


def _page(path: Path, title: str) -> Path:
    path.write_text(f"<!doctype html><title>{title}</title><h1>{title}</h1>\n")
    return path


def _png(path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (64, 48), (200, 120, 40)).save(path)


def _prices(path: Path, total: int | None) -> Path:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Sheet1"
    for row in [("Item", "Price"), ("apple", 10), ("pear", 20), ("plum", 30)]:
        sheet.append(row)
    if total is not None:
        sheet["B5"] = total
    book.save(path)
    return path


# task id -> writes the task's bundle (its files) into a directory
BUNDLES = {
    "fw-calc-001-total": lambda d: (_prices(d / "prices.xlsx", None), _prices(d / "prices_gold.xlsx", 60)),
    "fw-os-101-settings-and-notes": lambda d: (
        (d / "readme.txt").write_text("Notes go into ~/notes.txt\n"),
        (d / "notes_gold.txt").write_text("hello flywheel\n"),
    ),
    "fw-chrome-201-open-tab": lambda d: [
        _page(d / f"{name}.html", name) for name in ("notes-a", "notes-b", "scratch", "todo")
    ],
    "fw-gimp-301-infeasible": lambda d: _png(d / "photo.png"),
    "fw-vlc-401-recordings-folder": lambda d: None,
}


def load(task_id: str) -> dict[str, Any]:
    return json.loads((TASKS_DIR / f"{task_id}.json").read_text())


def solve(env: Any, task_id: str) -> None:
    for action, pause in SOLUTIONS[task_id]:
        if action.kind != "wait":
            env.step(action)
        time.sleep(pause)
