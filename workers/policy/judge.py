"""LLM-as-judge verifier / generative outcome reward model (seed 000 §2.5.1, seed 004 §2.2).

For tasks no program can check (open-ended web or desktop goals), a judge model reads the task,
the whole text history (every step's thought and action) and the last K screenshots (default 5),
and answers with a verdict. Any OpenAI-compatible server works: vLLM serving a judge VLM in
production, or any local server that speaks `/v1/chat/completions`.

The judge must answer in this format (the system prompt says so):

    Verdict: success            (or: failure)
    Reason: <one sentence>
    Correct steps: <k>          (optional: how many leading steps were right)

`V: 1` / `V: 0` (with `PREFIX: k` for the correct steps) and a JSON object
`{"success": true, "reason": ..., "correct_steps": k}` are accepted too. Anything else raises
`JudgeError` with the judge's text, never a guessed verdict. Plain Python: no Django.

This is the one judge of the platform: the RL engine's outcome reward for tasks without a verifier
(rl_control.engine.judging) and the flywheel's V(s) validator (webapp.flywheel.services.validation)
both call `LLMJudge`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from workers.policy.openai_client import OpenAIClient
from workers.policy.prompts import data_url

DEFAULT_MAX_SCREENSHOTS = 5

JUDGE_SYSTEM = (
    "You judge whether a GUI agent completed its task on a computer. You get the task, every step "
    "the agent took (its thought and action) and screenshots of the last steps, the final screen "
    "last. Answer in exactly this format:\n"
    "Verdict: success or failure\n"
    "Reason: one sentence\n"
    "Correct steps: the number of leading steps that were right"
)


class JudgeError(RuntimeError):
    """The judge could not give a verdict (unreachable, or its answer has none); `raw` keeps its text."""

    def __init__(self, message: str, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


@dataclass(frozen=True)
class JudgeStep:
    """One step as the judge sees it. `screenshot` is the screen the step acted on (or the final
    screen for the extra last entry), JPEG or PNG bytes."""

    thought: str
    action: str
    screenshot: bytes | None = None
    image_format: str = "jpeg"


@dataclass(frozen=True)
class JudgeVerdict:
    success: bool
    reason: str
    correct_steps: int | None
    raw: str
    model_version: str

    @property
    def reward(self) -> float:
        return 1.0 if self.success else 0.0


_VERDICT = re.compile(
    r"^\s*(?:verdict|v)\s*[:=]\s*(success|failure|succeeded|failed|1|0|yes|no)\b", re.I | re.M
)
_REASON = re.compile(r"^\s*reason\s*[:=]\s*(.+)$", re.I | re.M)
_CORRECT = re.compile(r"^\s*(?:correct\s+steps|prefix)\s*[:=]\s*(\d+)", re.I | re.M)
_TRUE = {"success", "succeeded", "1", "yes"}


def parse_verdict(text: str, num_steps: int | None = None) -> tuple[bool, str, int | None]:
    """(success, reason, correct_steps) from a judge's answer; JudgeError when it has no verdict."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError as exc:
            raise JudgeError(f"the judge's JSON does not parse: {exc}", text) from exc
        if not isinstance(data, dict) or not isinstance(data.get("success"), bool):
            raise JudgeError("the judge's JSON has no boolean 'success'", text)
        correct = data.get("correct_steps")
        return data["success"], str(data.get("reason") or ""), _clamp(correct, num_steps)
    verdict = _VERDICT.search(text)
    if verdict is None:
        raise JudgeError(f"the judge's answer has no 'Verdict: success|failure' line: {text[:200]!r}", text)
    reason = _REASON.search(text)
    correct = _CORRECT.search(text)
    return (
        verdict.group(1).lower() in _TRUE,
        reason.group(1).strip() if reason else "",
        _clamp(int(correct.group(1)) if correct else None, num_steps),
    )


def _clamp(value: object, num_steps: int | None) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return None
    return min(value, num_steps) if num_steps is not None else value


def judge_messages(
    instruction: str,
    steps: Sequence[JudgeStep],
    max_screenshots: int = DEFAULT_MAX_SCREENSHOTS,
    notes: Sequence[str] = (),
) -> list[dict[str, object]]:
    """Chat messages for the judge: all step texts, screenshots of the last `max_screenshots` steps,
    then `notes` (e.g. the verifier's reward when there is one)."""
    if max_screenshots < 0:
        raise ValueError("max_screenshots must be ≥ 0")
    with_image = {i for i, s in enumerate(steps) if s.screenshot} if max_screenshots else set()
    keep = set(sorted(with_image)[-max_screenshots:]) if max_screenshots else set()
    content: list[dict[str, object]] = [{"type": "text", "text": f"Task: {instruction}\n"}]
    for i, step in enumerate(steps):
        text = (
            f"Step {i + 1}:\nThought: {step.thought}\nAction: {step.action}"
            if step.action
            else "Final screen:"
        )
        content.append({"type": "text", "text": text})
        if i in keep and step.screenshot:
            url = data_url(step.screenshot, step.image_format)
            content.append({"type": "image_url", "image_url": {"url": url}})
    content += [{"type": "text", "text": note} for note in notes]
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": content}]


class LLMJudge:
    """Ask an OpenAI-compatible judge model for a verdict. `base_url` is the server root or its
    `/v1` URL; transient failures are retried by the client (backoff), the rest raise JudgeError."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        max_screenshots: int = DEFAULT_MAX_SCREENSHOTS,
        timeout_s: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"the judge needs an http(s) URL, got {base_url!r}")
        self.client = OpenAIClient(base_url, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries)
        self.model = model
        self.max_screenshots = max_screenshots

    def judge(self, instruction: str, steps: Sequence[JudgeStep], notes: Sequence[str] = ()) -> JudgeVerdict:
        from workers.policy.base import PolicyError

        messages = judge_messages(instruction, steps, self.max_screenshots, notes)
        try:
            result = self.client.chat(messages, self.model, n=1, temperature=0.0, logprobs=False)
        except PolicyError as exc:
            raise JudgeError(f"the judge at {self.client.http.base_url} failed: {exc}") from exc
        try:
            text = str(result.body["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError) as exc:
            raise JudgeError(f"the judge's reply has no message: {str(result.body)[:200]}") from exc
        acted = sum(1 for s in steps if s.action)
        success, reason, correct = parse_verdict(text, acted)
        return JudgeVerdict(success, reason, correct, text, result.model_version)

    def close(self) -> None:
        self.client.close()
