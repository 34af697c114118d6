"""OSWorld task JSON (SPEC §5) → task records.

Shape (xlang-ai/OSWorld `evaluation_examples/examples/<domain>/<id>.json`):
`id, snapshot, instruction, source, config: [{type, parameters}], related_apps,
evaluator: {func, result, expected, options, conj, postconfig}`. `func` is one metric name or a
list; with a list, `result` / `expected` / `options` are lists of the same length (`expected`
entries may be null) and `conj` is "and" (default) or "or". `func: "infeasible"` needs no result.

Environment kind: every OSWorld task imports as `desktop`, including shell-only `os` tasks. Their
instructions assume a graphical session (many `os` configs click the screen with pyautogui, and
results are read from the desktop's shell by `vm_command_line`), and the terminal environment is
a confined tool-use sandbox without a screen, so `terminal` would silently change the task.

Stored as `setup = {"osworld": config, "snapshot", "related_apps", "source_url"}` and
`verifier = {"osworld": evaluator}`. What the local desktop cannot run is decided by
`workers.envs.osworld.check_supported(task_json)`; such tasks import disabled, with the reasons.

Difficulty inputs (seed 000 §2.4.1) are estimates an admin refines: 10 expected steps, one
prerequisite per setup step, cross-page when more than one application (besides "os") is involved.
"""

from __future__ import annotations

import json
from typing import Any

from webapp.store.importers.types import ImportIssue, SourceFile, TaskRecord
from webapp.store.models import Task
from workers.json_input import json_loads

OSWORLD_DEFAULT_STEPS = 10


def check_supported(task: dict[str, Any]) -> list[str]:
    """Reasons the local desktop cannot run `task` ([] = supported), from the env's own checker
    (imported lazily: the desktop env module is only needed when OSWorld tasks are imported)."""
    from workers.envs.osworld import check_supported as env_check_supported

    return list(env_check_supported(task))


def _setup_steps(value: Any, where: str, issues: list[ImportIssue], origin: str) -> None:
    if not isinstance(value, list):
        issues.append(
            ImportIssue(origin, where, f"must be a list of {{type, parameters}}, got {type(value).__name__}")
        )
        return
    for i, step in enumerate(value):
        field = f"{where}[{i}]"
        if not isinstance(step, dict):
            issues.append(ImportIssue(origin, field, "must be an object with type and parameters"))
            continue
        if not isinstance(step.get("type"), str) or not step.get("type"):
            issues.append(
                ImportIssue(
                    origin, f"{field}.type", "missing" if "type" not in step else "must be a non-empty string"
                )
            )
        if "parameters" in step and not isinstance(step["parameters"], dict):
            issues.append(ImportIssue(origin, f"{field}.parameters", "must be an object"))


def _evaluator(value: Any, issues: list[ImportIssue], origin: str) -> None:
    if not isinstance(value, dict):
        issues.append(ImportIssue(origin, "evaluator", "missing" if value is None else "must be an object"))
        return
    func = value.get("func")
    if func is None:
        issues.append(ImportIssue(origin, "evaluator.func", "missing"))
        return
    if isinstance(func, list):
        if not func or not all(isinstance(f, str) and f for f in func):
            issues.append(
                ImportIssue(origin, "evaluator.func", "a list of metrics must hold non-empty names")
            )
            return
        for key in ("result", "expected", "options"):
            if key in value and value[key] is not None:
                if not isinstance(value[key], list) or len(value[key]) != len(func):
                    issues.append(
                        ImportIssue(
                            origin,
                            f"evaluator.{key}",
                            f"must be a list with one entry per metric ({len(func)})",
                        )
                    )
        for key in ("result", "expected"):
            entries = value.get(key)
            if isinstance(entries, list):
                for i, entry in enumerate(entries):
                    # OSWorld allows a null expected (metric without reference), never a null result.
                    if not isinstance(entry, dict) and not (entry is None and key == "expected"):
                        issues.append(
                            ImportIssue(origin, f"evaluator.{key}[{i}]", "must be an object with a type")
                        )
        if value.get("conj", "and") not in ("and", "or"):
            issues.append(
                ImportIssue(origin, "evaluator.conj", f"must be 'and' or 'or', got {value.get('conj')!r}")
            )
        needs_result = any(f != "infeasible" for f in func)
    elif isinstance(func, str) and func:
        needs_result = func != "infeasible"
        for key in ("result", "expected"):
            if value.get(key) is not None and not isinstance(value[key], dict):
                issues.append(ImportIssue(origin, f"evaluator.{key}", "must be an object with a type"))
    else:
        issues.append(ImportIssue(origin, "evaluator.func", "must be a metric name or a list of names"))
        return
    if needs_result and value.get("result") is None:
        issues.append(
            ImportIssue(origin, "evaluator.result", f"missing (metric {func!r} needs a result getter)")
        )
    if "postconfig" in value:
        _setup_steps(value["postconfig"], "evaluator.postconfig", issues, origin)


