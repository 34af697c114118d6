import { describe, expect, it } from "vitest";
import { align, appendPoint, chartSpecs, eventX, fieldText, flattenConfig, overrides, parseField, phaseBands, smooth, trainingPhase } from "./series";
import type { MetricsEvent } from "./types";

describe("chartSpecs", () => {
  it("groups by section in dashboard order and puts keyed metrics on one chart", () => {
    const groups = chartSpecs(["policy/entropy", "outcome/reward_mean", "outcome/success_rate/task/a", "outcome/success_rate/task/b", "zeta/x"]);
    expect([...groups.keys()]).toEqual(["outcome", "policy", "zeta"]);
    const outcome = groups.get("outcome") ?? [];
    expect(outcome.map((s) => s.id)).toEqual(["outcome/reward_mean", "outcome/success_rate/task/"]);
    expect(outcome[1]?.names).toEqual(["outcome/success_rate/task/a", "outcome/success_rate/task/b"]);
  });
});

describe("smooth", () => {
  it("is the identity at weight 0 and debiased so the first point is kept", () => {
    expect(smooth([1, 2, 3], 0)).toEqual([1, 2, 3]);
    const s = smooth([4, 4, 4, null, 4], 0.9);
    expect(s[0]).toBeCloseTo(4);
    expect(s[2]).toBeCloseTo(4);
    expect(s[3]).toBeNull();
  });
  it("damps a spike", () => {
    const s = smooth([0, 0, 10, 0], 0.8);
    expect(s[2]).toBeLessThan(10);
    expect(s[2]).toBeGreaterThan(0);
  });
});

describe("appendPoint and align", () => {
  it("keeps x order and aligns series on the union of their xs", () => {
    const a = { x: [1, 3], y: [10, 30] };
    appendPoint(a, 2, 20);
    appendPoint(a, 5, 50);
    expect(a).toEqual({ x: [1, 2, 3, 5], y: [10, 20, 30, 50] });
    const [xs, ya, yb] = align([a, { x: [2, 4], y: [-2, -4] }]);
    expect(xs).toEqual([1, 2, 3, 4, 5]);
    expect(ya).toEqual([10, 20, 30, null, 50]);
    expect(yb).toEqual([null, -2, null, -4, null]);
  });
});

describe("eventX", () => {
  it("reads the chosen axis", () => {
    const e: MetricsEvent = { type: "run.metrics", run_id: 1, step: 7, policy_version: 3, samples: 224, wall: 1.5, values: {} };
    expect([eventX(e, "step"), eventX(e, "version"), eventX(e, "samples"), eventX(e, "wall")]).toEqual([7, 3, 224, 1.5]);
  });
});

describe("launch form values", () => {
  it("round-trips field text and sends only the changed fields, nested", () => {
    const base = flattenConfig({ grpo: { lr: 1e-6, clip_low: 0.2, kl: true }, budget: { max_episodes: null }, task_ids: [] });
    expect(fieldText(base.get("task_ids"))).toBe("[]");
    expect(parseField("2e-6", 1e-6)).toBe(2e-6);
    expect(parseField("", null)).toBeNull();
    expect(parseField("", "")).toBe(""); // an empty text field (the judge URL) is not null
    expect(parseField("  ", "http://x/v1")).toBe("");
    expect(parseField("40", null)).toBe(40);
    expect(parseField("[3, 4]", [])).toEqual([3, 4]);
    expect(parseField("abc", 0.2)).toBe("abc");
    const values = new Map(base);
    values.set("grpo.lr", 2e-6);
    values.set("budget.max_episodes", 40);
    expect(overrides(base, values)).toEqual({ grpo: { lr: 2e-6 }, budget: { max_episodes: 40 } });
  });
});

describe("phaseBands", () => {
  it("marks one SFT phase where the Entropulse count rises", () => {
    expect(phaseBands({ x: [0, 1, 2, 3, 4, 5], y: [0, 0, 1, 1, 1, 2] })).toEqual([
      { from: 1, to: 2, label: "SFT 1" },
      { from: 4, to: 5, label: "SFT 2" },
    ]);
    expect(phaseBands({ x: [10], y: [1] })).toEqual([{ from: 9, to: 10, label: "SFT 1" }]);
    expect(phaseBands({ x: [], y: [] })).toEqual([]);
  });
});

describe("trainingPhase", () => {
  it("says where a PPO run is: critic warm-up with its count, then policy updates", () => {
    expect(trainingPhase("ppo", undefined, undefined, 5)).toBe("waiting for the first batch");
    expect(trainingPhase("ppo", 1, 40, 100)).toBe("value pre-training 40/100");
    expect(trainingPhase("ppo", 0, 5, 5)).toBe("policy updates");
    expect(trainingPhase("grpo", undefined, undefined, undefined)).toBe("");
  });
});
