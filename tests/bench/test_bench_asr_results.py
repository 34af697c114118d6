"""Issue 32: the hard set's final test kept in benchmarks/results/ (asr-hard-final-690501-*.json, one
read per model with per-session rows) is what docs/benchmarks.md reports. Each condition's WER and interval
are recomputed from the per-session rows; the row gives them for both models, so a row copied wrong or
a result edited by hand fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.asr import HARD_CONDITIONS, condition_interval
from tests.bench.reported import RESULTS as RESULTS_DIR
from tests.bench.reported import docs_row, load

READS = {model: RESULTS_DIR / f"asr-hard-final-690501-{model}.json" for model in ("tiny.en", "base")}


@pytest.mark.parametrize("model", READS)
def test_a_kept_final_read_is_its_sessions(model: str) -> None:
    figures = load(READS[model])
    assert figures["model"] == model and figures["split"] == "final_test" and figures["sessions"] == 20
    assert figures["seeds"][0] == 690501 and not figures["config"]["quick"]
    rows = figures["per_session"]
    assert [r["seed"] for r in rows] == [690501 + 7919 * k for k in range(20)]
    for condition in HARD_CONDITIONS:
        mine = [r for r in rows if r["condition"] == condition]
        wer = sum(r["errors"] for r in mine) / sum(r["ref_words"] for r in mine)
        assert figures["wer_by_condition"][condition] == pytest.approx(wer, abs=1e-4)
        assert figures["wer_ci95_by_condition"][condition] == condition_interval(rows, condition, "errors")
    aligned = sum(r["aligned"] for r in rows) / sum(r["ref_words"] for r in rows)
    assert figures["alignment_accuracy"] == pytest.approx(aligned, abs=1e-4)


def test_docs_report_both_models_with_their_intervals() -> None:
    row = docs_row("asr, hard set")
    for model, path in READS.items():
        figures = load(path)
        for condition in ("fast", "noisy", "technical"):
            wer = 100 * figures["wer_by_condition"][condition]
            low, high = (100 * x for x in figures["wer_ci95_by_condition"][condition])
            assert f"{condition} {wer:.1f} % [{low:.1f}, {high:.1f}]" in row, (model, condition, row)
        assert f"alignment {100 * figures['alignment_accuracy']:.1f} %" in row, (model, row)
    assert "7919·k + 690501" in row and Path(READS["base"]).exists()