def osworld_task_record(task: Any, origin: str) -> tuple[TaskRecord | None, list[ImportIssue]]:
    """Validate one OSWorld task object; a record only when there is no issue."""
    if not isinstance(task, dict):
        return None, [
            ImportIssue(origin, "", f"an OSWorld task must be a JSON object, got {type(task).__name__}")
        ]
    issues: list[ImportIssue] = []
    for key in ("id", "instruction"):
        if key not in task:
            issues.append(ImportIssue(origin, key, "missing"))
        elif not isinstance(task[key], str) or not task[key].strip():
            issues.append(ImportIssue(origin, key, "must be a non-empty string"))
    if isinstance(task.get("id"), str) and len(task["id"]) > 255:
        issues.append(ImportIssue(origin, "id", "longer than 255 characters"))
    if "snapshot" in task and not isinstance(task["snapshot"], str):
        issues.append(ImportIssue(origin, "snapshot", "must be a string"))
    related = task.get("related_apps", [])
    if not isinstance(related, list) or not all(isinstance(a, str) for a in related):
        issues.append(ImportIssue(origin, "related_apps", "must be a list of application names"))
    _setup_steps(task.get("config", []), "config", issues, origin)
    _evaluator(task.get("evaluator"), issues, origin)
    if issues:
        return None, issues

    reasons = check_supported(task)
    config = task.get("config", [])
    source_url = task.get("source")
    snapshot = task.get("snapshot", "")
    tags = ["osworld", *([snapshot] if snapshot else [])]
    record = TaskRecord(
        origin=origin,
        external_id=task["id"].strip(),
        instruction=task["instruction"].strip(),
        env_kind="desktop",
        source="osworld",
        setup={
            "osworld": config,
            "snapshot": snapshot,
            "related_apps": related,
            "source_url": source_url if isinstance(source_url, str) else "",
        },
        verifier={"osworld": task["evaluator"]},
        difficulty_steps=OSWORLD_DEFAULT_STEPS,
        # "os" is the desktop itself, not an application to move between.
        difficulty_cross_page=len(set(related) - {"os"}) > 1,
        difficulty_prerequisites=len(config),
        tags=[t[:64] for t in dict.fromkeys(tags)],
        supported=not reasons,
        unsupported_reasons=reasons,
    )
    return record, []


def parse_osworld(source: SourceFile) -> tuple[list[TaskRecord], list[ImportIssue]]:
    """One OSWorld JSON file: a task object (or a list of task objects)."""
    try:
        loaded = json_loads(source.data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        return [], [ImportIssue(source.name, "", f"not UTF-8 text: {exc.reason} at byte {exc.start}")]
    except json.JSONDecodeError as exc:
        return [], [
            ImportIssue(source.name, "", f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}")
        ]
    items = loaded if isinstance(loaded, list) else [loaded]
    records: list[TaskRecord] = []
    issues: list[ImportIssue] = []
    for i, item in enumerate(items):
        origin = f"{source.name}[{i}]" if isinstance(loaded, list) else source.name
        record, problems = osworld_task_record(item, origin)
        issues += problems
        if record is not None:
            records.append(record)
    return records, issues


def osworld_task_json(task: Task) -> dict[str, Any]:
    """The OSWorld task JSON of an imported task (the inverse of the import), in the shape
    `workers.envs.osworld.check_supported` / `task_spec_from_json` take."""
    return {
        "id": task.external_id,
        "snapshot": task.setup.get("snapshot", ""),
        "instruction": task.instruction,
        "source": task.setup.get("source_url", ""),
        "config": task.setup.get("osworld", []),
        "related_apps": task.setup.get("related_apps", []),
        "evaluator": task.verifier.get("osworld", {}),
    }
