"""The greedy answer and the most probable answers in one batched decode (workers.policy.ranking),
with the real embedded model (random weights from a small config): the greedy row is what
`generate` decodes at temperature 0; width 1 is the greedy search; beams are distinct, best first,
and each log-probability is exactly what `score` gives the same tokens at T = 1; over HTTP the
policy server answers vLLM's `use_beam_search` with the greedy answer first, and refuses malformed
requests with 400; rows that read one shared prefix cache decode as rows with a copy of it each."""

from __future__ import annotations

import io

import httpx
import pytest
import torch
from PIL import Image

from workers.envs.base import Element, Observation
from workers.policy.embedded.configuration import FlywheelPolicyConfig
from workers.policy.embedded.generation import generate, score
from workers.policy.embedded.modeling import shared_prefix_attention
from workers.policy.embedded.policy import EmbeddedPolicy, new_model
from workers.policy.openai_client import EMBEDDED, OpenAIPolicy
from workers.policy.prompts import EmbeddedInputs
from workers.policy.ranking import greedy_and_beams, propose_ranked
from workers.policy.server import start_server


def _observation() -> Observation:
    out = io.BytesIO()
    Image.new("RGB", (320, 200), (200, 210, 220)).save(out, format="JPEG")
    elements = tuple(
        Element(i, "button", f"Button {i}", float(20 + 70 * i), 40.0, 60.0, 30.0) for i in range(4)
    )
    return Observation(
        screenshot=out.getvalue(), width=320, height=200, instruction="Click Button 2.", elements=elements
    )


def _inputs(policy: EmbeddedPolicy) -> EmbeddedInputs:
    return policy.inputs_for(_observation(), [], None)


@pytest.fixture(scope="module")
def policy() -> EmbeddedPolicy:
    torch.set_num_threads(1)
    return EmbeddedPolicy(new_model(FlywheelPolicyConfig(max_thought=2, max_text=6), seed=4), seed=4)


def test_beams_are_distinct_sorted_and_scored_exactly_and_row_zero_is_the_greedy_decode(
    policy: EmbeddedPolicy,
) -> None:
    batch = policy.batch([policy.inputs_for(_observation(), [], None)])
    ranked = greedy_and_beams(policy.model, policy.grammar, batch, width=6)
    greedy = generate(policy.model, policy.grammar, batch, 1, 0.0)[0][0]
    assert ranked.greedy.token_ids == greedy.token_ids
    assert sum(ranked.greedy.logprobs) == pytest.approx(sum(greedy.logprobs), abs=1e-4)
    beams = [b.token_ids for b in ranked.beams]
    assert len(beams) == 6 and len({tuple(b) for b in beams}) == 6
    assert all(b[-1] == policy.tokenizer.eos_id for b in beams)
    sums = [sum(b.logprobs) for b in ranked.beams]
    assert sums == sorted(sums, reverse=True)
    rescored = score(policy.model, policy.grammar, policy.batch([_inputs(policy)] * 6), beams, 1.0)
    assert rescored.logprobs.sum(dim=1).tolist() == pytest.approx(sums, abs=1e-3)


def test_one_beam_is_the_greedy_search(policy: EmbeddedPolicy) -> None:
    batch = policy.batch([_inputs(policy)])
    ranked = greedy_and_beams(policy.model, policy.grammar, batch, width=1)
    assert [b.token_ids for b in ranked.beams] == [ranked.greedy.token_ids]


def test_past_the_budget_the_greedy_answer_is_still_complete(policy: EmbeddedPolicy) -> None:
    batch = policy.batch([_inputs(policy)])
    ranked = greedy_and_beams(policy.model, policy.grammar, batch, width=6, budget_s=0.0)
    full = greedy_and_beams(policy.model, policy.grammar, batch, width=6)
    assert ranked.greedy.token_ids == full.greedy.token_ids and ranked.greedy.finished
    assert len(ranked.beams) <= 6


