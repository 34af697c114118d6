"""Checkpoint merging (θ = Σ α_k θ_k) and the value-pretraining stop rule."""

import json

import pytest
import torch

from workers.rl.config import PPOConfig
from workers.rl.merge import merge_state_dicts
from workers.rl.value_pretrain import ValuePretrainMonitor


def test_merge_weighted_average() -> None:
    a = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor(4.0, dtype=torch.bfloat16), "step": torch.tensor(7)}
    b = {"w": torch.tensor([3.0, 6.0]), "b": torch.tensor(0.0, dtype=torch.bfloat16), "step": torch.tensor(7)}
    merged = merge_state_dicts([a, b], [0.25, 0.75])
    # 0.25·[1, 2] + 0.75·[3, 6] = [2.5, 5.0]; 0.25·4 = 1
    torch.testing.assert_close(merged["w"], torch.tensor([2.5, 5.0]))
    assert merged["b"].dtype == torch.bfloat16 and float(merged["b"]) == 1.0
    assert int(merged["step"]) == 7
    assert torch.equal(merge_state_dicts([a], [1.0])["w"], a["w"])


def test_merge_rejects_mismatches() -> None:
    a = {"w": torch.zeros(2)}
    with pytest.raises(ValueError, match="sum to 1"):
        merge_state_dicts([a, a], [0.5, 0.6])
    with pytest.raises(ValueError, match="≥ 0"):
        merge_state_dicts([a, a], [1.5, -0.5])
    with pytest.raises(ValueError, match="weights"):
        merge_state_dicts([a, a], [1.0])
    with pytest.raises(ValueError, match="names"):
        merge_state_dicts([a, {"v": torch.zeros(2)}], [0.5, 0.5])
    with pytest.raises(ValueError, match="shape"):
        merge_state_dicts([a, {"w": torch.zeros(3)}], [0.5, 0.5])
    with pytest.raises(ValueError, match="non-floating"):
        merge_state_dicts([{"s": torch.tensor(1)}, {"s": torch.tensor(2)}], [0.5, 0.5])
    with pytest.raises(ValueError, match="nothing"):
        merge_state_dicts([], [])


def test_value_pretrain_converges_after_patience_with_good_ev() -> None:
    mon = ValuePretrainMonitor(target_ev=0.8, patience=2, max_updates=100)
    assert mon.record(1.0, 0.1) is None
    assert mon.record(0.5, 0.5) is None  # improving
    assert mon.record(0.5, 0.9) is None  # 1 update without improvement
    assert mon.record(0.6, 0.9) == "converged"  # 2 updates without improvement and EV ≥ 0.8
    assert mon.updates == 4 and mon.best_loss == 0.5


def test_value_pretrain_low_ev_keeps_going_until_max_updates() -> None:
    mon = ValuePretrainMonitor(target_ev=0.8, patience=1, max_updates=3)
    assert mon.record(1.0, 0.2) is None
    assert mon.record(1.0, float("nan")) is None  # flat loss but EV undefined
    assert mon.record(1.0, 0.5) == "max_updates"
    assert ValuePretrainMonitor(max_updates=0).done == "max_updates"
    with pytest.raises(ValueError):
        mon.record(float("nan"), 0.5)


def test_value_pretrain_round_trip_and_config() -> None:
    mon = ValuePretrainMonitor.from_config(PPOConfig(value_pretrain_patience=3))
    assert mon.patience == 3 and mon.max_updates == 20  # within the default 200-update budget
    fresh = ValuePretrainMonitor.from_dict(json.loads(json.dumps(mon.to_dict(), allow_nan=False)))
    assert fresh.to_dict() == mon.to_dict()
    mon.record(0.4, 0.7)
    restored = ValuePretrainMonitor.from_dict(json.loads(json.dumps(mon.to_dict(), allow_nan=False)))
    assert restored.to_dict() == mon.to_dict()
