"""The fast path of the streamed export: PostgreSQL builds each trajectory's JSON line itself.

Decoding JSONB into Python and encoding it again dominates the cost of the Python path
(`records.iter_trajectory_records`); here the database emits finished lines through a server-side
cursor and Python only joins them. Used when screenshot URLs are a plain prefix + file name
(filesystem storage); tests check that both paths produce the same records.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db import connection
from django.db.models import QuerySet

from webapp.store.export.records import json_line
from webapp.store.models import Trajectory

_STEP_FIELDS = [
    "index", "clock_start", "clock_end", "observation_refs", "raw_text", "thought", "action_text",
    "action", "parse_error", "coord_convention", "model_image_width", "model_image_height",
    "screen_width", "screen_height", "executed_points", "candidates", "decision", "decision_index",
    "decision_meta", "policy_version", "human_thought_verbatim", "human_thought_refined", "human_words",
    "reward", "done", "rl",
]  # fmt: skip

# A float column as a JSON number that always reads back as a float (PostgreSQL writes 1.0 as `1`,
# which json.loads turns into an int): whole values get ".0"; NaN and infinities (not JSON) are null.
_FLOAT = """(CASE WHEN {0} IS NULL OR {0} IN ('NaN', 'Infinity', '-Infinity') THEN 'null'
      WHEN {0} = trunc({0}) AND abs({0}) < 1e15 THEN trunc({0})::bigint::text || '.0'
      ELSE {0}::text END)::json"""

# UTC with exactly 6 fractional digits, as webapp.timestamps.iso_utc writes it.
_ISO = """to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')"""

_TRAJ_FIELDS = {
    "id": "t.id", "task_id": "t.task_id", "task": "k.external_id", "pool": "p.name",
    "instruction": "COALESCE(NULLIF(t.instruction, ''), k.instruction)", "task_instruction": "k.instruction",
    "task_source": "k.source", "env_kind": "t.env_kind",
    "source": "t.source", "policy_version": "t.policy_version", "checkpoint": "c.version",
    "annotator": "u.username", "run": "t.run_id", "status": "t.status", "final_reward": _FLOAT.format("t.final_reward"),
    "validation": "t.validation", "validator": "t.validator", "route": "t.route",
    "review_state": "t.review_state", "review_round": "t.review_round",
    "final_screenshot": "CASE WHEN t.final_screenshot = '' THEN NULL ELSE %s || t.final_screenshot END",
    "created_at": _ISO.format("t.created_at"), "finished_at": _ISO.format("t.finished_at"),
    "metadata": "t.metadata",
}  # fmt: skip


def _step_object() -> str:
    pairs = [
        f"'{name}', " + (_FLOAT.format(f"s.{name}") if name == "reward" else f"s.{name}")
        for name in _STEP_FIELDS
    ]
    pairs.insert(3, "'screenshot', CASE WHEN s.screenshot = '' THEN NULL ELSE %s || s.screenshot END")
    pairs.insert(1, f"'created_at', {_ISO.format('s.created_at')}")
    return "json_build_object(" + ", ".join(pairs) + ")"


_SQL = """
    SELECT json_build_object({traj}, 'steps', COALESCE(
        (SELECT json_agg({step} ORDER BY s.index)
           FROM store_step s WHERE s.trajectory_id = t.id), '[]'::json))::text
      FROM store_trajectory t
      JOIN store_task k ON k.id = t.task_id
      JOIN store_taskpool p ON p.id = k.pool_id
      LEFT JOIN store_checkpoint c ON c.id = t.checkpoint_id
      LEFT JOIN auth_user u ON u.id = t.annotator_id
     WHERE t.id = ANY(%s)
     ORDER BY t.id
"""


def _batch_sql() -> str:
    traj = ", ".join(f"'{name}', {expr}" for name, expr in _TRAJ_FIELDS.items())
    return _SQL.replace("{traj}", traj).replace("{step}", _step_object())


def iter_jsonl_chunks_sql(
    queryset: QuerySet[Trajectory], *, media_base: str, batch: int = 500
) -> Iterator[bytes]:
    """Bytes chunks of whole JSON lines, `batch` trajectories at a time.

    Keyset batches (next ids after the last one, by the primary key index) keep the first byte fast
    and memory bounded by one batch: a single ORDER BY over the whole export would make PostgreSQL
    build and sort every line before sending the first. No long transaction or cursor is held.
    """
    sql = _batch_sql()
    ids_qs = queryset.order_by("id").values_list("id", flat=True)
    last_id = 0
    with connection.cursor() as cursor:
        while True:
            ids = list(ids_qs.filter(id__gt=last_id)[:batch])
            if not ids:
                return
            cursor.execute(sql, [media_base, media_base, ids])  # final screenshot, step screenshots
            yield ("\n".join(json_line(row[0]) for row in cursor.fetchall()) + "\n").encode()
            last_id = ids[-1]
