"""The embedded model's instruction-match features (matching.py, `config.instruction_match`): which
prompt tokens they mark, that they steer the copy head, and that checkpoints written before them
load without them and score exactly as before."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.policy.test_embedded_pointer import loaded_without, repeated
from tests.rl.trainer_helpers import one_thread, png, tiny_config  # noqa: F401  (autouse fixture)
from workers.envs.base import Element, Observation
from workers.policy.embedded.configuration import FlywheelPolicyConfig
from workers.policy.embedded.generation import score
from workers.policy.embedded.matching import instruction_match_features, row_features
from workers.policy.embedded.modeling import FlywheelPolicyModel
from workers.policy.embedded.policy import EmbeddedPolicy, new_model
from workers.policy.embedded.tokenizer import FlywheelTokenizer

OBS = Observation(
    screenshot=png((0, 100, 200)),
    width=160,
    height=210,
    image_format="png",
    instruction='Click on Tab #2, then the "ok" button.',
    elements=(
        Element(1, "button", "Cancel", 100, 120, 40, 20),  # centre (120,130)
        Element(2, "button", "OK", 100, 160, 40, 20),  # centre (120,170)
        Element(3, "a", "Tab #2", 20, 40, 30, 10),  # centre (35,45)
        Element(4, "a", "Tab #3", 60, 40, 30, 10),  # centre (75,45)
        Element(5, "div", "Click on Tab #2, then the 'ok' button.", 0, 0, 160, 50),  # centre (80,25)
    ),
)


def tiny(match: bool = True, seed: int = 0) -> FlywheelPolicyModel:
    cfg = tiny_config()
    cfg.instruction_match = match
    cfg.max_positions, cfg.max_prompt_tokens = 512, 400  # the whole element list below
    return new_model(FlywheelPolicyConfig(**cfg.to_dict()), seed=seed)


def _prompt(policy: EmbeddedPolicy, obs: Observation = OBS) -> tuple[list[int], list[tuple[float, float]]]:
    batch = policy.batch([policy.inputs_for(obs, [], None)])
    ids = batch.prompt_ids[0].tolist()
    return ids, row_features(ids, policy.tokenizer)


def _line_of(policy: EmbeddedPolicy, ids: list[int], number: int, nth: int = 0) -> float:
    """The line feature at the nth occurrence of a number token."""
    feats = row_features(ids, policy.tokenizer)
    where = [j for j, t in enumerate(ids) if t == policy.tokenizer.number_id(number)]
    return feats[where[nth]][1]


def test_each_element_line_carries_the_share_of_its_text_the_instruction_names() -> None:
    policy = EmbeddedPolicy(tiny())
    ids, feats = _prompt(policy)
    assert _line_of(policy, ids, 130) == 0.0  # "Cancel": not in the instruction
    assert _line_of(policy, ids, 170) == 1.0  # "OK" (case-insensitive "ok")
    assert _line_of(policy, ids, 35) == 1.0  # "Tab #2": "tab" and the number 2
    assert _line_of(policy, ids, 75) == 0.5  # "Tab #3": "tab" only
    assert _line_of(policy, ids, 80) == 0.0  # the instruction's own banner names nothing
    text = policy.tokenizer
    # the word feature marks only the matching words inside the quoted text, not the tag "button"
    marked = text.decode([t for t, f in zip(ids, feats, strict=True) if f[0] == 1.0])
    assert marked == "OKTab2Tab"
    # the instruction, the headers and the history carry nothing
    first_line = ids.index(text.byte_id(ord("\n")))
    assert all(f == (0.0, 0.0) for f in feats[:first_line])
    assert feats[-1] == (0.0, 0.0)


def test_an_element_named_by_its_kind_matches_through_its_tag() -> None:
    """click-widget names a kind ('"textarea"'), not a text: the tag word counts when quoted, and a
    checkbox's label (not HTML's default value "on") is its text."""
    obs = Observation(
        screenshot=None,
        width=160,
        height=210,
        image_format="png",
        instruction='Click on a "textarea" widget.',
        elements=(
            Element(1, "input:checkbox", "[ ] Rtq", 10, 20, 10, 10),  # centre (15,25)
            Element(2, "textarea", "", 10, 60, 60, 20),  # centre (40,70)
            Element(3, "input:text", "", 10, 100, 60, 20),  # centre (40,110)
            Element(4, "button", "on", 10, 140, 40, 20),  # centre (30,150): "on" is in the instruction
        ),
    )
    policy = EmbeddedPolicy(tiny())
    ids, _ = _prompt(policy, obs)
    assert _line_of(policy, ids, 70) == 1.0  # the textarea, by its tag
    assert _line_of(policy, ids, 25) == 0.0 and _line_of(policy, ids, 110) == 0.0
    assert _line_of(policy, ids, 150) == 1.0  # text words still count, quoted or not
    button = Observation(**{**obs.__dict__, "instruction": 'Press the "OK" button.'})
    ids, _ = _prompt(policy, button)
    assert _line_of(policy, ids, 150) == 0.0  # "button" is not quoted: no button matches by kind


def test_a_prompt_without_the_layout_gets_zeros_and_padding_stays_zero() -> None:
    tok = FlywheelTokenizer()
    ids = torch.tensor([tok.encode('free text with no element list "OK" (1,2)') + [tok.pad_id] * 3])
    mask = ids != tok.pad_id
    feats = instruction_match_features(ids, mask, tok)
    assert feats.shape == (1, ids.shape[1], 2)
    assert torch.count_nonzero(feats) == 0
    policy = EmbeddedPolicy(tiny())
    batch = policy.batch([policy.inputs_for(OBS, [], None), policy.inputs_for(_short(), [], None)])
    padded = instruction_match_features(batch.prompt_ids, batch.prompt_mask, policy.tokenizer)
    assert torch.count_nonzero(padded[1][~batch.prompt_mask[1]]) == 0
    assert torch.count_nonzero(padded[1]) > 0  # the short prompt's own "OK" line


def _short() -> Observation:
    return Observation(
        screenshot=None,
        width=160,
        height=210,
        image_format="png",
        instruction="Press OK.",
        elements=(Element(1, "button", "OK", 100, 160, 40, 20),),
    )


def _point(policy: EmbeddedPolicy, x: int, y: int) -> list[int]:
    return policy.grammar.encode_response(f"Thought: \nAction: click(start_box='({x},{y})')")


def test_the_copy_bias_points_the_copy_head_at_the_element_the_instruction_names() -> None:
    model = tiny(seed=3)
    with torch.no_grad():  # always copy; a strong match bias
        model.copy_gate.bias.fill_(-30.0)
        model.match_scale.weight.zero_()
        model.match_scale.bias.fill_(40.0)
    policy = EmbeddedPolicy(model)
    batch = policy.batch([policy.inputs_for(OBS, [], None)])
    responses = [_point(policy, 120, 170), _point(policy, 120, 130), _point(policy, 75, 45)]
    lp = score(model, policy.grammar, repeated(batch, 3), responses)
    x_at = [r.index(policy.tokenizer.number_id(x)) for r, x in zip(responses, (120, 120, 75), strict=True)]
    probs = [lp.logprobs[i, x_at[i]].exp().item() for i in range(3)]
    # all copy mass goes to the two fully matching lines ("OK", "Tab #2"), shared by their number
    # tokens (120 and 170; 2, 35 and 45), and none to Tab #3's line
    assert probs[0] > 0.1 and probs[2] < 1e-6
    with torch.no_grad():
        model.match_scale.bias.fill_(0.0)
    lp0 = score(model, policy.grammar, repeated(batch, 3), responses)
    assert lp0.logprobs[2, x_at[2]].exp().item() > 1e-3  # without the bias Tab #3 gets its share


def test_a_checkpoint_from_before_the_match_features_loads_without_them(tmp_path: Path) -> None:
    old = tiny(match=False, seed=2)
    loaded = loaded_without(old, tmp_path, "instruction_match")
    assert loaded.config.instruction_match is False
    assert not hasattr(loaded, "match_emb")
    policy = EmbeddedPolicy(loaded)
    batch = policy.batch([policy.inputs_for(OBS, [], None)])
    response = [_point(policy, 120, 170)]
    assert torch.equal(
        score(loaded, policy.grammar, batch, response).logprobs,
        score(old.eval(), policy.grammar, batch, response).logprobs,
    )
    assert FlywheelPolicyConfig().instruction_match is True
    # the features change what a model with them computes
    new = tiny(match=True, seed=2)
    assert not torch.equal(
        score(new.eval(), policy.grammar, batch, response).logprobs,
        score(old.eval(), policy.grammar, batch, response).logprobs,
    )
