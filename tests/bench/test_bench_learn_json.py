"""Issue 35 item 5: a `bench learn` headline is its own per-task table.

Runs' JSONs are kept in benchmarks/results/ (learn-*.json); each is checked here (headline, interval
and gain recomputed from the per-task counts by benchmarks.learn.headline_mismatches), and a
final-test one against the row of docs/benchmarks.md that reports it. A hand-made JSON with the
mis-copied 2026-11-26 headline (42.5 % over a table of 46 of 120) shows the check fails where it should.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from benchmarks.harness.config import LEARN_SEEDS
from benchmarks.learn import headline_mismatches, start_mismatches
from tests.bench.reported import RESULTS as RESULTS_DIR
from tests.bench.reported import docs_row, load

RESULTS = sorted(RESULTS_DIR.glob("learn-*.json"))
INCONSISTENT = Path(__file__).parent / "data" / "learn_inconsistent.json"


def reported(figures: dict[str, Any]) -> str:
    """A learn JSON's figure as docs/benchmarks.md writes it: before [CI] → after [CI], gain."""

    def pct(x: float) -> str:
        return f"{100 * x:.1f}"

    (b_low, b_high), (a_low, a_high) = figures["success_before_ci95"], figures["success_after_ci95"]
    return (
        f"{pct(figures['success_before'])} % [{pct(b_low)}, {pct(b_high)}] → "
        f"{pct(figures['success_after'])} % [{pct(a_low)}, {pct(a_high)}], {figures['gain_points']:+.1f}"
    )


def corrected(figures: dict[str, Any]) -> dict[str, Any]:
    """The hand-made JSON with its headline put right (46 of 120 = 38.3 %, +31.7)."""
    figures.update(success_before=0.3833, success_before_ci95=[0.3012, 0.4727], gain_points=31.7,
                   gain_points_online=31.7)  # fmt: skip
    return figures


def test_a_headline_that_is_not_its_table_is_caught() -> None:
    mismatches = headline_mismatches(load(INCONSISTENT))
    assert "success_before: 0.425, but its table adds up to 46/120 = 0.3833" in mismatches
    assert "gain_points: 27.5, but the tables give 31.7" in mismatches
    assert not any(m.startswith("success_after:") for m in mismatches)  # the "after" was right


def test_every_part_of_the_table_is_checked() -> None:
    figures = corrected(load(INCONSISTENT))
    assert headline_mismatches(figures) == []
    for change, expected in [
        (lambda f: f["after_per_task"]["click-link"].update(successes=12), "after_per_task[click-link]"),
        (lambda f: f["before_per_task"]["enter-text"].update(n=14, rate=0.0), "n 14, not the 15"),
        (lambda f: f["after_online_per_task"].pop("click-tab"), "are not the set's"),
        (lambda f: f["before_per_task"]["click-test"].update(successes="7"), "are not a success count"),
        (lambda f: f["before_per_task"]["click-test"].update(successes=16), "are not a success count"),
        (lambda f: f.pop("after_per_task"), "after_per_task: missing"),
        (lambda f: f.update(episodes_per_evaluation=100), "episodes_per_evaluation"),
        (lambda f: f.update(success_after_online_ci95=[0.6, 0.8]), "success_after_online_ci95"),
    ]:
        broken = copy.deepcopy(figures)
        change(broken)
        found = headline_mismatches(broken)
        assert any(expected in m for m in found), (expected, found)


def test_the_first_set_row_says_its_per_task_table() -> None:
    """The 2026-11-26 row (no JSON kept; in HISTORY.md since the 2026-11-29 final test replaced it)
    against the JSON of its recorded per-task counts."""
    row = docs_row("learn, first set (2026-11-26)", "benchmarks/HISTORY.md")
    assert reported(corrected(load(INCONSISTENT))) in row
    assert reported(load(INCONSISTENT)) not in row  # the mis-copied 42.5 %


def test_a_set_without_demonstrations_says_it_had_none() -> None:
    """issue 34 item 4: a "new"-set JSON starts from the starter with no SFT example, no stored
    demonstration, no injection and no tuning seed read; each claim to the contrary is caught."""
    figures = {"task_set": "new", "start": "starter", "injection": "none", "sft_examples": 0,
               "stored_demonstrations": 0, "config": {"task_set": "new", "demo_range": None}}  # fmt: skip
    assert start_mismatches(figures) == []
    for change, expected in [
        (lambda f: f.update(start="sft"), "start: 'sft'"),
        (lambda f: f.pop("start"), "start: None"),
        (lambda f: f.update(injection="experience_pool"), "injection"),
        (lambda f: f.update(sft_examples=31), "sft_examples"),
        (lambda f: f.update(stored_demonstrations=16), "stored_demonstrations"),
        (lambda f: f["config"].update(demo_range=[0, 2]), "demo_range"),
    ]:
        broken = copy.deepcopy(figures)
        change(broken)
        found = start_mismatches(broken)
        assert any(expected in m for m in found), (expected, found)
    # the other sets start from SFT, JSONs written before the key included
    assert start_mismatches({"task_set": "first"}) == []
    assert start_mismatches({"task_set": "second", "start": "sft", "stored_demonstrations": 10}) == []
    assert start_mismatches({"task_set": "first", "start": "starter"}) != []


def test_runs_are_kept() -> None:
    assert RESULTS, "no bench learn JSON in benchmarks/results/"


@pytest.mark.parametrize("path", RESULTS, ids=[p.stem for p in RESULTS])
def test_a_kept_run_is_its_table(path: Path) -> None:
    figures = load(path)
    assert headline_mismatches(figures) == []
    assert start_mismatches(figures) == []
    seeds = LEARN_SEEDS.first(figures["split"], figures["config"]["eval_seeds"])
    assert figures["config"]["eval_range"] == [seeds.start, seeds.stop - 1]
    if figures["split"] != "final_test":
        return
    # the reported figure: docs/benchmarks.md says what the JSON says, on the range it read
    row = docs_row(f"learn, {figures['task_set']} set")
    assert reported(figures) in row, f"docs/benchmarks.md's row does not say {reported(figures)!r}:\n{row}"
    assert f"{seeds.start}–{seeds.stop - 1}" in row
