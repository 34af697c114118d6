"""Issue 35 item 5: a `bench learn` headline is its own per-task table.

The reported runs' JSONs are kept in benchmarks/results/; each is checked here (headline, interval and
gain recomputed from the per-task counts by benchmarks.learn.headline_mismatches), and so is the row of
docs/benchmarks.md that reports it. A hand-made JSON with the mis-copied 2026-11-26 headline (42.5 %
over a table of 46 of 120) shows the check fails where it should.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from benchmarks.learn import headline_mismatches

INCONSISTENT = Path(__file__).parent / "data" / "learn_inconsistent.json"


def load(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def test_a_headline_that_is_not_its_table_is_caught() -> None:
    mismatches = headline_mismatches(load(INCONSISTENT))
    assert "success_before: 0.425, but its table adds up to 46/120 = 0.3833" in mismatches
    assert "gain_points: 27.5, but the tables give 31.7" in mismatches
    assert not any(m.startswith("success_after:") for m in mismatches)  # the "after" was right


def test_every_part_of_the_table_is_checked() -> None:
    figures = load(INCONSISTENT)
    figures.update(success_before=0.3833, success_before_ci95=[0.3012, 0.4727], gain_points=31.7,
                   gain_points_online=31.7)  # fmt: skip
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