def test_over_http_beam_search_gives_the_greedy_answer_first_and_bad_requests_get_400(
    policy: EmbeddedPolicy,
) -> None:
    obs = _observation()
    local_greedy, local_beams = propose_ranked(policy, obs, [], None, width=4, budget_s=None)
    server, _ = start_server(policy, checkpoint="")
    client = OpenAIPolicy(server.url, "flywheel-embedded", profile=EMBEDDED)
    try:
        greedy, beams = client.propose_ranked(obs, [], None, width=4)
        assert greedy.raw_text == local_greedy.raw_text
        assert greedy.logprob_sum == pytest.approx(local_greedy.logprob_sum, abs=1e-3)
        # the server's beams (its time budget may drop some under load) are the model's, best first
        assert {b.raw_text for b in beams} <= {b.raw_text for b in local_beams} and beams
        sums = [b.logprob_sum for b in beams]
        assert sums == sorted(sums, reverse=True)  # type: ignore[type-var]
        messages, _ = client.build_messages(obs, [], None)
        for extra, said in [
            ({"use_beam_search": True}, "greedy_first"),
            ({"use_beam_search": "yes", "greedy_first": True}, "use_beam_search"),
            ({"use_beam_search": True, "greedy_first": 1}, "greedy_first"),
        ]:
            r = httpx.post(f"{server.url}/v1/chat/completions", json={"messages": messages, "n": 2, **extra})
            assert r.status_code == 400 and said in r.json()["error"]["message"], r.text
    finally:
        client.client.close()
        server.shutdown()
        server.server_close()


def test_shared_prefix_attention_is_attention_over_the_prefix_copied_to_every_row() -> None:
    torch.manual_seed(0)
    groups, rows, heads, t, own, p, dh = 2, 3, 2, 2, 3, 5, 4
    q = torch.randn(groups * rows, heads, t, dh)
    k, v = torch.randn(groups * rows, heads, own, dh), torch.randn(groups * rows, heads, own, dh)
    shared_k, shared_v = torch.randn(groups, heads, p, dh), torch.randn(groups, heads, p, dh)
    mask = torch.rand(groups * rows, t, p + own) > 0.3
    mask[..., 0] = True  # every query may attend somewhere
    copied_k = torch.cat([shared_k.repeat_interleave(rows, dim=0), k], dim=2)
    copied_v = torch.cat([shared_v.repeat_interleave(rows, dim=0), v], dim=2)
    expected = torch.nn.functional.scaled_dot_product_attention(
        q, copied_k, copied_v, attn_mask=mask[:, None]
    )
    got = shared_prefix_attention(q, k, v, (shared_k, shared_v), mask)
    assert torch.allclose(got, expected, atol=1e-6)


def test_rows_reading_a_shared_prefix_decode_as_rows_with_their_own_copy(policy: EmbeddedPolicy) -> None:
    """Two prompts of different lengths (padding) × 3 rows each, two decode calls: the shared prefix
    gives the log-probs and values of copied prefixes, and the rows' cache holds their tokens only."""
    obs = _observation()
    shorter = Observation(obs.screenshot, obs.width, obs.height, instruction="Go.", elements=obs.elements[:1])
    batch = policy.batch([_inputs(policy), policy.inputs_for(shorter, [], None)])
    model, tok = policy.model, policy.tokenizer
    with torch.inference_mode():
        prefix = model.encode_prefix(batch.pixel_values, batch.prompt_ids, batch.prompt_mask)
        first = torch.tensor([[tok.bos_id, tok.number_offset + n] for n in range(6)])
        then = torch.tensor([[tok.number_offset + 7 + n] for n in range(6)])
        copied, shared = prefix.repeat(3), prefix.share(3)
        lp_c, v_c, past_c = model.decode(copied, first, offset=0)
        lp_s, v_s, past_s = model.decode(shared, first, offset=0)
        lp_c2, _, _ = model.decode(copied, then, offset=2, past=past_c)
        lp_s2, _, _ = model.decode(shared, then, offset=2, past=past_s)
    assert torch.allclose(lp_s, lp_c, atol=1e-5) and torch.allclose(v_s, v_c, atol=1e-5)
    assert torch.allclose(lp_s2, lp_c2, atol=1e-5)
    assert past_s.kv[0][0].shape[2] == 2 and past_c.kv[0][0].shape[2] == prefix.key_mask.shape[1] + 2
    with pytest.raises(ValueError, match="shared already"):
        shared.share(2)
