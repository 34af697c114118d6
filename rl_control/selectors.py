"""Reads for RL runs: who sees which runs, downsampled metric series, alerts, episodes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from django.db import connection
from django.db.models import Count, F, Max, OuterRef, QuerySet, Subquery

from rl_control.models import Run, RunAlert
from rl_control.presets import PRESETS, preset_list, preset_overrides
from webapp.accounts.roles import Role, has_role
from webapp.store.models import Checkpoint, Trajectory
from workers.rl.stats import downsample_minmax

# x axis name → RunMetric column
X_AXES: dict[str, str] = {"step": "step", "version": "policy_version", "samples": "samples", "wall": "wall"}
MAX_POINTS = 10_000


def runs_visible_to(user: Any) -> QuerySet[Run]:
    """Researchers and admins see every run; other roles none."""
    if not has_role(user, Role.RESEARCHER, Role.ADMIN):
        return Run.objects.none()
    return Run.objects.select_related("created_by", "pool", "parent", "start_checkpoint")


def runs_with_alerts(qs: QuerySet[Run]) -> QuerySet[Run]:
    """`qs` annotated with alert_count, last_alert_kind and last_alert_step (for the run list)."""
    last = RunAlert.objects.filter(run=OuterRef("pk")).order_by("-step", "-id")
    return qs.annotate(
        alert_count=Count("alerts", distinct=True),
        last_alert_kind=Subquery(last.values("kind")[:1]),
        last_alert_step=Subquery(last.values("step")[:1]),
    ).order_by("-created_at", "-id")


def run_get_for_user(*, user: Any, run_id: int) -> Run | None:
    return runs_visible_to(user).filter(pk=run_id).first()


@contextmanager
def binary_cursor() -> Iterator[psycopg.Cursor]:
    """A server-binding psycopg cursor on Django's connection: same transaction, binary results."""
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        yield cursor


# column → (PostgreSQL send function, numpy dtype of what it sends)
_SEND: dict[str, tuple[str, str]] = {
    "id": ("int8send", ">i8"),
    "step": ("int4send", ">i4"),
    "policy_version": ("int4send", ">i4"),
    "samples": ("int8send", ">i8"),
    "wall": ("float8send", ">f8"),
    "value": ("float8send", ">f8"),
}


def metric_columns(
    cursor: Any,
    *,
    run_id: int,
    name: str,
    columns: list[str],
    after: tuple[int, int] | None = None,
    max_step: int | None = None,
    limit: int | None = None,
) -> dict[str, np.ndarray]:
    """Raw `RunMetric` columns of one series in (step, id) order, optionally after a (step, id)
    bound, up to a step, and at most `limit` rows.

    `cursor` is a server-binding psycopg 3 cursor (binary results; Django's own cursors bind on the
    client and get text, which doubles the bytes and the time). Each column comes back as one bytea
    of packed big-endian values that numpy reads in place: one row instead of a million (fetching
    rows, or COPY, which libpq hands over row by row, is several times slower). The rows come from
    an index-only scan of `runmetric_series`, already in (step, id) order, and PostgreSQL feeds a
    plain aggregate over an ordered subquery in that order.
    """
    where, params = ["m.run_id = %s", "m.name = %s"], [run_id, name]
    if after is not None:
        where.append("(m.step, m.id) > (%s, %s)")
        params += list(after)
    if max_step is not None:
        where.append("m.step <= %s")
        params.append(max_step)
    cols = ", ".join(f"m.{c}" for c in columns)  # names from _SEND only, never the client's
    aggs = ", ".join(f"string_agg({_SEND[c][0]}(s.{c}), '')" for c in columns)
    sql = (
        f"SELECT count(*), {aggs} FROM (SELECT {cols} FROM rl_control_runmetric m"
        f" WHERE {' AND '.join(where)} ORDER BY m.step, m.id{' LIMIT %s' if limit else ''}) AS s"
    )
    if limit:
        params.append(limit)
    cursor.execute(sql, params, binary=True)
    count, *blobs = cursor.fetchone()
    out = {c: np.frombuffer(b or b"", dtype=_SEND[c][1]) for c, b in zip(columns, blobs, strict=True)}
    if any(a.size != count for a in out.values()):
        raise RuntimeError(f"series {name!r} of run {run_id}: {count} rows but columns of other lengths")
    return out


