"""The annotator's journey in Chromium on `make up`'s stack: a desktop task on the live desktop —
the live screen as large as the window allows (1440×960 and 1280×720), candidates drawn on it,
accept, edit, override, take-over in and out with Alt+T, finish — then the stored result beside the
screen captured at Finish; on the way, think-aloud from a noisy room makes the recorder say so."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.journeys import (
    JOURNEY_MARKS,
    VIEWPORT,
    People,
    assert_live_canvas_fills_the_screen_area,
    assert_screen_as_large_as_the_window_allows,
    box_of,
    harmless_candidate,
    policy_ready,
    screen_point,
    session_state,
    session_steps,
    task_id,
    wait_candidates,
)
from tests.e2e.live_stack import LiveStack
from workers.asr.synth import add_noise, generate_session, split_into_chunks

pytestmark = JOURNEY_MARKS


def test_annotator_annotates_a_desktop_task_live_and_sees_the_result(
    live_stack: LiveStack, people: People, shots: Path
) -> None:
    policy_ready(live_stack)
    page = people.page("annotator")
    page.goto(f"{live_stack.base_url}/workspace/")
    # fw-os-001-make-dirs: "Create a directory named 'projects' in my home directory, with a
    # subdirectory named 'flywheel' inside it." (demo pool, checked by the desktop's verifier)
    page.get_by_test_id(f"start-{task_id(live_stack, 'fw-os-001-make-dirs')}").click()
    expect(page).to_have_url(re.compile(r"/workspace/\d+/$"), timeout=120_000)
    sid = int(page.url.rstrip("/").rsplit("/", 1)[1])
    state = session_state(live_stack, "annotator", sid)
    assert state["task"]["env_kind"] == "desktop"
    screen = (state["observation"]["width"], state["observation"]["height"])
    expect(page.get_by_test_id("connection")).to_have_attribute("data-status", "open", timeout=30_000)

    # The live desktop is the screen area, with the candidates drawn on it.
    expect(page.locator("[data-testid=live-screen] canvas")).to_be_visible(timeout=60_000)
    state = wait_candidates(live_stack, "annotator", sid, page)
    expect(page.get_by_test_id("overlay").locator(".ov-cand")).to_have_count(
        len(state["candidates"]["items"])
    )
    assert_live_canvas_fills_the_screen_area(page, shots, "desktop-live-candidates", screen)
    # 1440×960: the navigation folded, the 1280×800 desktop takes the area's width (was 718×449).
    assert box_of(page, "[data-testid=screen]")["width"] >= 900
    # A short window: the screen takes its height, the aspect kept, markers still on it.
    page.set_viewport_size({"width": 1280, "height": 720})
    assert_live_canvas_fills_the_screen_area(page, shots, "desktop-live-1280x720", screen)
    expect(page.get_by_test_id("overlay").locator(".ov-cand")).to_have_count(
        len(state["candidates"]["items"])
    )
    page.set_viewport_size(VIEWPORT)
    assert_live_canvas_fills_the_screen_area(page, shots, "desktop-live-1440x960", screen)

    # Thinking aloud in a noisy room: a chunk of speech 13 dB above white + pink noise goes up as the
    # recorder sends one; the live pass measures the room and the recorder tells the annotator.
    noisy = add_noise(
        generate_session(seed=41, n_steps=3, voice="en-us", speed_wpm=160, start_clock=0.0), 13.0, 41
    )
    chunk = split_into_chunks(noisy, 10.0, ("webm",))[0]
    with live_stack.api("annotator") as api:
        clock = api.get(f"/api/annotation/sessions/{sid}/thinkaloud/").json()["server_clock"]
        time.sleep(max(0.0, 11.0 - clock))  # the chunk ends before now on the session clock
        answer = api.put(
            f"/api/annotation/sessions/{sid}/thinkaloud/chunks/0/", params={"start_clock": max(clock, 11.0) - 11.0},
            content=chunk.data, headers={"Content-Type": "audio/webm"},
        )  # fmt: skip
        assert answer.status_code == 201, answer.text
    expect(page.get_by_test_id("record-noise")).to_contain_text("dB above it", timeout=90_000)
    page.get_by_test_id("recorder").screenshot(path=str(shots / "desktop-noisy-room.png"))

    # Override: a click on the live screen becomes the action at that screen pixel; send it.
    page.mouse.click(*screen_point(page, screen, 400, 300))
    action = page.locator("#ws-action")
    expect(action).to_have_value("click(start_box='(400,300)')")
    page.locator("#ws-thought").fill("Focus the terminal first.")
    action.press("Enter")
    expect(page.get_by_test_id("step-0")).to_contain_text("overridden", timeout=60_000)

    # Accept: the first screen (of a few) that offers a harmless candidate; each refusal is an
    # override that moves on to a new screen.
    accepted: int | None = None
    for attempt in range(4):
        state = wait_candidates(live_stack, "annotator", sid, page)
        accepted = harmless_candidate(state)
        n = len(state["steps"])
        if accepted is not None:
            page.keyboard.press(str(accepted + 1))
        else:
            page.mouse.click(*screen_point(page, screen, 420 + 10 * attempt, 300))
            page.locator("#ws-thought").fill("Keep the terminal focused.")
            action.press("Enter")
        expect(page.get_by_test_id(f"step-{n}")).to_be_visible(timeout=60_000)
        if accepted is not None:
            expect(page.get_by_test_id(f"step-{n}")).to_contain_text(f"accepted {accepted + 1}")
            break
    assert accepted is not None, "no harmless candidate in 4 screens"

    # Edit: candidate 1's thought and action changed before it runs.
    state = wait_candidates(live_stack, "annotator", sid, page)
    n = len(state["steps"])
    if state["candidates"]["status"] == "ready":
        page.get_by_test_id("candidate-0").get_by_role("button", name="Edit").click()
        expect(page.locator("#ws-action")).to_be_visible()
        page.locator("#ws-thought").fill("The terminal is where the command goes.")
        convention = state["candidates"]["items"][0]["convention"]
        point = "(400,300)" if convention == "screen" else "(312,375)"
        action.fill(f"click(start_box='{point}')")
        action.press("Enter")
        expect(page.get_by_test_id(f"step-{n}")).to_contain_text("edited 1", timeout=60_000)
        n += 1

    # Take-over in with Alt+T: the desktop takes the input, the overlay lets it through.
    page.keyboard.press("Alt+t")
    expect(page.get_by_test_id("mode")).to_have_attribute("data-mode", "takeover")
    assert_live_canvas_fills_the_screen_area(page, shots, "desktop-takeover", screen)
    page.mouse.click(*screen_point(page, screen, 400, 300))
    typed = "mkdir -p projects/flywheel"
    page.keyboard.type(typed, delay=30)
    page.keyboard.press("Enter")
    time.sleep(1.5)
    # ... and out with the same Alt+T: it types nothing into the desktop and records no step.
    page.keyboard.press("Alt+t")
    expect(page.get_by_test_id("mode")).to_have_attribute("data-mode", "proposal")
    expect(page.get_by_test_id("banner")).to_contain_text("from your take-over", timeout=60_000)
    steps = session_steps(live_stack, "annotator", sid)
    takeover = [s for s in steps[n:] if s["decision"] == "takeover"]
    assert takeover, steps
    texts = " ".join(s["action_text"] for s in takeover)
    assert typed in texts, texts
    assert typed + "t" not in texts and "content='t'" not in texts, texts  # the toggle typed nothing
    assert re.search(r"click\(start_box='\((39\d|40\d),(29\d|30\d)\)'\)", texts), texts  # the pixel clicked
    page.screenshot(path=str(shots / "desktop-after-takeover.png"))

    # Finish: the session submits and the page shows the stored result.
    page.get_by_role("button", name="Finish with answer").click()
    page.locator("#ws-outcome-thought").fill("The directories exist now.")
    page.get_by_test_id("outcome-finish").get_by_role("button", name="Finish").click()
    done = page.get_by_test_id("done")
    expect(done).to_be_visible(timeout=120_000)
    result = page.get_by_test_id("result")
    expect(result).to_be_visible(timeout=60_000)
    state = session_state(live_stack, "annotator", sid)
    with live_stack.api("admin") as api:
        stored = api.get(f"/api/trajectories/{state['trajectory_id']}/").json()["final_reward"]
    assert stored is not None
    shown = float(result.get_attribute("data-reward") or "nan")
    assert shown == pytest.approx(stored), (shown, stored)
    expect(result).to_contain_text("final reward")
    assert stored == 1.0, f"the take-over made the directories; the checker says {stored}"
    expect(page.get_by_test_id("connection")).to_have_text("Session closed")
    # The screen shown now is the one captured at Finish (the trajectory's final screenshot), not the
    # screen the last step was decided on.
    final = session_state(live_stack, "annotator", sid)
    shown_img = page.get_by_test_id("screenshot")
    expect(shown_img).to_be_visible(timeout=30_000)
    expect(shown_img).to_have_attribute("src", final["observation"]["screenshot_url"], timeout=30_000)
    assert final["observation"]["screenshot_url"] != final["steps"][-1]["screenshot_url"]
    with live_stack.api("admin") as api:
        trajectory = api.get(f"/api/trajectories/{state['trajectory_id']}/").json()
    assert trajectory["final_screenshot"] and final["observation"]["screenshot_url"].endswith(
        trajectory["final_screenshot"].rsplit("/media/", 1)[-1]
    ), (trajectory["final_screenshot"], final["observation"]["screenshot_url"])
    assert_screen_as_large_as_the_window_allows(page, screen)
    page.screenshot(path=str(shots / "desktop-result.png"))
    assert not people.errors["annotator"], people.errors
