"""`sft_train` on tiny examples: the loss falls, the metrics are JSON, runs resume, the checkpoint
loads, targets outside the grammar are refused, and only response tokens carry loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from workers.policy.base import PolicyError
from workers.policy.embedded.configuration import FlywheelPolicyConfig
from workers.policy.embedded.policy import EmbeddedPolicy, new_model
from workers.policy.prompts import EmbeddedInputs
from workers.policy.sft import SFTExample, policy_from_result, sft_train

TINY = {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64, "max_thought": 24, "max_text": 12}
EXAMPLES = [
    SFTExample(EmbeddedInputs('Instruction: press A\nElements:\n[0] button "A" (12,30)', None),
               "Thought: A.\nAction: click(start_box='(12,30)')"),
    SFTExample(EmbeddedInputs('Instruction: type hi\nElements:\n[0] input:text "" (50,60)', None),
               "Thought: Type.\nAction: type(content='hi')"),
]  # fmt: skip


def _model() -> torch.nn.Module:
    return new_model(FlywheelPolicyConfig(flywheel_version="tiny-0", **TINY), seed=3)


def test_loss_falls_metrics_are_json_and_runs_resume(tmp_path: Path) -> None:
    out = tmp_path / "sft"
    first = sft_train(_model(), EXAMPLES, out, steps=12, lr=1e-2, batch_size=2, version="tiny-1", log_every=4)
    json.dumps(first)  # the metrics are plain JSON (no tensors or models)
    assert first["steps"] == 12 and first["parent"] == "tiny-0" and first["version"] == "tiny-1"
    assert first["loss_last"] < first["loss_first"]
    assert (out / "trainer_state.pt").is_file() and (out / "model.safetensors").is_file()
    resumed = sft_train(str(tmp_path / "unused"), EXAMPLES, out, steps=16, lr=1e-2, batch_size=2, log_every=4)
    # only the new chunk ran (steps 12..15: logged at 12 and at the last step 15)
    assert resumed["steps"] == 16 and len(resumed["losses"]) == 2
    assert resumed["version"] == "tiny-1" and resumed["parent"] == "tiny-0"
    assert policy_from_result(resumed).model_version == "tiny-1"


def test_stop_request_saves_a_partial_checkpoint(tmp_path: Path) -> None:
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 3

    result = sft_train(_model(), EXAMPLES, tmp_path / "s", steps=50, batch_size=2, should_stop=stop)
    assert result["stopped"] is True and result["steps"] == 3
    assert EmbeddedPolicy.from_pretrained(tmp_path / "s").model_version == result["version"]


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="no SFT examples"):
        sft_train(_model(), [], tmp_path / "a", steps=1)
    with pytest.raises(PolicyError, match="give steps or epochs"):
        sft_train(_model(), EXAMPLES, tmp_path / "b")
    bad = SFTExample(EmbeddedInputs("x", None), "Action: launch_rockets()")
    with pytest.raises(PolicyError, match="example 0"):
        sft_train(_model(), [bad], tmp_path / "c", steps=1)


def test_prompt_tokens_carry_no_loss() -> None:
    """The loss is the NLL of the response only: the prompt's own tokens are never targets, so a
    prompt that repeats the response verbatim does not change which tokens are scored."""
    from workers.policy.embedded.generation import score
    from workers.policy.embedded.grammar import Grammar
    from workers.policy.embedded.tokenizer import FlywheelTokenizer
    from workers.policy.sft import _batch, _encode

    model, tok = _model(), FlywheelTokenizer()
    grammar = Grammar(tok, TINY["max_thought"], TINY["max_text"])
    encoded = _encode(EXAMPLES, model, tok)
    batch, responses = _batch(encoded, tok.pad_id)
    scored = score(model, grammar, batch, responses)
    assert scored.mask.sum(dim=1).tolist() == [len(r) for r in responses]
    assert [len(e.prompt) for e in encoded] != [len(r) for r in responses]


def test_a_checkpoint_whose_thought_is_capped_at_zero_acts_directly(tmp_path: Path) -> None:
    """bench learn caps the SFT start's thought at 0 tokens in its config: everything that loads the
    checkpoint (policy server, trainer, evaluation) then writes and accepts no thought at all."""
    from workers.policy.embedded.grammar import GrammarError
    from workers.policy.embedded.tokenizer import FlywheelTokenizer

    model = _model()
    sft_train(model, EXAMPLES, tmp_path / "sft", steps=4, lr=1e-2, batch_size=2)
    model.config.max_thought = 0
    model.save_pretrained(tmp_path / "capped")
    FlywheelTokenizer().save_pretrained(tmp_path / "capped")
    policy = EmbeddedPolicy.from_pretrained(tmp_path / "capped", seed=0)
    candidates = policy.generate([EXAMPLES[0].inputs], n=8, temperature=1.0)[0][0]
    texts = [policy.tokenizer.decode(g.token_ids) for g in candidates]
    assert all(t.startswith("Thought: \nAction: ") for t in texts), texts
    assert policy.grammar.encode_response("Thought: \nAction: click(start_box='(12,30)')")
    with pytest.raises(GrammarError, match="exceeds the grammar limits"):
        policy.grammar.encode_response("Thought: A.\nAction: click(start_box='(12,30)')")
