"""The LLM-as-judge verifier over real HTTP. The judge here is a small local OpenAI-compatible server
standing in for a judge VLM (none can run here): it really reads the request — the final screenshot's
colour and the last action — so the verdict depends on what the client sent."""

from __future__ import annotations

import base64
import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image

from workers.policy.judge import JudgeError, JudgeStep, LLMJudge, judge_messages, parse_verdict


def _png(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 40), color).save(out, "PNG")
    return out.getvalue()


class _Judge(BaseHTTPRequestHandler):
    fail_first = 0
    reply: str | None = None
    seen: list[dict] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        if type(self).fail_first > 0:
            type(self).fail_first -= 1
            self._send(503, {"error": {"message": "warming up"}})
            return
        content = body["messages"][1]["content"]
        images = [c["image_url"]["url"] for c in content if c["type"] == "image_url"]
        texts = "\n".join(c["text"] for c in content if c["type"] == "text")
        final = Image.open(io.BytesIO(base64.b64decode(images[-1].split(",", 1)[1]))).convert("RGB")
        r, g, _b = final.getpixel((10, 10))
        ok = g > 200 and r < 100 and "finished" in texts
        text = type(self).reply or (
            f"Verdict: {'success' if ok else 'failure'}\nReason: final screen {'green' if g > 200 else 'not green'}\n"
            f"Correct steps: {texts.count('Step ')}"
        )
        self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
                         "model": "judge-test"})  # fmt: skip

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def judge_url() -> Iterator[str]:
    _Judge.fail_first, _Judge.reply, _Judge.seen = 0, None, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _episode(final: tuple[int, int, int], last_action: str = "finished(content='done')") -> list[JudgeStep]:
    steps = [
        JudgeStep(f"step {i}", f"click(point='<point>{i} {i}</point>')", _png((200, 0, 0)), "png")
        for i in range(7)
    ]
    return [
        *steps,
        JudgeStep("done", last_action, _png((200, 0, 0)), "png"),
        JudgeStep("", "", _png(final), "png"),
    ]


def test_judge_reads_the_final_screen_and_history(judge_url: str) -> None:
    judge = LLMJudge(judge_url, model="judge")
    good = judge.judge("Turn the screen green", _episode((0, 255, 0)))
    assert good.success and good.reward == 1.0 and good.correct_steps == 8 and "green" in good.reason
    bad = judge.judge("Turn the screen green", _episode((255, 255, 255)))
    assert not bad.success and bad.reward == 0.0
    unfinished = judge.judge("Turn the screen green", _episode((0, 255, 0), last_action="wait()"))
    assert not unfinished.success
    # Every step's text went over, but only the last five screenshots.
    content = _Judge.seen[0]["messages"][1]["content"]
    assert sum(c["type"] == "image_url" for c in content) == 5
    assert sum(c["type"] == "text" and c["text"].startswith("Step ") for c in content) == 8


def test_transient_errors_are_retried_and_bad_answers_are_clear_errors(judge_url: str) -> None:
    _Judge.fail_first = 1
    judge = LLMJudge(judge_url, model="judge", max_retries=2)
    assert judge.judge("Turn the screen green", _episode((0, 255, 0))).success
    assert len(_Judge.seen) == 2
    _Judge.reply = "I think it probably worked?"
    with pytest.raises(JudgeError, match="no 'Verdict") as info:
        judge.judge("Turn the screen green", _episode((0, 255, 0)))
    assert info.value.raw == "I think it probably worked?"


def test_unreachable_judge_is_a_judge_error() -> None:
    judge = LLMJudge("http://127.0.0.1:9/v1", model="judge", max_retries=0, timeout_s=2)
    with pytest.raises(JudgeError, match="failed"):
        judge.judge("anything", _episode((0, 255, 0)))
    with pytest.raises(ValueError, match="http"):
        LLMJudge("ftp://x", model="judge")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Verdict: success\nReason: ok\nCorrect steps: 3", (True, "ok", 3)),
        ("verdict = FAILURE", (False, "", None)),
        ("V: 1", (True, "", None)),
        ("V: 0\nCorrect steps: 99", (False, "", 4)),
        ('{"success": true, "reason": "r", "correct_steps": 2}', (True, "r", 2)),
    ],
)
def test_verdict_formats(text: str, expected: tuple) -> None:
    assert parse_verdict(text, num_steps=4) == expected


@pytest.mark.parametrize("text", ["", "success!", '{"success": "yes"}', "{not json"])
def test_answers_without_a_verdict_raise(text: str) -> None:
    with pytest.raises(JudgeError):
        parse_verdict(text)


def test_zero_screenshots_sends_text_only() -> None:
    messages = judge_messages("t", _episode((0, 255, 0)), max_screenshots=0)
    assert all(c["type"] == "text" for c in messages[1]["content"])