def metric_points(cursor: Any, *, run_id: int, name: str, x: str) -> tuple[np.ndarray, np.ndarray]:
    """All points of one series as float64 arrays (x, y) in (step, id) order: the packed blocks
    (`RunMetricBlock`), then the rows recorded after the last block. See `metric_columns`."""
    column = X_AXES[x]
    cursor.execute(
        f"SELECT last_step, last_id, {column}, value FROM rl_control_runmetricblock"  # column from X_AXES
        " WHERE run_id = %s AND name = %s ORDER BY last_step, last_id",
        (run_id, name),
        binary=True,
    )
    blocks = cursor.fetchall()
    after = (blocks[-1][0], blocks[-1][1]) if blocks else None
    tail = metric_columns(cursor, run_id=run_id, name=name, columns=[column, "value"], after=after)
    xs = np.concatenate(
        [*(np.frombuffer(b[2], dtype="<f8") for b in blocks), tail[column].astype(np.float64)]
    )
    ys = np.concatenate(
        [*(np.frombuffer(b[3], dtype="<f8") for b in blocks), tail["value"].astype(np.float64)]
    )
    return xs, ys


def series_downsample(xs: np.ndarray, ys: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most `points` points keeping each bucket's first, last, lowest and highest (deterministic).

    Points are put in x order first (stable) because wall time or versions may repeat or, after a
    resume from an older checkpoint, step back.
    """
    if xs.size and np.any(np.diff(xs) < 0):
        order = np.argsort(xs, kind="stable")
        xs, ys = xs[order], ys[order]
    return downsample_minmax(xs, ys, max(1, points // 4))


def metric_series(*, run_id: int, names: list[str], x: str = "step", points: int = 1000) -> dict[str, Any]:
    """{"run_id", "x", "points", "series": [{name, x: [...], y: [...], total, last}]}.

    The same function serves live and finished runs, so a chart looks the same either way.
    """
    series = []
    with binary_cursor() as cursor:
        for name in names:
            xs, ys = metric_points(cursor, run_id=run_id, name=name, x=x)
            dx, dy = series_downsample(xs, ys, points)
            series.append(
                {
                    "name": name,
                    "x": dx.tolist(),
                    "y": dy.tolist(),
                    "total": int(xs.size),
                    "last": {"x": float(xs[-1]), "y": float(ys[-1])} if xs.size else None,
                }
            )
    return {"run_id": run_id, "x": x, "points": points, "series": series}


_NAMES_CTE = (
    "WITH RECURSIVE names AS ("
    " SELECT min(name) AS name FROM rl_control_runmetric WHERE run_id = %(run)s"
    " UNION ALL SELECT (SELECT min(m.name) FROM rl_control_runmetric m WHERE m.run_id = %(run)s AND m.name > n.name)"
    " FROM names n WHERE n.name IS NOT NULL)"
)


def run_metric_names(*, run_id: int) -> list[str]:
    """Names recorded for the run, sorted. A loose index scan (one index probe per name) instead
    of DISTINCT, which would read every one of possibly millions of rows."""
    with connection.cursor() as cursor:
        cursor.execute(_NAMES_CTE + " SELECT name FROM names WHERE name IS NOT NULL", {"run": run_id})
        return [row[0] for row in cursor.fetchall()]


def run_latest_metrics(*, run_id: int) -> dict[str, dict[str, float]]:
    """{name: {"step", "value"}}: the newest point of every series of the run (two index probes each)."""
    sql = _NAMES_CTE + (
        " SELECT n.name, l.step, l.value FROM names n CROSS JOIN LATERAL ("
        "  SELECT m.step, m.value FROM rl_control_runmetric m WHERE m.run_id = %(run)s AND m.name = n.name"
        "  ORDER BY m.step DESC, m.id DESC LIMIT 1) l"
        " WHERE n.name IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"run": run_id})
        return {name: {"step": step, "value": value} for name, step, value in cursor.fetchall()}


def run_alerts(*, run_id: int) -> QuerySet[RunAlert]:
    return RunAlert.objects.filter(run_id=run_id)


def run_episodes(*, run_id: int) -> QuerySet[Trajectory]:
    """The run's episodes (RL trajectories), newest first."""
    return Trajectory.objects.filter(run_id=run_id).select_related("task").order_by("-id")


# ----------------------------------------------------------------------------- episodes, replay

EPISODE_PICKS = ("latest", "best", "worst", "step_reward")


def run_episodes_pick(
    *, run_id: int, which: str = "latest", task: str = "", limit: int = 50
) -> QuerySet[Trajectory]:
    """Episodes to replay: the latest, the best or worst by final reward, or those holding the
    highest single step reward (`step_reward`), optionally of one task (its external id)."""
    qs = run_episodes(run_id=run_id)
    if task:
        qs = qs.filter(task__external_id=task)
    if which == "best":
        qs = qs.filter(final_reward__isnull=False).order_by("-final_reward", "-id")
    elif which == "worst":
        qs = qs.filter(final_reward__isnull=False).order_by("final_reward", "-id")
    elif which == "step_reward":
        qs = qs.annotate(best_step_reward=Max("steps__reward")).order_by(
            F("best_step_reward").desc(nulls_last=True), "-id"
        )
    return qs[:limit]


def trajectory_for_replay(*, user: Any, trajectory_id: int) -> Trajectory | None:
    """Any trajectory (an RL episode or an annotation) for researchers and admins."""
    if not has_role(user, Role.RESEARCHER, Role.ADMIN):
        return None
    return Trajectory.objects.select_related("task", "run", "annotator").filter(pk=trajectory_id).first()


RL_STEP_FIELDS = ("value", "advantage", "lambda", "ratio", "clipped", "kept")


def step_rl_figures(rl: dict[str, Any]) -> dict[str, Any]:
    """The per-step RL figures of `Step.rl` for display: value, advantage, λ used (the trainer
    writes `lambda_policy`), importance ratio, clip flag, kept by the entropy filter, and the number
    of generated tokens. The token ids, log-probs and page elements stored with them are left out."""
    out = {k: rl.get(k) for k in RL_STEP_FIELDS}
    if out["lambda"] is None:
        out["lambda"] = rl.get("lambda_policy")
    if isinstance(rl.get("token_ids"), list):
        out["tokens"] = len(rl["token_ids"])
    return out


def trajectory_replay(*, trajectory: Trajectory) -> dict[str, Any]:
    """What the replay page shows: the episode and, per step, the screenshot, the executed actions in
    screen pixels (for drawing), the thought, the reward and the RL figures stored on the step
    (`Step.rl`: value, advantage, λ used, importance ratio, clip flag) with its policy version."""
    from annotation.review.selectors import step_screen_actions

    steps = []
    for step in trajectory.steps.order_by("index"):
        rl = step.rl or {}
        steps.append(
            {
                "index": step.index,
                "thought": step.thought,
                "action_text": step.action_text,
                "parse_error": step.parse_error,
                "screen_actions": step_screen_actions(step),
                "screenshot_url": step.screenshot.url if step.screenshot else "",
                "screen_width": step.screen_width,
                "screen_height": step.screen_height,
                "reward": step.reward,
                "done": step.done,
                "policy_version": step.policy_version,
                "rl": step_rl_figures(rl),
            }
        )
    return {
        "id": trajectory.pk,
        "task": trajectory.task.external_id,
        "instruction": trajectory.episode_instruction,
        "source": trajectory.source,
        "env_kind": trajectory.env_kind,
        "status": trajectory.status,
        "final_reward": trajectory.final_reward,
        "validation": trajectory.validation,
        "policy_version": trajectory.policy_version,
        "run_id": trajectory.run_id,
        "annotator": trajectory.annotator.username if trajectory.annotator else "",
        "num_steps": trajectory.num_steps,
        "created_at": trajectory.created_at,
        "judge": _judge_verdict(trajectory),
        "steps": steps,
    }


def _judge_verdict(trajectory: Trajectory) -> dict[str, Any] | None:
    """The LLM judge's verdict on the episode: as the RL reward (metadata.engine.judge, from
    rl_control.engine.judging) or as V(s) (metadata.judge, from the flywheel's validation)."""
    meta = trajectory.metadata or {}
    rl = (meta.get("engine") or {}).get("judge")
    if isinstance(rl, dict):
        return {"role": "reward", "success": bool(rl.get("success")), "reason": str(rl.get("reason") or ""),
                "correct_steps": rl.get("correct_steps"), "model": str(rl.get("model") or ""),
                "raw": str(rl.get("raw") or ""), "env_reward": rl.get("env_reward")}  # fmt: skip
    vs = meta.get("judge")
    if isinstance(vs, dict):
        return {"role": "validation", "success": vs.get("value") == 1, "reason": "",
                "correct_steps": vs.get("correct_prefix"), "model": (trajectory.validator or "").removeprefix("judge:"),
                "raw": str(vs.get("reply") or ""), "env_reward": trajectory.final_reward}  # fmt: skip
    return None


# ------------------------------------------------------------------------------------ compare


def config_flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """{"section.field": value} of a nested config (lists stay values)."""
    if not isinstance(config, dict):
        return {prefix: config}
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(config_flatten(value, name))
        else:
            out[name] = value
    return out


def runs_config_diff(runs: list[Run]) -> list[dict[str, Any]]:
    """Rows {"key", "values": [one per run]} for every setting that is not the same in all runs
    (algorithm and mode included); a setting a run lacks shows as None."""
    flat = [
        {"algorithm": r.algorithm, "mode": r.mode, "preset": r.preset, **config_flatten(r.config)}
        for r in runs
    ]
    keys = sorted(set().union(*flat)) if flat else []
    rows = []
    for key in keys:
        values = [f.get(key) for f in flat]
        if any(v != values[0] for v in values[1:]):
            rows.append({"key": key, "values": values})
    return rows


# -------------------------------------------------------------------------------------- export


def metric_rows(*, run_id: int, chunk: int = 20_000) -> Iterator[tuple[str, int, int, int, float, float]]:
    """Every stored point of the run as (name, step, policy_version, samples, wall, value), in
    (name, step, id) order, read in chunks (keyset pagination on the series index)."""
    after: tuple[str, int, int] = ("", -1, -1)
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT name, step, id, policy_version, samples, wall, value FROM rl_control_runmetric"
                " WHERE run_id = %s AND (name, step, id) > (%s, %s, %s) ORDER BY name, step, id LIMIT %s",
                [run_id, *after, chunk],
            )
            rows = cursor.fetchall()
        if not rows:
            return
        for name, step, _id, version, samples, wall, value in rows:
            yield name, step, version, samples, wall, value
        last = rows[-1]
        after = (last[0], last[1], last[2])


