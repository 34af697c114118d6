"""The embedded model's next-number pointer (modeling.py): the second coordinate of a point is the
number after the first in the element list; sampling and scoring agree with it on; checkpoints
written before it existed load without it and score exactly as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.rl.trainer_helpers import one_thread, png, tiny_config  # noqa: F401  (autouse fixture)
from workers.envs.base import Element, Observation
from workers.policy.embedded.configuration import FlywheelPolicyConfig
from workers.policy.embedded.generation import PromptBatch, generate, score
from workers.policy.embedded.modeling import FlywheelPolicyModel
from workers.policy.embedded.policy import EmbeddedPolicy, load_checkpoint, new_model
from workers.policy.embedded.tokenizer import FlywheelTokenizer

OBS = Observation(
    screenshot=png((0, 100, 200)),
    width=160,
    height=210,
    image_format="png",
    instruction="Click the button OK.",
    elements=(
        Element(1, "button", "Cancel", 100, 120, 40, 20),  # centre (120,130)
        Element(2, "button", "OK", 100, 160, 40, 20),  # centre (120,170): same x as Cancel
        Element(3, "a", "Help", 20, 40, 30, 10),  # centre (35,45)
    ),
)


def tiny(pointer: bool = True, seed: int = 0) -> FlywheelPolicyModel:
    cfg = tiny_config()
    cfg.next_number_pointer = pointer
    return new_model(FlywheelPolicyConfig(**cfg.to_dict()), seed=seed)


def test_next_number_map_points_from_each_position_to_the_following_number() -> None:
    policy = EmbeddedPolicy(tiny())
    batch = policy.batch([policy.inputs_for(OBS, [], None)])
    ids = batch.prompt_ids[0].tolist()
    tok = policy.tokenizer
    x_pos = [j for j, t in enumerate(ids) if t == tok.number_id(120)]
    assert len(x_pos) == 2  # both buttons share x = 120
    nxt = policy.model.next_number_map(batch.prompt_ids, batch.prompt_mask)[0].tolist()
    assert [ids[nxt[j]] for j in x_pos] == [tok.number_id(130), tok.number_id(170)]
    last_number = max(j for j, t in enumerate(ids) if tok.is_number(t))
    assert ids[last_number] == tok.number_id(45)
    assert nxt[last_number] == len(ids)  # nothing after the last number


def repeated(batch: PromptBatch, n: int) -> PromptBatch:
    """One prompt's batch repeated n times (n responses scored against it)."""
    return PromptBatch(
        *(t.expand(n, *t.shape[1:]) for t in (batch.pixel_values, batch.prompt_ids, batch.prompt_mask))
    )


def _point_response(policy: EmbeddedPolicy, x: int, y: int) -> list[int]:
    return policy.grammar.encode_response(f"Thought: \nAction: click(start_box='({x},{y})')")


def test_a_saturated_pointer_copies_the_number_after_the_one_just_copied() -> None:
    model = tiny()
    with torch.no_grad():  # always copy, always follow the pointer once a number is out
        model.copy_gate.bias.fill_(-30.0)
        model.pointer_gate.bias.fill_(30.0)
    policy = EmbeddedPolicy(model)
    batch = policy.batch([policy.inputs_for(OBS, [], None)])
    right, wrong = _point_response(policy, 35, 45), _point_response(policy, 35, 130)
    lp = score(model, policy.grammar, repeated(batch, 2), [right, wrong]).logprobs
    y_index = right.index(policy.tokenizer.number_id(45))
    assert lp[0, y_index].exp().item() == pytest.approx(1.0, abs=1e-4)
    assert lp[1, y_index].exp().item() < 1e-4
    # x = 120 appears twice: the pointer splits over the two elements by where the attention looked
    both = [_point_response(policy, 120, 130), _point_response(policy, 120, 170)]
    lp2 = score(model, policy.grammar, repeated(batch, 2), both).logprobs
    y_index = both[0].index(policy.tokenizer.number_id(130))
    assert (lp2[0, y_index].exp() + lp2[1, y_index].exp()).item() == pytest.approx(1.0, abs=1e-4)


def test_sampled_log_probs_equal_scored_ones_with_the_pointer() -> None:
    model = tiny(seed=1)
    with torch.no_grad():  # make numbers likely so the samples exercise the pointer
        model.copy_gate.bias.fill_(-3.0)
    policy = EmbeddedPolicy(model, seed=0)
    batch = policy.batch([policy.inputs_for(OBS, [], None)])
    out = generate(
        model, policy.grammar, batch, n=16, temperature=1.0, generator=torch.Generator().manual_seed(0)
    )[0]
    with_two_numbers = [g for g in out if sum(policy.tokenizer.is_number(t) for t in g.token_ids) >= 2]
    assert with_two_numbers, "no sample wrote a point"
    scored = score(
        model, policy.grammar, repeated(batch, len(out)), [g.token_ids for g in out], temperature=1.0
    )
    for row, g in enumerate(out):
        got = scored.logprobs[row, : len(g.token_ids)]
        assert torch.allclose(got, torch.tensor(g.logprobs), atol=1e-4), row


def loaded_without(model: FlywheelPolicyModel, path: Path, key: str) -> FlywheelPolicyModel:
    """`model` saved at `path` with `key` left out of its config.json (as the code before that
    config field wrote it), then loaded."""
    model.save_pretrained(path)
    config_path = path / "config.json"
    config = json.loads(config_path.read_text())
    del config[key]
    config_path.write_text(json.dumps(config))
    FlywheelTokenizer().save_pretrained(path)
    return load_checkpoint(path)[0]


def test_a_checkpoint_from_before_the_pointer_loads_without_it(tmp_path: Path) -> None:
    old = tiny(pointer=False, seed=2)
    loaded = loaded_without(old, tmp_path, "next_number_pointer")
    assert loaded.config.next_number_pointer is False
    assert not hasattr(loaded, "pointer_gate")
    policy = EmbeddedPolicy(loaded)
    batch = policy.batch([policy.inputs_for(OBS, [], None)])
    response = [_point_response(policy, 120, 130)]
    a = score(loaded, policy.grammar, batch, response).logprobs
    b = score(old.eval(), policy.grammar, batch, response).logprobs
    assert torch.equal(a, b)
    # a new config (no key given) has the pointer on
    assert FlywheelPolicyConfig().next_number_pointer is True
