"""The starter model (issue 19 item 8): the embedded policy a fresh install proposes and trains with.

Recipe (STARTER_RECIPE): action-only scripted-expert demonstrations (workers.policy.expert) on a few
seeds of each demo MiniWoB++ task, a short SFT of a fresh embedded model on them (workers.policy.sft),
its thought capped at 0 tokens (a short SFT cannot write a useful thought; capped, every candidate
is its action), and greedy success measured on held-out seeds of every task
(workers.policy.evaluate). A few CPU minutes once; the result is cached in a
directory named by the recipe's hash, so every later install on the machine copies it.

    python -m workers.policy.starter OUT_DIR     (what `manage.py policy_starter` calls)
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

STARTER_RECIPE: dict[str, Any] = {
    "tasks": ["click-test", "click-button", "click-link", "focus-text", "enter-text", "click-dialog",
              "click-tab", "click-checkboxes"],
    "demo_seeds": [0, 1, 2],
    # Action-only demonstrations learn in a few steps (benchmarks/HISTORY.md: 33-36 % held-out after
    # 10-70 steps, against 30 % after 120 steps with thoughts) and cost a third per step; the thought
    # is capped at 0 tokens anyway. Measured here: ~4.4 s of CPU per step with thoughts.
    "demo_thoughts": False,
    "sft_steps": 20,
    "lr": 1e-3,
    "batch_size": 16,
    "seed": 0,
    "max_thought": 0,
    "eval_seeds": [5000, 5001, 5002, 5003, 5004],
}  # fmt: skip
RESULT_FILE = "starter.json"


def recipe_hash(recipe: dict[str, Any] = STARTER_RECIPE) -> str:
    """Names the recipe and the code that decides what the model is and reads (the embedded package,
    the embedded prompt and element list, the page script that extracts the elements): a change to
    either trains a new starter; other edits of the policy code keep the cache."""
    import inspect

    from workers.envs.browser.dom import ELEMENTS_JS
    from workers.policy import prompts

    here = Path(__file__).resolve().parent
    code = b"".join(p.read_bytes() for p in sorted((here / "embedded").glob("*.py")))
    code += "".join(
        inspect.getsource(f) for f in (prompts.build_embedded_prompt, prompts.format_elements)
    ).encode()
    code += ELEMENTS_JS.encode()
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode() + code)
    return digest.hexdigest()[:12]


def train_starter(
    out_dir: Path, recipe: dict[str, Any] = STARTER_RECIPE, version: str = "starter"
) -> dict[str, Any]:
    """Train the starter into `out_dir` (a checkpoint directory) and measure it; returns the figures,
    also written to `out_dir/starter.json`."""
    import torch

    from workers.policy.embedded.policy import EmbeddedPolicy, new_model
    from workers.policy.evaluate import evaluate
    from workers.policy.expert import collect_demonstrations
    from workers.policy.sft import save_checkpoint, sft_train

    torch.manual_seed(recipe["seed"])
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    examples = collect_demonstrations(recipe["tasks"], recipe["demo_seeds"], thoughts=recipe["demo_thoughts"])
    timings["demos_s"] = time.perf_counter() - t0
    model = new_model(seed=recipe["seed"])
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="starter-sft-") as tmp:
        sft = sft_train(model, examples, Path(tmp) / "sft", steps=recipe["sft_steps"], lr=recipe["lr"],
                        batch_size=recipe["batch_size"], seed=recipe["seed"])  # fmt: skip
    timings["sft_s"] = time.perf_counter() - t0
    if recipe.get("max_thought") is not None:
        model.config.max_thought = int(recipe["max_thought"])
    model.train(False)
    t0 = time.perf_counter()
    report = evaluate(EmbeddedPolicy(model, seed=0), recipe["tasks"], recipe["eval_seeds"])
    timings["eval_s"] = time.perf_counter() - t0
    figures = {
        "recipe": recipe,
        "recipe_hash": recipe_hash(recipe),
        "examples": len(examples),
        "sft_loss_last": sft.get("loss_last"),
        "success_mean": round(report.mean, 4),
        "success_per_task": {k: round(v, 4) for k, v in report.per_task.items()},
        "eval_episodes": len(report.episodes),
        "timings_s": {k: round(v, 1) for k, v in timings.items()},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    save_checkpoint(model, out_dir, version, "", {"starter": figures})
    (out_dir / RESULT_FILE).write_text(json.dumps(figures, indent=2))
    return figures


def cached_starter(cache_root: Path, recipe: dict[str, Any] = STARTER_RECIPE) -> tuple[Path, dict[str, Any]]:
    """The starter of `recipe` from `cache_root/starter-<hash>`, trained there first if missing (into
    a temporary directory renamed at the end, so a half-trained one is never used)."""
    target = cache_root / f"starter-{recipe_hash(recipe)}"
    result = target / RESULT_FILE
    if result.is_file() and (target / "model.safetensors").is_file():
        return target, json.loads(result.read_text())
    cache_root.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=cache_root))
    try:
        figures = train_starter(partial, recipe, version=target.name)
        if target.exists():  # another install finished first: keep theirs
            shutil.rmtree(partial, ignore_errors=True)
            return target, json.loads(result.read_text())
        partial.rename(target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return target, figures


if __name__ == "__main__":
    out = Path(sys.argv[1])
    print(json.dumps(train_starter(out), indent=2))
