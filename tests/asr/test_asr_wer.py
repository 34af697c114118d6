"""Word error rate and its normalisation."""

from __future__ import annotations

import pytest

from workers.asr.wer import align_tokens, normalize_words, word_error_rate


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        (
            "Now I click the Search-Box, then type!",
            ["now", "i", "click", "the", "search", "box", "then", "type"],
        ),
        ("I'm on page 25 of 1,000", ["i", "am", "on", "page", "25", "of", "1000"]),
        ("I'm on page twenty five of one thousand", ["i", "am", "on", "page", "25", "of", "1000"]),
        ("I won't, they'll; it’s", ["i", "will", "not", "they", "will", "it", "is"]),
        ("the third row, the 21st", ["the", "3rd", "row", "the", "21st"]),
        ("Um, okay... 'quoted' words", ["okay", "quoted", "words"]),
        ("", []),
    ],
)
def test_normalize_words_is_whispers_english_normaliser(text: str, tokens: list[str]) -> None:
    from transformers.models.whisper.english_normalizer import EnglishTextNormalizer

    assert normalize_words(text) == tokens
    assert normalize_words(text) == EnglishTextNormalizer({})(text.replace("’", "'")).split()


def test_generator_template_words_are_not_folded() -> None:
    """No hand list of the generator's own words: "dropdown" and "drop down" stay different."""
    assert word_error_rate("the dropdown list", "the drop down list").wer > 0


def test_digits_and_spelled_numbers_score_the_same() -> None:
    assert word_error_rate("I select row 3", "I select row three.").wer == 0.0


def test_contracted_and_full_forms_score_the_same() -> None:
    assert word_error_rate("that worked I am finished", "That worked, I'm finished.").wer == 0.0
    assert word_error_rate("I do not know", "I don't know").wer == 0.0


def test_wer_counts_each_edit_kind() -> None:
    # ref: a b c d e f ; hyp: a x c e f g -> b->x substitution, d deleted, g inserted.
    result = word_error_rate("a b c d e f", "a x c e f g")
    assert (result.substitutions, result.deletions, result.insertions) == (1, 1, 1)
    assert result.wer == pytest.approx(3 / 6)


def test_wer_of_empty_texts() -> None:
    assert word_error_rate("", "").wer == 0.0
    assert word_error_rate("", "hallucinated words").wer == 1.0
    assert word_error_rate("two words", "").wer == 1.0


def test_alignment_pairs_equal_length_runs_one_to_one() -> None:
    steps = align_tokens(["open", "the", "menu"], ["open", "a", "menu"])
    assert [(s.op, s.ref_index, s.hyp_index) for s in steps] == [("ok", 0, 0), ("sub", 1, 1), ("ok", 2, 2)]
