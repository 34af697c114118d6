"""Turn trajectories and their steps into plain records, one trajectory at a time, in constant memory.

One query joins trajectories to their steps (LEFT JOIN, so step-less trajectories appear too) and is
read through a server-side cursor; rows are grouped by trajectory as they arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from django.db.models import QuerySet

from webapp.store.models import Trajectory
from webapp.timestamps import iso_utc

TRAJECTORY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "id"),
    ("task_id", "task_id"),
    ("task", "task__external_id"),
    ("pool", "task__pool__name"),
    ("instruction", "instruction"),
    ("task_instruction", "task__instruction"),
    ("task_source", "task__source"),
    ("env_kind", "env_kind"),
    ("source", "source"),
    ("policy_version", "policy_version"),
    ("checkpoint", "checkpoint__version"),
    ("annotator", "annotator__username"),
    ("run", "run_id"),
    ("status", "status"),
    ("final_reward", "final_reward"),
    ("validation", "validation"),
    ("validator", "validator"),
    ("route", "route"),
    ("review_state", "review_state"),
    ("review_round", "review_round"),
    ("final_screenshot", "final_screenshot"),
    ("created_at", "created_at"),
    ("finished_at", "finished_at"),
    ("metadata", "metadata"),
)

STEP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("index", "steps__index"),
    ("created_at", "steps__created_at"),
    ("clock_start", "steps__clock_start"),
    ("clock_end", "steps__clock_end"),
    ("screenshot", "steps__screenshot"),
    ("observation_refs", "steps__observation_refs"),
    ("raw_text", "steps__raw_text"),
    ("thought", "steps__thought"),
    ("action_text", "steps__action_text"),
    ("action", "steps__action"),
    ("parse_error", "steps__parse_error"),
    ("coord_convention", "steps__coord_convention"),
    ("model_image_width", "steps__model_image_width"),
    ("model_image_height", "steps__model_image_height"),
    ("screen_width", "steps__screen_width"),
    ("screen_height", "steps__screen_height"),
    ("executed_points", "steps__executed_points"),
    ("candidates", "steps__candidates"),
    ("decision", "steps__decision"),
    ("decision_index", "steps__decision_index"),
    ("decision_meta", "steps__decision_meta"),
    ("policy_version", "steps__policy_version"),
    ("human_thought_verbatim", "steps__human_thought_verbatim"),
    ("human_thought_refined", "steps__human_thought_refined"),
    ("human_words", "steps__human_words"),
    ("reward", "steps__reward"),
    ("done", "steps__done"),
    ("rl", "steps__rl"),
)

_N_TRAJ = len(TRAJECTORY_COLUMNS)

_TRAJ_KEYS = [name for name, _ in TRAJECTORY_COLUMNS]
_STEP_KEYS = [name for name, _ in STEP_COLUMNS]
_SCREENSHOT_AT = _STEP_KEYS.index("screenshot")

# Characters JSON leaves raw inside strings that readers splitting text into lines at every Unicode
# line boundary (Python's str.splitlines, some JSONL tools) take for the end of a line.
_LINE_BREAKERS = ("\u2028", "\u2029", "\x85")


def json_line(text: str) -> str:
    """One serialised JSON value made safe as a JSONL line: U+2028, U+2029 and U+0085 written as
    their `\\uXXXX` escapes (the same JSON value; JSON's own escaping leaves them raw)."""
    for char in _LINE_BREAKERS:
        if char in text:
            text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def iter_trajectory_records(
    queryset: QuerySet[Trajectory],
    *,
    media_ref: Callable[[str], str],
    chunk_size: int = 2000,
) -> Iterator[dict[str, Any]]:
    """Yield one dict per trajectory: its fields plus `steps` (ordered by index).

    `media_ref` turns a stored file name into what the record carries (a URL for streamed export,
    an archive path for archives). Memory is bounded by the longest trajectory, not the export size.
    """
    rows = (
        queryset.order_by("id", "steps__index")
        .values_list(*[c for _, c in TRAJECTORY_COLUMNS], *[c for _, c in STEP_COLUMNS])
        .iterator(chunk_size=chunk_size)
    )
    current: dict[str, Any] | None = None
    for row in rows:
        if current is None or current["id"] != row[0]:
            if current is not None:
                yield current
            current = dict(zip(_TRAJ_KEYS, row[:_N_TRAJ], strict=True))
            # The episode's own instruction; the task's text only when the environment gave none.
            current["instruction"] = current["instruction"] or current["task_instruction"]
            current["created_at"] = iso_utc(current["created_at"])
            current["finished_at"] = iso_utc(current["finished_at"])
            final = current["final_screenshot"]
            current["final_screenshot"] = media_ref(final) if final else None
            current["steps"] = []
        if row[_N_TRAJ] is None:  # LEFT JOIN row of a trajectory without steps
            continue
        step = dict(zip(_STEP_KEYS, row[_N_TRAJ:], strict=True))
        step["created_at"] = iso_utc(step["created_at"])
        shot = step["screenshot"]
        step["screenshot"] = media_ref(shot) if shot else None
        current["steps"].append(step)
    if current is not None:
        yield current
