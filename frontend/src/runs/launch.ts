// The launch form: pick a preset (or fork a run from one of its checkpoints), see and change every
// option with its one-line help, and submit; the server validates and its messages appear under
// the fields they concern ("grpo.clip_low": [...]).

import { api, ApiError, resultsOf } from "../lib/api";
import { h, notice, render } from "../lib/dom";
import { fieldText, flattenConfig, overrides, parseField } from "./series";
import type { CheckpointRow, Preset, RunDetail } from "./types";

interface Pool {
  id: number;
  name: string;
  task_count: number;
}

const SECTION_TITLES: Record<string, string> = {
  env: "Environments",
  budget: "Budget",
  ppo: "PPO",
  grpo: "Step-wise GRPO",
  curation: "Curation",
  reward: "Reward shaping",
  alerts: "Alert thresholds",
};

/** Throws the server's field errors as {field: [messages]}. */
class FieldErrors extends Error {
  constructor(readonly errors: Record<string, string[]>) {
    super("invalid");
  }
}

async function post<T>(path: string, body: unknown): Promise<T> {
  const response = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf() },
    body: JSON.stringify(body),
  });
  const data = (await response.json().catch(() => ({}))) as unknown;
  if (response.status === 400 && data !== null && typeof data === "object") {
    const errors: Record<string, string[]> = {};
    for (const [k, v] of Object.entries(data as Record<string, unknown>)) {
      errors[k] = Array.isArray(v) ? v.map(String) : [JSON.stringify(v)];
    }
    throw new FieldErrors(errors);
  }
  if (!response.ok) throw new ApiError(response.status, JSON.stringify(data));
  return data as T;
}

function csrf(): string {
  const m = /(?:^|;\s*)csrftoken=([^;]+)/.exec(document.cookie);
  return m?.[1] ? decodeURIComponent(m[1]) : "";
}

