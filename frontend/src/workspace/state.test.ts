import { describe, expect, it } from "vitest";
import { applyCandidates, applyObservation, applyStatus, canDecide, mergeState } from "./state";
import type { Candidate, SessionState } from "./types";

function state(version: number, status: "pending" | "ready" = "pending", steps = 0): SessionState {
  return {
    id: 7,
    status: "active",
    error: "",
    task: { id: 3, external_id: "click-test", instruction: "Click the button.", env_kind: "browser", pool: "p" },
    trajectory_id: 1,
    track: "expert",
    policy: { model: "v1", profile: "embedded", n: 3 },
    observation: { obs_version: version, screenshot_url: `/m/${version}.png`, width: 160, height: 210, clock: 1, reward: 0, env_done: false },
    candidates: { obs_version: version, status, items: status === "ready" ? [cand(0)] : [], error: "", model_ms: status === "ready" ? 100 : null },
    steps: Array.from({ length: steps }, (_, i) => ({
      index: i, thought: "", action_text: "", decision: "accepted", decision_index: 0, screenshot_url: "",
      executed_points: [], reward: 0, clock_start: 0, clock_end: 0, human_thought_verbatim: "", human_thought_refined: "",
    })),
  };
}

function cand(index: number): Candidate {
  return {
    index, thought: "t", action_text: "click(start_box='(1,2)')", raw_text: "", actions: [], screen_actions: [{ kind: "click", point: [1, 2] }],
    clamped: false, parse_error: "", logprob: null, model_version: "v1", convention: "screen", image_size: null,
  };
}

describe("mergeState", () => {
  it("takes the first state as is", () => {
    const s = state(1);
    expect(mergeState(null, s)).toBe(s);
  });
  it("never goes back to an older screen", () => {
    const now = state(3, "ready");
    expect(mergeState(now, state(2))).toBe(now);
  });
  it("keeps a late status change from an older snapshot", () => {
    const old = { ...state(2), status: "submitted" };
    expect(mergeState(state(3), old).status).toBe("submitted");
  });
  it("does not turn ready candidates back into pending for the same screen", () => {
    const now = state(2, "ready");
    const merged = mergeState(now, state(2, "pending", 1));
    expect(merged.candidates.status).toBe("ready");
    expect(merged.steps).toHaveLength(1);
  });
  it("takes a newer screen whole", () => {
    expect(mergeState(state(2, "ready"), state(3)).candidates.status).toBe("pending");
  });
});

describe("events", () => {
  const obs = (v: number, steps: number) => ({
    type: "annotation.observation" as const, obs_version: v, screenshot_url: "/m/x.png", width: 160, height: 210, clock: 2,
    instruction: "Click it.", steps, reward: 0, env_done: false,
  });
  it("a newer observation replaces the screen and makes candidates pending", () => {
    const u = applyObservation(state(1, "ready"), obs(2, 1));
    expect(u.changed).toBe(true);
    expect(u.state.observation.obs_version).toBe(2);
    expect(u.state.candidates).toMatchObject({ obs_version: 2, status: "pending", items: [] });
    expect(u.state.task.instruction).toBe("Click it.");
    expect(u.refetch).toBe(true); // 1 step on the server, none shown
  });
  it("an old observation changes nothing", () => {
    const s = state(3);
    expect(applyObservation(s, obs(2, 0))).toEqual({ state: s, refetch: false, changed: false });
  });
  it("candidates for another screen are ignored", () => {
    const s = state(2);
    const ev = { type: "annotation.candidates" as const, obs_version: 1, status: "ready" as const, candidates: [cand(0)], error: "", model_ms: 5 };
    expect(applyCandidates(s, ev)).toBe(s);
    expect(applyCandidates(s, { ...ev, obs_version: 2 }).candidates.items).toHaveLength(1);
  });
  it("failed candidates keep the error", () => {
    const ev = { type: "annotation.candidates" as const, obs_version: 2, status: "failed" as const, candidates: [], error: "boom", model_ms: 5 };
    expect(applyCandidates(state(2), ev).candidates).toMatchObject({ status: "failed", error: "boom" });
  });
  it("status events end the session's decisions", () => {
    const s = applyStatus(state(2), { type: "annotation.status", status: "submitted", error: "" });
    expect(canDecide(s)).toBe(false);
    expect(canDecide(state(2))).toBe(true);
  });
});
