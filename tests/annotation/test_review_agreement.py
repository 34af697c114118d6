"""Agreement math on hand-made cases (no database)."""

from __future__ import annotations

import pytest

from annotation.review import agreement as ag


def sv(*verdicts: str) -> list[dict]:
    return [{"index": i, "verdict": v, "comment": ""} for i, v in enumerate(verdicts)]


def test_step_verdicts_agree_disagree_and_flag() -> None:
    result = ag.step_verdict_agreement(
        [sv("approve", "fix", "reject", "approve"), sv("approve", "fix", "approve", "reject")]
    )
    assert result.agreeing == [0, 1]
    assert result.disagreeing == [2, 3]
    assert result.flagged == [1, 2, 3]
    assert result.rate == 0.5


def test_a_step_one_reviewer_skipped_is_a_disagreement() -> None:
    result = ag.step_verdict_agreement([sv("approve", "approve"), sv("approve")])
    assert result.agreeing == [0] and result.disagreeing == [1]


def test_no_steps_is_full_agreement() -> None:
    assert ag.step_verdict_agreement([[], []]).rate == 1.0


@pytest.mark.parametrize(
    ("verdicts", "outcome"),
    [
        (["approve", "approve"], "approved"),
        (["reject", "reject"], "rejected"),
        (["approve", "reject"], "needs_fix"),
        (["approve", "fix"], "needs_fix"),
        (["fix", "fix"], "needs_fix"),
        (["approve", "approve", "approve"], "approved"),
    ],
)
def test_review_outcome(verdicts: list[str], outcome: str) -> None:
    assert ag.review_outcome(verdicts) == outcome


def test_review_outcome_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        ag.review_outcome([])
    with pytest.raises(ValueError):
        ag.review_outcome(["approve", "maybe"])


def test_edit_distance_and_text_similarity() -> None:
    assert ag.edit_distance("kitten", "sitting") == 3
    assert ag.edit_distance("", "abc") == 3
    assert ag.edit_distance("abc", "abc") == 0
    assert ag.text_similarity("Hello  World", "hello world") == 1.0  # case and spacing normalised
    assert ag.text_similarity("abc\n", "abc") == 0.75  # Enter is one edit of four characters
    assert ag.text_similarity("kitten", "sitting") == round(1 - 3 / 7, 4)
    assert ag.text_similarity("", "") == 1.0
    assert ag.text_similarity("abc", "xyz") == 0.0


def click(x: float, y: float) -> dict:
    return {"kind": "click", "point": [x, y]}


def test_clicks_within_the_radius_agree_outside_do_not() -> None:
    near = ag.action_agreement(click(100, 100), click(108, 106), radius_px=10)  # 10 px apart exactly
    assert near.agree and near.score == 1.0 and near.checks == {"kind": 1.0, "target": 1.0}
    far = ag.action_agreement(click(100, 100), click(111, 100), radius_px=10)
    assert not far.agree and far.checks["target"] == 0.0 and far.score == 0.5


def test_clicks_in_the_same_element_agree_even_when_far_apart() -> None:
    button = {"x": 50, "y": 50, "width": 100, "height": 40}
    page = {"x": 0, "y": 0, "width": 400, "height": 400}  # a bigger box around both: not "the same element"
    other = {"x": 200, "y": 200, "width": 50, "height": 50}
    elements = [page, button, other]
    same = ag.action_agreement(click(55, 55), click(145, 85), radius_px=10, elements=elements)
    assert same.agree
    different = ag.action_agreement(click(55, 55), click(210, 210), radius_px=10, elements=elements)
    assert not different.agree
    assert ag.element_at((55, 55), elements) == 1
    assert ag.element_at((500, 500), elements) is None


def test_different_kinds_score_zero() -> None:
    match = ag.action_agreement(click(10, 10), {"kind": "left_double", "point": [10, 10]})
    assert not match.same_kind and match.score == 0.0 and not match.agree


def test_typed_text_by_edit_distance() -> None:
    a = {"kind": "type", "text": "Flywheel review"}
    close = ag.action_agreement(a, {"kind": "type", "text": "flywheel reveiw"}, text_threshold=0.8)
    assert close.agree and 0.8 <= close.checks["text"] < 1.0
    off = ag.action_agreement(a, {"kind": "type", "text": "something else"}, text_threshold=0.8)
    assert not off.agree


def test_hotkeys_scroll_and_drag() -> None:
    assert ag.action_agreement(
        {"kind": "hotkey", "keys": ["ctrl", "c"]}, {"kind": "hotkey", "keys": ["C", "ctrl"]}
    ).agree
    assert not ag.action_agreement(
        {"kind": "hotkey", "keys": ["ctrl", "c"]}, {"kind": "hotkey", "keys": ["ctrl", "v"]}
    ).agree
    up = {"kind": "scroll", "point": [10, 10], "direction": "up"}
    assert not ag.action_agreement(up, {**up, "direction": "down"}).agree
    drag = {"kind": "drag", "point": [0, 0], "end_point": [100, 0]}
    moved_end = ag.action_agreement(drag, {**drag, "end_point": [0, 100]}, radius_px=5)
    assert not moved_end.agree and moved_end.checks == {"kind": 1.0, "target": 1.0, "end_target": 0.0}


def test_step_and_sequence_agreement() -> None:
    step = [click(10, 10), {"kind": "type", "text": "hi"}]
    assert ag.step_agreement(step, step) == 1.0
    assert ag.step_agreement(step, step[:1]) == 0.5  # the typed text has no counterpart
    assert ag.step_agreement([], []) == 1.0
    traj = [[click(10, 10)], [{"kind": "type", "text": "hello"}], [{"kind": "finished"}]]
    assert ag.sequence_agreement(traj, traj) == 1.0
    assert ag.sequence_agreement(traj, traj[:2]) == round(2 / 3, 4)  # a prefix is not a duplicate
    shifted = [[click(60, 60)], *traj[1:]]
    assert ag.sequence_agreement(traj, shifted, radius_px=10) == round((0.5 + 1 + 1) / 3, 4)


def test_corrected_actions_of_two_reviewers_agree_in_gui_terms() -> None:
    r1 = [
        {"index": 0, "verdict": "approve"},
        {"index": 1, "verdict": "fix", "action": [click(100, 200)]},
        {"index": 2, "verdict": "fix", "action": [{"kind": "type", "text": "Ada Lovelace\n"}]},
        {"index": 3, "verdict": "fix", "action": [click(10, 10)]},
    ]
    r2 = [
        {"index": 0, "verdict": "approve"},
        {"index": 1, "verdict": "fix", "action": [click(105, 197)]},  # 5.8 px away
        {"index": 2, "verdict": "fix", "action": [{"kind": "type", "text": "ada lovelace"}]},  # no Enter
        {"index": 3, "verdict": "reject"},  # only one correction: nothing to compare
    ]
    got = {f.index: f for f in ag.corrected_action_agreement([r1, r2], radius_px=10, text_threshold=0.95)}
    assert sorted(got) == [1, 2]
    assert got[1].agree and got[1].score == 1.0 and got[1].reviewers == 2
    assert not got[2].agree and got[2].score == round((1 + round(12 / 13, 4)) / 2, 4)  # one edit in 13
    far = ag.corrected_action_agreement(
        [r1, [{"index": 1, "verdict": "fix", "action": [click(300, 200)]}]], radius_px=10
    )
    assert [(f.index, f.agree, f.score) for f in far] == [(1, False, 0.5)]