export async function mountLaunch(root: HTMLElement): Promise<void> {
  const params = new URLSearchParams(window.location.search);
  const forkId = Number(params.get("fork") ?? "0");
  const [presets, pools, parent] = await Promise.all([
    api<Preset[]>("/api/rl/presets/"),
    api<Pool[] | { results: Pool[] }>("/api/pools/").then(resultsOf),
    forkId > 0 ? api<RunDetail>(`/api/rl/runs/${forkId}/`) : Promise.resolve(null),
  ]);
  const checkpoints = parent ? await api<CheckpointRow[]>(`/api/rl/runs/${parent.id}/checkpoints/`) : [];
  // a new run starts from the checkpoint promoted to "RL start" unless another one is chosen
  const allCheckpoints = parent ? [] : await api<CheckpointRow[] | { results: CheckpointRow[] }>("/api/checkpoints/").then(resultsOf);
  // each preset lists the help and choices of its own sections (PPO or GRPO): merge them all
  const help: Record<string, string> = {};
  const choices: Record<string, unknown[]> = {};
  for (const p of presets) {
    Object.assign(help, p.help);
    Object.assign(choices, p.choices);
  }

  const form = h("form", { class: "rc-launch", "data-testid": "launch-form", novalidate: true });
  const status = h("div", { class: "form-status", "data-testid": "launch-status" });
  const name = h("input", { name: "name", required: true, "data-testid": "field-name", value: parent ? `${parent.name} (fork)` : "" });
  const presetSel = h("select", { name: "preset", "data-testid": "field-preset", disabled: parent !== null }, ...presets.map((p) => h("option", { value: p.name }, p.title)));
  const presetDesc = h("p", { class: "muted", "data-testid": "preset-description" });
  const poolSel = h("select", { name: "pool", "data-testid": "field-pool", disabled: parent !== null }, h("option", { value: "" }, "— choose —"), ...pools.map((p) => h("option", { value: p.id, selected: parent?.pool === p.id }, `${p.name} (${p.task_count} tasks)`)));
  const ckptSel = h("select", { name: "checkpoint", "data-testid": "field-checkpoint" }, h("option", { value: "" }, "newest checkpoint of the run"), ...checkpoints.map((c) => h("option", { value: c.version, selected: params.get("checkpoint") === c.version }, c.version)));
  const startSel = h("select", { name: "start_checkpoint", "data-testid": "field-start-checkpoint" }, h("option", { value: "" }, "the checkpoint promoted to RL start (else a fresh model)"), ...allCheckpoints.map((c) => h("option", { value: c.version }, c.version)));
  const launchNow = h("input", { type: "checkbox", name: "launch", checked: true, "data-testid": "field-launch" });
  const sections = h("div", { class: "rc-sections" });
  const errorEls = new Map<string, HTMLElement>();
  const inputs = new Map<string, HTMLInputElement | HTMLSelectElement>();
  let base = new Map<string, unknown>();

  const errorSlot = (key: string): HTMLElement => {
    const el = h("div", { class: "rc-error", "data-testid": `error-${key}`, role: "alert" });
    errorEls.set(key, el);
    return el;
  };

  const fillSections = (config: Record<string, unknown>): void => {
    base = flattenConfig(config);
    inputs.clear();
    for (const key of [...errorEls.keys()]) if (key.includes(".") || key === "seed" || key === "task_ids") errorEls.delete(key);
    const bySection = new Map<string, [string, unknown][]>();
    for (const [key, value] of base) {
      const section = key.includes(".") ? (key.split(".", 1)[0] ?? "run") : "run";
      bySection.set(section, [...(bySection.get(section) ?? []), [key, value]]);
    }
    render(
      sections,
      ...[...bySection].map(([section, fields]) =>
        h(
          "fieldset",
          { class: "rc-section", "data-testid": `section-${section}` },
          h("legend", {}, SECTION_TITLES[section] ?? (section === "run" ? "Run" : section)),
          ...fields.map(([key, value]) => {
            const attrs = { name: key, "data-testid": `field-${key}`, "aria-describedby": `help-${key}` };
            const allowed = choices[key];
            let input: HTMLInputElement | HTMLSelectElement;
            if (allowed !== undefined) {
              // a field that takes one of a fixed set: offer the set (null reads "none")
              input = h("select", attrs, ...allowed.map((c) => h("option", { value: fieldText(c), selected: c === value }, c === null ? "none" : fieldText(c))));
            } else {
              input = h("input", { ...attrs, value: fieldText(value), placeholder: value === null ? "none" : null });
              if (typeof value === "boolean") {
                input.type = "checkbox";
                input.checked = value;
              }
            }
            inputs.set(key, input);
            return h(
              "div",
              { class: "rc-field" },
              h("label", { for: `f-${key}` }, key.split(".").slice(-1)[0] ?? key),
              Object.assign(input, { id: `f-${key}` }),
              h("small", { id: `help-${key}`, class: "muted" }, help[key] ?? ""),
              errorSlot(key),
            );
          }),
        ),
      ),
    );
  };

  const currentPreset = (): Preset | undefined => presets.find((p) => p.name === presetSel.value);
  const onPreset = (): void => {
    const p = currentPreset();
    if (p === undefined) return;
    presetDesc.textContent = `${p.description} Algorithm ${p.algorithm}, mode ${p.mode}.`;
    fillSections(p.config);
  };
  presetSel.addEventListener("change", onPreset);
  if (parent) {
    presetDesc.textContent = `Fork of run #${parent.id} (${parent.name}): its settings below, starting from the chosen checkpoint.`;
    fillSections(parent.config);
  } else {
    onPreset();
  }

  const values = (): Map<string, unknown> => {
    const out = new Map<string, unknown>();
    for (const [key, input] of inputs) out.set(key, input instanceof HTMLInputElement && input.type === "checkbox" ? input.checked : parseField(input.value, base.get(key)));
    return out;
  };

  render(
    root,
    h("div", { class: "page-head" }, h("div", {}, h("h1", {}, parent ? `Fork run #${parent.id}` : "Launch a run"), h("p", {}, "Every option with its default from the papers; the server checks each field."))),
    form,
  );
  form.append(
    h(
      "section",
      { class: "card" },
      h("div", { class: "rc-field" }, h("label", {}, "Name"), name, errorSlot("name")),
      h("div", { class: "rc-field" }, h("label", {}, "Preset"), presetSel, presetDesc, errorSlot("preset")),
      h("div", { class: "rc-field" }, h("label", {}, "Task pool"), poolSel, errorSlot("pool")),
      parent ? h("div", { class: "rc-field" }, h("label", {}, "Start from checkpoint"), ckptSel, errorSlot("checkpoint")) : h("div", { class: "rc-field" }, h("label", {}, "Start from checkpoint"), startSel, errorSlot("start_checkpoint")),
      h("label", { class: "field field-check" }, launchNow, "Start it right away"),
    ),
    sections,
    h("div", { class: "rc-actions" }, h("button", { type: "submit", class: "btn", "data-testid": "launch-submit" }, parent ? "Fork" : "Create run"), status),
  );

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    for (const el of errorEls.values()) el.textContent = "";
    render(status, notice("loading", "Checking…"));
    const config = overrides(base, values());
    const request = parent
      ? post<RunDetail>(`/api/rl/runs/${parent.id}/fork/`, { name: name.value, checkpoint: ckptSel.value || null, config })
      : post<RunDetail>("/api/rl/runs/", { name: name.value, preset: presetSel.value, pool: poolSel.value === "" ? null : Number(poolSel.value), start_checkpoint: startSel.value || null, config });
    request
      .then(async (run) => {
        if (launchNow.checked) await api(`/api/rl/runs/${run.id}/launch/`, { method: "POST" });
        window.location.assign(`/runs/${run.id}/`);
      })
      .catch((err: unknown) => {
        if (err instanceof FieldErrors) {
          const loose: string[] = [];
          for (const [key, messages] of Object.entries(err.errors)) {
            const el = errorEls.get(key);
            if (el) el.textContent = messages.join(" ");
            else loose.push(`${key}: ${messages.join(" ")}`);
          }
          render(status, notice("error", `Fix the fields marked in red.${loose.length ? ` ${loose.join("; ")}` : ""}`));
          const first = [...errorEls.values()].find((el) => el.textContent !== "");
          first?.scrollIntoView({ block: "center" });
        } else {
          render(status, notice("error", err instanceof Error ? err.message : String(err)));
        }
      });
  });
}
