"""Step alignment rules (workers/asr/align.py docstring), on hand-built words."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.asr.align import AlignmentError, align_words, dedupe_words, move_boundary, split_phrases
from workers.asr.types import Word


def words_at(text: str, start: float, per_word: float = 0.3, gap: float = 0.05) -> list[Word]:
    """Consecutive words of `text` from `start`, each `per_word` long, `gap` apart."""
    out = []
    for k, token in enumerate(text.split()):
        begin = start + k * (per_word + gap)
        out.append(Word(token, begin, begin + per_word, 0.9))
    return out


def texts(steps) -> list[str]:
    return [s.text for s in steps]


def test_no_speech_gives_empty_steps_and_final_bucket() -> None:
    steps = align_words([], [1.0, 2.0])
    assert [s.step_index for s in steps] == [0, 1, 2]
    assert texts(steps) == ["", "", ""]
    assert steps[-1].is_final and steps[-1].action_time is None
    assert not steps[0].is_final and steps[0].action_time == 1.0


def test_no_actions_puts_everything_in_final_bucket() -> None:
    steps = align_words(words_at("hello there.", 0.0), [], trailing="last")
    assert len(steps) == 1 and steps[0].is_final and steps[0].text == "hello there."


def test_speech_between_actions_explains_the_next_action() -> None:
    speech = words_at("open the menu.", 0.0) + words_at("click save.", 3.0)
    steps = align_words(speech, [2.0, 5.0])
    assert texts(steps) == ["open the menu.", "click save.", ""]


def test_speech_only_after_last_action_goes_to_final_bucket_or_last_step() -> None:
    speech = words_at("okay that is done.", 5.0)
    final = align_words(speech, [1.0, 2.0])
    assert texts(final) == ["", "", "okay that is done."]
    folded = align_words(speech, [1.0, 2.0], trailing="last")
    assert texts(folded) == ["", "okay that is done."]
    assert len(folded) == 2 and not folded[-1].is_final


def test_straddling_phrase_stays_with_the_action_it_began_before() -> None:
    # "I click save and wait" (5 words, 0.35 s apart): the click lands after word 2; words 3-5 start
    # within lag_s after it, so the whole phrase explains the click although most of it comes later.
    speech = words_at("I click save and wait", 0.0)
    steps = align_words(speech, [0.6, 10.0], lag_s=1.0, lead_s=0.0)
    assert texts(steps) == ["I click save and wait", "", ""]
    # Without the lag tolerance the same phrase goes by majority to the next step.
    steps = align_words(speech, [0.6, 10.0], lag_s=0.0, lead_s=0.0)
    assert texts(steps) == ["", "I click save and wait", ""]


def test_straddling_tail_longer_than_lag_goes_by_majority() -> None:
    # Click after 2 of 8 words: the tail runs ~2 s past the click, beyond lag_s, and most of the
    # phrase is after the click, so it explains the next action.
    speech = words_at("so now I type the name in here", 0.0)
    steps = align_words(speech, [0.65, 10.0], lag_s=0.5, lead_s=0.0)
    assert texts(steps) == ["", "so now I type the name in here", ""]
    # With a longer phrase mostly before the click, majority keeps it with the click.
    steps = align_words(speech, [2.0, 10.0], lag_s=0.2, lead_s=0.0)
    assert texts(steps) == ["so now I type the name in here", "", ""]


def test_phrase_starting_just_before_an_action_leads_into_the_next_step() -> None:
    # The next thought starts 0.2 s before the click lands: it explains the next action.
    speech = words_at("open the file.", 0.0) + words_at("now I type the name.", 2.8)
    steps = align_words(speech, [3.0, 8.0], lead_s=0.5, lag_s=0.1)
    assert texts(steps) == ["open the file.", "now I type the name.", ""]


def test_long_pause_splits_phrases_so_each_side_keeps_its_action() -> None:
    speech = words_at("open the file", 0.0) + words_at("now the name", 5.0)
    phrases = split_phrases(speech, 0.35)
    assert [len(p) for p in phrases] == [3, 3]
    steps = align_words(speech, [1.2, 6.5])
    assert texts(steps) == ["open the file", "now the name", ""]


def test_sentence_punctuation_ends_a_phrase_even_without_a_pause() -> None:
    speech = words_at("open it. now type", 0.0)
    assert [len(p) for p in split_phrases(speech, 0.35)] == [2, 2]


def test_breath_pause_splits_a_sentence_but_its_tail_stays_with_the_click() -> None:
    # "I press the button, [0.45 s] and hope it saves everything." with the click in the second part:
    # the tail phrase crosses the click and its later words start within lag_s, so it stays.
    speech = words_at("I press the button,", 0.0) + words_at("and hope it saves everything.", 1.8)
    assert [len(p) for p in split_phrases(speech, 0.35)] == [4, 5]
    steps = align_words(speech, [2.6, 10.0], lag_s=1.5, lead_s=0.0)
    assert texts(steps) == ["I press the button, and hope it saves everything.", "", ""]
    # With a short lag the tail is mostly after the click and goes by majority to the next step.
    steps = align_words(speech, [2.6, 10.0], lag_s=0.5, lead_s=0.0)
    assert texts(steps) == ["I press the button,", "and hope it saves everything.", ""]


def test_word_exactly_at_action_time_belongs_to_that_action() -> None:
    at = Word("save", 0.9, 1.1, 0.9)  # midpoint == 1.0 == action time
    after = Word("next", 1.6, 1.8, 0.9)
    steps = align_words([at, after], [1.0, 3.0])
    assert texts(steps) == ["save", "next", ""]


def test_overlapping_chunks_do_not_duplicate_words() -> None:
    first = words_at("open the menu", 0.0)
    # The second chunk re-transcribed "menu" with slightly shifted times, then continued.
    second = [Word("menu", 0.72, 0.99, 0.95), *words_at("and click", 1.05)]
    deduped = dedupe_words(first + second)
    assert [w.text for w in deduped] == ["open", "the", "menu", "and", "click"]
    assert deduped[2].probability == 0.95  # the more confident copy wins
    steps = align_words(first + second, [2.0])
    assert texts(steps) == ["open the menu and click", ""]


def test_unsorted_words_are_put_in_time_order() -> None:
    speech = words_at("one two three", 0.0)
    steps = align_words(list(reversed(speech)), [5.0])
    assert steps[0].text == "one two three"


def test_every_word_is_assigned_exactly_once() -> None:
    speech = words_at("a b c d e f g h i j k l", 0.0, per_word=0.2, gap=0.3)
    steps = align_words(speech, [0.7, 1.9, 2.4, 4.0])
    assigned = [w for s in steps for w in s.words]
    assert sorted(assigned, key=lambda w: w.start) == speech


@pytest.mark.parametrize(
    ("times", "kwargs"),
    [([2.0, 1.0], {}), ([float("nan")], {}), ([1.0], {"lag_s": -1.0}), ([1.0], {"trailing": "middle"})],
)
def test_bad_inputs_raise_alignment_error(times: list[float], kwargs: dict) -> None:
    with pytest.raises(AlignmentError):
        align_words([], times, **kwargs)


def test_move_boundary_moves_words_between_neighbours_in_time_order() -> None:
    speech = words_at("open the menu.", 0.0) + words_at("click save.", 3.0)
    steps = align_words(speech, [2.0, 5.0])
    moved = move_boundary(steps, step_index=0, direction="next", count=2)
    assert texts(moved) == ["open", "the menu. click save.", ""]
    back = move_boundary(moved, step_index=1, direction="previous", count=2)
    assert texts(back) == texts(steps)
    assert texts(steps) == ["open the menu.", "click save.", ""]  # the input is not modified


@pytest.mark.parametrize(
    ("index", "direction", "count"),
    [(0, "previous", 1), (2, "next", 1), (5, "next", 1), (0, "next", 4), (0, "next", 0)],
)
def test_move_boundary_rejects_impossible_moves(index: int, direction: str, count: int) -> None:
    steps = align_words(words_at("open the menu.", 0.0), [2.0, 5.0])
    with pytest.raises(AlignmentError):
        move_boundary(steps, step_index=index, direction=direction, count=count)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    gaps=st.lists(st.floats(0.0, 2.0), min_size=0, max_size=30),
    actions=st.lists(st.floats(0.0, 40.0), min_size=0, max_size=8),
    lead=st.floats(0.0, 1.0),
    lag=st.floats(0.0, 2.0),
)
def test_alignment_invariants(gaps: list[float], actions: list[float], lead: float, lag: float) -> None:
    """Any input: every word lands in exactly one step, in time order, phrases are never split."""
    speech, t = [], 0.0
    for k, gap in enumerate(gaps):
        t += gap
        speech.append(Word(f"w{k}", t, t + 0.25, 0.9))
        t += 0.25
    times = sorted(actions)
    steps = align_words(speech, times, lead_s=lead, lag_s=lag)
    assert len(steps) == len(times) + 1
    assigned = [w for s in steps for w in s.words]
    assert assigned == speech  # all words, once each, steps in order and words in time order
    where = {w: s.step_index for s in steps for w in s.words}
    for phrase in split_phrases(speech, 0.35):
        assert len({where[w] for w in phrase}) == 1
