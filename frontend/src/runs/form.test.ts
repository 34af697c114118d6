import { describe, expect, it } from "vitest";
import { applyMirrors, endpointsToConfig, endpointsToText, errorSlotFor, fieldLabel, layoutFields, poolKind, startProfileNote } from "./form";

const keys = ["seed", "env.kind", "env.parallel_envs", "budget.max_updates", "grpo.lr", "grpo.rollouts_per_task", "curation.rollouts_max", "curation.step_cap"];
const basic = ["env.parallel_envs", "curation.rollouts_max", "budget.max_updates", "serving.endpoints"];
const mirrored = { "grpo.rollouts_per_task": "curation.rollouts_max" };

describe("layoutFields", () => {
  it("puts the basic fields first and folds the rest by section, the group size asked once", () => {
    const { basic: shown, advanced } = layoutFields(keys, basic, mirrored, "grpo");
    expect(shown).toEqual(["env.parallel_envs", "curation.rollouts_max", "budget.max_updates"]);
    expect([...advanced.keys()]).toEqual(["run", "env", "grpo", "curation"]);
    expect(advanced.get("grpo")).toEqual(["grpo.lr"]);
    const all = [...shown, ...[...advanced.values()].flat()];
    expect(all.filter((k) => k.endsWith("rollouts_per_task") || k.endsWith("rollouts_max"))).toEqual(["curation.rollouts_max"]);
  });
  it("asks PPO no group size in the basic section", () => {
    const { basic: shown, advanced } = layoutFields(keys, basic, {}, "ppo");
    expect(shown).not.toContain("curation.rollouts_max");
    expect(advanced.get("curation")).toContain("curation.rollouts_max");
  });
});

describe("labels, mirrors, errors, endpoints", () => {
  it("labels in words", () => {
    expect(fieldLabel("grpo.lr", { "grpo.lr": "Policy learning rate" })).toBe("Policy learning rate");
    expect(fieldLabel("curation.step_cap", {})).toBe("Step cap");
  });
  it("copies the group size into its mirror and shows the mirror's errors at the source", () => {
    const out = applyMirrors(new Map<string, unknown>([["curation.rollouts_max", 4], ["grpo.rollouts_per_task", 8]]), mirrored, new Set(keys));
    expect(out.get("grpo.rollouts_per_task")).toBe(4);
    expect(applyMirrors(new Map([["curation.rollouts_max", 4]]), mirrored, new Set(["curation.rollouts_max"])).has("grpo.rollouts_per_task")).toBe(false);
    expect(errorSlotFor("grpo.rollouts_per_task", mirrored)).toBe("curation.rollouts_max");
    expect(errorSlotFor("grpo.lr", mirrored)).toBe("grpo.lr");
  });
  it("turns endpoint lines into the config's list and back", () => {
    expect(endpointsToConfig(" http://a:8000/v1\n\nhttp://b/v1 , http://c/v1\n")).toBe("http://a:8000/v1,http://b/v1,http://c/v1");
    expect(endpointsToText("http://a/v1,http://b/v1")).toBe("http://a/v1\nhttp://b/v1");
    expect(endpointsToText(null)).toBe("");
  });
});

describe("poolKind", () => {
  it("takes the environment kind from the pool's tasks, mixed when they mix", () => {
    expect(poolKind(["desktop"]).kind).toBe("desktop");
    expect(poolKind(["terminal", "desktop", "desktop"])).toEqual({ kind: "mixed", note: "Its tasks mix desktop, terminal: Environment kind mixed (each rollout leases its task's kind)." });
    expect(poolKind([]).kind).toBeNull();
    expect(poolKind([]).note).toContain("no enabled task");
  });
});

describe("startProfileNote", () => {
  it("names the start model the defaults are for", () => {
    expect(startProfileNote("embedded")).toContain("embedded model (the starter)");
    expect(startProfileNote("hf_vlm")).toContain("paper's settings");
    expect(startProfileNote(undefined)).toBe("");
  });
});