def start_profile(checkpoint: Checkpoint | None, endpoints: str = "") -> str:
    """What kind of model a run starts from (rl_control.presets.START_PROFILES): "endpoint" when it
    samples from external servers, "hf_vlm" for a Hugging Face vision-language checkpoint, else
    "embedded" (an embedded checkpoint, or the fresh model a run without one starts from)."""
    from rl_control.engine.preflight import checkpoint_kind_of
    from webapp.store.checkpoints import checkpoint_dir

    if endpoints.strip() or (checkpoint is not None and checkpoint.endpoint_url):
        return "endpoint"
    if checkpoint is not None and checkpoint_kind_of(checkpoint_dir(checkpoint)) == "hf_vlm":
        return "hf_vlm"
    return "embedded"


def preset_list_for_host(checkpoint: Checkpoint | None = None) -> list[dict[str, Any]]:
    """The presets as the launch form shows them for a run starting from `checkpoint` (None: the
    checkpoint promoted to RL start, else a fresh embedded model): each preset's defaults for that
    model (presets.preset_overrides), with this deployment's environments in parallel (unless the
    preset names its own), its note saying where the number comes from."""
    from rl_control.engine.preflight import host_parallel_envs
    from webapp.flywheel.selectors import rl_start_checkpoint

    profile = start_profile(checkpoint or rl_start_checkpoint())
    out = preset_list(profile)
    for preset in out:
        fitted = preset_overrides(preset["name"], profile).get("env", {})
        if "parallel_envs" in fitted:  # the preset, or its fit to this start model, names its own
            if "parallel_envs" not in PRESETS[preset["name"]].overrides.get("env", {}):
                preset["notes"]["env.parallel_envs"] = (
                    f"default {fitted['parallel_envs']}: fitted to this start model (one per rollout process)"
                )
            continue
        n, why = host_parallel_envs(preset["config"]["env"]["kind"])
        preset["config"]["env"]["parallel_envs"] = n
        preset["notes"]["env.parallel_envs"] = why
    return out


def last_run_summary() -> dict[str, Any] | None:
    """The flywheel page's last RL run (webapp.flywheel.selectors.flywheel_overview)."""
    last_run = Run.objects.order_by("-created_at").first()
    if last_run is None:
        return None
    return {
        "id": last_run.pk,
        "name": last_run.name,
        "status": last_run.status,
        "episodes_done": getattr(last_run, "episodes_done", None),
        "updates_done": getattr(last_run, "updates_done", None),
    }
