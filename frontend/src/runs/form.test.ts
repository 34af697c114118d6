import { describe, expect, it } from "vitest";
import { applyMirrors, endpointsToConfig, endpointsToText, errorSlotFor, fieldLabel, formValues, layoutFields, poolKind, schemaForm, startProfileNote } from "./form";
import type { JsonSchema } from "./form";

const keys = ["seed", "env.kind", "env.parallel_envs", "budget.max_updates", "grpo.lr", "grpo.rollouts_per_task", "curation.rollouts_max", "curation.step_cap"];
const basic = ["env.parallel_envs", "curation.rollouts_max", "budget.max_updates", "serving.endpoints"];
const mirrored = { "grpo.rollouts_per_task": "curation.rollouts_max" };

// The shapes pydantic writes (GET /api/rl/config-schema/): sections as $refs, a Literal as an enum, an
// optional field as anyOf with null, form hints as x-basic / x-mirrored.
const schema: JsonSchema = {
  title: "Run",
  properties: {
    env: { $ref: "#/$defs/EnvSettings" },
    grpo: { $ref: "#/$defs/GRPOConfig" },
    seed: { title: "Random seed", description: "seed for policy sampling", default: 0, type: "integer" },
    task_ids: { title: "Only these tasks (ids)", description: "explicit task list", default: [], type: "array" },
  },
  $defs: {
    EnvSettings: {
      title: "Environments",
      properties: {
        kind: { title: "Environment kind", description: "environment kind", default: "browser", enum: ["desktop", "browser"], type: "string" },
        parallel_envs: { title: "Environments in parallel", description: "environments at once", default: 8, type: "integer" },
      },
    },
    GRPOConfig: {
      title: "Step-wise GRPO",
      properties: {
        lr: { title: "Policy learning rate", description: "policy learning rate", default: 1e-6, exclusiveMinimum: 0, type: "number" } as JsonSchema,
        rollouts_per_task: { title: "Group size (rollouts per task)", description: "N", default: 8, type: "integer" },
        thought_temperature: { title: "Thought sampling temperature", description: "null = temperature", default: null, anyOf: [{ type: "number" }, { type: "null" }] },
        mode: { title: "Mode", description: "a fixed set that may be empty", default: null, anyOf: [{ enum: ["a", "b"], type: "string" }, { type: "null" }] },
      },
    },
  },
  "x-basic": ["env.parallel_envs", "grpo.rollouts_per_task", "seed"],
  "x-mirrored": { "grpo.mode": "grpo.lr" },
};

describe("schemaForm", () => {
  it("reads every field's label, help, choices and default, and the sections' titles, in schema order", () => {
    const form = schemaForm(schema);
    expect([...form.fields.keys()]).toEqual(["env.kind", "env.parallel_envs", "grpo.lr", "grpo.rollouts_per_task", "grpo.thought_temperature", "grpo.mode", "seed", "task_ids"]);
    expect(form.fields.get("env.kind")).toEqual({ label: "Environment kind", help: "environment kind", choices: ["desktop", "browser"], default: "browser" });
    expect(form.fields.get("grpo.mode")?.choices).toEqual(["a", "b", null]);
    expect(form.fields.get("grpo.thought_temperature")).toEqual({ label: "Thought sampling temperature", help: "null = temperature", default: null });
    expect(form.fields.get("task_ids")?.default).toEqual([]);
    expect(form.sections).toEqual({ run: "Run", env: "Environments", grpo: "Step-wise GRPO" });
    expect(form.basic).toEqual(["env.parallel_envs", "grpo.rollouts_per_task", "seed"]);
    expect(form.mirrored).toEqual({ "grpo.mode": "grpo.lr" });
    expect(schemaForm({ properties: {} })).toEqual({ fields: new Map(), sections: { run: "Run" }, basic: [], mirrored: {} });
  });
  it("starts from the config's values, a missing field (a run stored before it existed) at its default", () => {
    const values = formValues(schemaForm(schema), new Map<string, unknown>([["grpo.lr", 5e-4], ["env.kind", "desktop"], ["gone.field", 1]]));
    expect([...values.keys()]).toEqual(["env.kind", "env.parallel_envs", "grpo.lr", "grpo.rollouts_per_task", "grpo.thought_temperature", "grpo.mode", "seed", "task_ids"]);
    expect(values.get("grpo.lr")).toBe(5e-4);
    expect(values.get("env.parallel_envs")).toBe(8);
    expect(values.get("grpo.thought_temperature")).toBeNull();
  });
});

describe("layoutFields", () => {
  it("puts the basic fields first and folds the rest by section, the group size asked once", () => {
    const { basic: shown, advanced } = layoutFields(keys, basic, mirrored);
    expect(shown).toEqual(["env.parallel_envs", "curation.rollouts_max", "budget.max_updates"]);
    expect([...advanced.keys()]).toEqual(["run", "env", "grpo", "curation"]);
    expect(advanced.get("grpo")).toEqual(["grpo.lr"]);
    const all = [...shown, ...[...advanced.values()].flat()];
    expect(all.filter((k) => k.endsWith("rollouts_per_task") || k.endsWith("rollouts_max"))).toEqual(["curation.rollouts_max"]);
  });
  it("folds a field the basic list leaves out (PPO's group size) under its section", () => {
    const { basic: shown, advanced } = layoutFields(keys, basic.filter((k) => k !== "curation.rollouts_max"), {});
    expect(shown).not.toContain("curation.rollouts_max");
    expect(advanced.get("curation")).toEqual(["curation.rollouts_max", "curation.step_cap"]);
  });
});

describe("labels, mirrors, errors, endpoints", () => {
  it("labels in words", () => {
    expect(fieldLabel("grpo.lr", "Policy learning rate")).toBe("Policy learning rate");
    expect(fieldLabel("curation.step_cap", undefined)).toBe("Step cap");
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
