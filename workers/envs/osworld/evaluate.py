"""Evaluating a session with an OSWorld evaluator: postconfig, getters, metrics, combined as
OSWorld combines them."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from workers.actions.types import GIVE_UP_KINDS
from workers.envs.base import TaskSpec
from workers.envs.osworld import chrome, vlc, vocab
from workers.envs.osworld.commands import _as_osworld_shell, _rewrite_command
from workers.envs.osworld.common import INFEASIBLE, CommandRunner, OSWorldError, _as_list
from workers.envs.osworld.files import _url_problems, local_copy
from workers.envs.osworld.settle import settle
from workers.envs.osworld.setup import restore_outputs, run_setup
from workers.envs.osworld.support import _evaluator_problems, bundle_dir_of, evaluator_of


@dataclass
class MetricOutcome:
    func: str
    score: float
    result: str | None = None
    error: str | None = None


@dataclass
class EvalReport:
    score: float
    conj: Literal["and", "or"]
    metrics: list[MetricOutcome] = field(default_factory=list)


def evaluate(evaluator: dict[str, Any], runner: CommandRunner, bundle_dir: Path | None = None) -> float:
    return evaluate_report(evaluator, runner, bundle_dir).score


def task_score(task: TaskSpec | None, runner: CommandRunner) -> float:
    """A session's verifier score (an env's `evaluate()`): its OSWorld evaluator run against
    `runner` for a task of source 'osworld'; 0.0 for any other task, or one without an evaluator."""
    if task is None or task.source != "osworld":
        return 0.0
    evaluator = evaluator_of(task)
    if evaluator is None:
        return 0.0
    return evaluate(evaluator, runner=runner, bundle_dir=bundle_dir_of(task))


def evaluate_report(
    evaluator: dict[str, Any], runner: CommandRunner, bundle_dir: Path | None = None
) -> EvalReport:
    """Run postconfig, every (getter, metric) pair, and combine the scores as OSWorld does:
    'and' → 0 as soon as one metric is 0, else the mean; 'or' → 1 as soon as one is 1, else the max.
    As in OSWorld (desktop_env's DesktopEnv.evaluate), a session whose last action gave up (FAIL:
    our call_user / ask_user, `GIVE_UP_KINDS`) scores 1 on an infeasible task and 0 on any other;
    an infeasible task scores 0 after any other last action (DONE = finished, or none at all)."""
    problems = _evaluator_problems(evaluator, bundle_dir)
    if problems:
        raise OSWorldError("; ".join(problems))
    last = getattr(runner, "last_action_kind", None)
    if evaluator.get("func") == INFEASIBLE:
        score = 1.0 if last in GIVE_UP_KINDS else 0.0
        return EvalReport(score, "and", [MetricOutcome(INFEASIBLE, score, result=str(last))])
    settle(runner)
    with tempfile.TemporaryDirectory(prefix="flywheel-osworld-eval-") as cache:
        restore_outputs(runner, Path(cache))
        run_setup(
            evaluator.get("postconfig", []) or [], runner, bundle_dir, postconfig=True, cache_dir=Path(cache)
        )
        return _scored(evaluator, runner, bundle_dir, Path(cache), last)


def _scored(
    evaluator: dict[str, Any], runner: CommandRunner, bundle_dir: Path | None, cache: Path, last: Any
) -> EvalReport:
    conj = evaluator.get("conj", "and")
    report = EvalReport(score=0.0, conj=conj)
    if last in GIVE_UP_KINDS:
        report.metrics.append(MetricOutcome("FAIL", 0.0, error="the agent gave up on a feasible task"))
        return report
    funcs = _as_list(evaluator["func"])
    results = _as_list(evaluator["result"])
    expected = _as_list(evaluator.get("expected")) if evaluator.get("expected") else [None] * len(funcs)
    raw_options = evaluator.get("options")
    options = raw_options if isinstance(raw_options, list) else [raw_options or {}] * len(funcs)
    adapter = vocab.SessionAdapter(runner, cache)
    for func, getter, exp, opts in zip(funcs, results, expected, options, strict=True):
        outcome = _one_metric(func, getter, exp, opts or {}, runner, adapter, bundle_dir)
        report.metrics.append(outcome)
        if conj == "and" and outcome.score == 0.0:
            return report
        if conj == "or" and outcome.score == 1.0:
            report.score = 1.0
            return report
    scores = [m.score for m in report.metrics]
    report.score = sum(scores) / len(scores) if conj == "and" else max(scores)
    return report


def _one_metric(
    func: str,
    getter: dict[str, Any],
    expected: dict[str, Any] | None,
    options: dict[str, Any],
    runner: CommandRunner,
    adapter: vocab.SessionAdapter,
    bundle_dir: Path | None,
) -> MetricOutcome:
    try:
        result = _get(getter, runner, adapter, bundle_dir)
        exp = _get(expected, runner, adapter, bundle_dir) if expected else None
    except OSWorldError as exc:
        return MetricOutcome(func, 0.0, error=str(exc))
    except FileNotFoundError as exc:  # OSWorld scores a missing file 0
        return MetricOutcome(func, 0.0, error=f"file not found: {exc}")
    except Exception as exc:  # OSWorld's getters raise on what the session lacks (a config file
        # the app has not written yet): the state is not the expected one, so 0, with the reason
        return MetricOutcome(func, 0.0, error=f"getter {getter.get('type')!r} failed: {exc!r}"[:500])
    fn: Callable[..., Any] = regex_match if func == "regex_match" else vocab.metric(func)
    try:
        value = fn(result, exp, **options) if expected else fn(result, **options)
    except Exception as exc:  # OSWorld's metrics raise on files the agent left malformed
        return MetricOutcome(func, 0.0, result=_shown(result), error=f"{func} failed: {exc!r}"[:500])
    try:
        score = float(value)
    except (TypeError, ValueError):
        return MetricOutcome(func, 0.0, result=_shown(result), error=f"{func} returned {value!r}")
    return MetricOutcome(func, score, result=_shown(result))


def _shown(value: Any) -> str | None:
    return None if value is None else str(value)[:2000]


def _get(
    getter: dict[str, Any], runner: CommandRunner, adapter: vocab.SessionAdapter, bundle_dir: Path | None
) -> Any:
    gtype = getter["type"]
    if gtype in {"vm_command_line", "vm_command_error"}:
        command = _rewrite_command(getter.get("command", ""), runner)
        # OSWorld's getters return stdout (vm_command_line) or stderr (vm_command_error), never both.
        result = runner.run_command(
            *_as_osworld_shell(command, getter.get("shell")), timeout_s=30.0, separate_stderr=True
        )
        if result.timed_out:
            raise OSWorldError("result command timed out")
        return result.stderr if gtype == "vm_command_error" else result.output
    if gtype == "cloud_file":
        return _cloud_file(getter, adapter, bundle_dir)
    if gtype == "open_tabs_info":
        return chrome.open_tabs_info(runner)
    if gtype == "vlc_playing_info":
        return vlc.playing_info(runner, getter, Path(adapter.cache_dir))
    return vocab.getter(gtype)(adapter, getter)


def _cloud_file(config: dict[str, Any], adapter: vocab.SessionAdapter, bundle_dir: Path | None) -> Any:
    """OSWorld's `get_cloud_file`, offline: each URL from the bundle or the mirror into the cache."""
    multi = bool(config.get("multi", False))
    paths = _as_list(config["path"]) if multi else [config["path"]]
    dests = _as_list(config["dest"]) if multi else [config["dest"]]
    gives = set(config.get("gives", [0]))
    out = []
    for i, (url, dest) in enumerate(zip(paths, dests, strict=False)):
        source = local_copy(str(url), bundle_dir)
        if source is None:
            raise OSWorldError(_url_problems(str(url), bundle_dir)[0])
        target = Path(adapter.cache_dir) / Path(str(dest)).name
        shutil.copyfile(source, target)
        if i in gives:
            out.append(str(target))
    return out[0] if len(out) == 1 else out


def regex_match(result: str, rules: dict[str, Any]) -> float:
    """rules {'pattern': ..., 'flags': 'im'?}: re.search over the result (multiline by default)."""
    flags = re.MULTILINE
    for letter in rules.get("flags", ""):
        flags |= {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE}[letter]
    try:
        return 1.0 if re.search(rules["pattern"], result, flags) else 0.0
    except (KeyError, TypeError, re.error):
        return 0.0
