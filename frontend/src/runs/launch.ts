// The launch form: a basic section (name, preset, pool, start checkpoint, environments, group size,
// budget, policy endpoints, Entropulse, judge) and every other option folded under "Advanced", each
// labelled in words with its one-line help. The fields, labels, help, choices and defaults are the
// run config's JSON schema (GET /api/rl/config-schema/); the values are the preset's. A fork keeps its
// parent's preset and settings. The server validates; its messages appear next to the fields they
// concern ("grpo.clip_low": [...]).

import { api, ApiError, resultsOf } from "../lib/api";
import { h, notice, render } from "../lib/dom";
import { applyMirrors, endpointsToConfig, endpointsToText, errorSlotFor, fieldLabel, formValues, layoutFields, poolKind, schemaForm, startProfileNote } from "./form";
import type { ConfigForm, JsonSchema } from "./form";
import { fieldText, flattenConfig, overrides, parseField } from "./series";
import type { CheckpointRow, Preset, RunDetail } from "./types";

interface Pool {
  id: number;
  name: string;
  task_count: number;
  /** kinds of its enabled, supported tasks */
  env_kinds?: string[];
}

const ENDPOINTS = "serving.endpoints";
const ENV_KIND = "env.kind";

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
  const [initialPresets, schemas, pools, parent] = await Promise.all([
    api<Preset[]>("/api/rl/presets/"),
    api<Record<string, JsonSchema>>("/api/rl/config-schema/"),
    api<Pool[] | { results: Pool[] }>("/api/pools/").then(resultsOf),
    forkId > 0 ? api<RunDetail>(`/api/rl/runs/${forkId}/`) : Promise.resolve(null),
  ]);
  let presets = initialPresets;
  const checkpoints = parent ? await api<CheckpointRow[]>(`/api/rl/runs/${parent.id}/checkpoints/`) : [];
  // a new run starts from the checkpoint promoted to "RL start" unless another one is chosen
  const allCheckpoints = parent ? [] : await api<CheckpointRow[] | { results: CheckpointRow[] }>("/api/checkpoints/").then(resultsOf);
  // one form per algorithm (its own section, PPO or GRPO), read from the config's JSON schema
  const forms = new Map<string, ConfigForm>(Object.entries(schemas).map(([name, schema]) => [name, schemaForm(schema)]));
  const parentPreset = parent ? presets.find((p) => p.name === parent.preset) : undefined;

  const form = h("form", { class: "rc-launch", "data-testid": "launch-form", novalidate: true });
  const status = h("div", { class: "form-status", "data-testid": "launch-status" });
  const name = h("input", { name: "name", id: "f-name", required: true, "data-testid": "field-name", value: parent ? `${parent.name} (fork)` : "" });
  const presetSel = h("select", { name: "preset", id: "f-preset", "data-testid": "field-preset", disabled: parent !== null }, ...presets.map((p) => h("option", { value: p.name, selected: parent?.preset === p.name }, p.title)));
  const presetDesc = h("p", { class: "muted", "data-testid": "preset-description" });
  const poolNote = h("p", { class: "muted", "data-testid": "pool-kind" });
  const poolSel = h("select", { name: "pool", id: "f-pool", "data-testid": "field-pool", disabled: parent !== null }, h("option", { value: "" }, "— choose —"), ...pools.map((p) => h("option", { value: p.id, selected: parent?.pool === p.id }, `${p.name} (${p.task_count} tasks)`)));
  const ckptSel = h("select", { name: "checkpoint", id: "f-checkpoint", "data-testid": "field-checkpoint" }, h("option", { value: "" }, "newest checkpoint of the run"), ...checkpoints.map((c) => h("option", { value: c.version, selected: params.get("checkpoint") === c.version }, c.success_note ? `${c.version} — ${c.success_note}` : c.version)));
  // Which checkpoint a run starts from and how well it does on its pool, measured (the starter model).
  const described = (c: CheckpointRow): string => (c.success_note ? `${c.version} — ${c.success_note}` : c.version);
  const rlStart = allCheckpoints.find((c) => c.is_rl_start);
  const startSel = h("select", { name: "start_checkpoint", id: "f-start_checkpoint", "data-testid": "field-start-checkpoint" }, h("option", { value: "" }, rlStart ? `RL start: ${described(rlStart)}` : "a fresh, untrained model (no checkpoint is promoted to RL start)"), ...allCheckpoints.map((c) => h("option", { value: c.version }, described(c))));
  const launchNow = h("input", { type: "checkbox", name: "launch", checked: true, "data-testid": "field-launch" });
  const basicFields = h("div", { class: "rc-basic-fields", "data-testid": "section-basic-config" });
  const sections = h("div", { class: "rc-sections" });
  const advanced = h("details", { class: "rc-advanced", "data-testid": "advanced" }, h("summary", {}, "Advanced: every other setting (algorithm, curation, reward, alerts …)"), sections);
  const errorEls = new Map<string, HTMLElement>();
  const inputs = new Map<string, HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement>();
  let base = new Map<string, unknown>();
  let algorithm = parent?.algorithm ?? presets[0]?.algorithm ?? "grpo";
  let notes: Record<string, string> = {}; // what this deployment adds to a field's help
  const configForm = (): ConfigForm => forms.get(algorithm) ?? { fields: new Map(), sections: {}, basic: [], mirrored: {} };

  const errorSlot = (key: string): HTMLElement => {
    const el = h("div", { class: "rc-error", "data-testid": `error-${key}`, role: "alert" });
    errorEls.set(key, el);
    return el;
  };

  const fieldRow = (key: string, value: unknown): HTMLElement => {
    const attrs = { name: key, id: `f-${key}`, "data-testid": `field-${key}`, "aria-describedby": `help-${key}`, title: key };
    const spec = configForm().fields.get(key);
    const allowed = spec?.choices;
    let input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;
    if (key === ENDPOINTS) {
      input = h("textarea", { ...attrs, rows: 2, placeholder: "empty: the run starts its own policy server\nhttp://vllm-host:8000/v1" });
      input.value = endpointsToText(value);
    } else if (allowed !== undefined) {
      // a field that takes one of a fixed set: offer the set (null reads "none")
      input = h("select", attrs, ...allowed.map((c) => h("option", { value: fieldText(c), selected: c === value }, c === null ? "none" : fieldText(c).replace(/_/g, " "))));
    } else {
      input = h("input", { ...attrs, value: fieldText(value), placeholder: value === null ? "none" : null });
      if (typeof value === "boolean") {
        input.type = "checkbox";
        input.checked = value;
      }
    }
    inputs.set(key, input);
    const help = [spec?.help ?? "", notes[key] === undefined ? "" : `(${notes[key]})`].filter((t) => t).join(" ");
    return h("div", { class: "rc-field" }, h("label", { for: `f-${key}` }, fieldLabel(key, spec?.label)), input, h("small", { id: `help-${key}`, class: "muted" }, help), errorSlot(key));
  };

  const fillSections = (config: Record<string, unknown>): void => {
    const cf = configForm();
    base = formValues(cf, flattenConfig(config));
    inputs.clear();
    for (const key of [...errorEls.keys()]) if (cf.fields.has(key) || key.includes(".")) errorEls.delete(key);
    const layout = layoutFields([...base.keys()], cf.basic, cf.mirrored);
    render(basicFields, ...layout.basic.map((key) => fieldRow(key, base.get(key))));
    render(
      sections,
      ...[...layout.advanced].map(([section, keys]) =>
        h("fieldset", { class: "rc-section", "data-testid": `section-${section}` }, h("legend", {}, cf.sections[section] ?? section), ...keys.map((key) => fieldRow(key, base.get(key)))),
      ),
    );
  };

  // env.kind follows the chosen pool's tasks (the server infers the same when it is left open): shown
  // in the Advanced field and as the default, so only a kind the user picks is sent.
  const applyPoolKind = (): void => {
    const pool = pools.find((p) => String(p.id) === poolSel.value);
    if (pool === undefined || parent !== null) {
      poolNote.textContent = "";
      return;
    }
    const { kind, note } = poolKind(pool.env_kinds ?? []);
    poolNote.textContent = note;
    const input = inputs.get(ENV_KIND);
    if (kind === null || input === undefined) return;
    if (input.value === fieldText(base.get(ENV_KIND))) input.value = kind;
    base.set(ENV_KIND, kind);
  };
  poolSel.addEventListener("change", applyPoolKind);

  const currentPreset = (): Preset | undefined => presets.find((p) => p.name === presetSel.value);
  const onPreset = (): void => {
    const p = currentPreset();
    if (p === undefined) return;
    algorithm = p.algorithm;
    notes = p.notes;
    presetDesc.textContent = `${p.description} Algorithm ${p.algorithm.toUpperCase()}, ${p.mode === "sync" ? "synchronous" : "asynchronous"}. ${startProfileNote(p.start_profile)}`;
    fillSections(p.config);
    applyPoolKind();
  };
  presetSel.addEventListener("change", onPreset);
  // The defaults depend on the start model (embedded starter, HF VLM, external endpoint): a new start
  // checkpoint reloads them (what was typed into the fields is replaced by that model's defaults).
  startSel.addEventListener("change", () => {
    const q = startSel.value ? `?${new URLSearchParams({ start_checkpoint: startSel.value }).toString()}` : "";
    void api<Preset[]>(`/api/rl/presets/${q}`).then((fresh) => {
      presets = fresh;
      onPreset();
    });
  });
  if (parent) {
    presetDesc.textContent = `Fork of run #${parent.id} (${parent.name})${parentPreset ? `, preset ${parentPreset.title}` : ""}: its settings below, starting from the chosen checkpoint.`;
    fillSections(parent.config);
  } else {
    onPreset();
  }

  const values = (): Map<string, unknown> => {
    const out = new Map<string, unknown>();
    for (const [key, input] of inputs) {
      if (key === ENDPOINTS) out.set(key, endpointsToConfig(input.value));
      else out.set(key, input instanceof HTMLInputElement && input.type === "checkbox" ? input.checked : parseField(input.value, base.get(key)));
    }
    return applyMirrors(out, configForm().mirrored, new Set(base.keys()));
  };

  const row = (label: string, forId: string, control: HTMLElement, key: string, extra: HTMLElement | null = null): HTMLElement =>
    h("div", { class: "rc-field" }, h("label", { for: forId }, label), control, extra, errorSlot(key));

  render(
    root,
    h("div", { class: "page-head" }, h("div", {}, h("h1", {}, parent ? `Fork run #${parent.id}` : "Launch a run"), h("p", {}, "The basics first; every other setting has its default from the papers under Advanced. The server checks each field before anything is created."))),
    form,
  );
  form.append(
    h(
      "section",
      { class: "card", "data-testid": "section-basic" },
      h("h2", {}, "Basics"),
      row("Name", "f-name", name, "name"),
      row(parent ? "Preset (kept from the parent)" : "Preset", "f-preset", presetSel, "preset", presetDesc),
      row("Task pool", "f-pool", poolSel, "pool", poolNote),
      parent ? row("Start from checkpoint", "f-checkpoint", ckptSel, "checkpoint") : row("Start from checkpoint", "f-start_checkpoint", startSel, "start_checkpoint"),
      basicFields,
      h("label", { class: "field field-check" }, launchNow, " Start it right away"),
    ),
    advanced,
    h("div", { class: "rc-actions" }, h("button", { type: "submit", class: "btn", "data-testid": "launch-submit" }, parent ? "Fork" : "Create run"), status),
  );

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    for (const el of errorEls.values()) el.textContent = "";
    render(status, notice("loading", "Checking…"));
    const config = overrides(base, values());
    const request = parent
      ? post<RunDetail>(`/api/rl/runs/${parent.id}/fork/`, { name: name.value, checkpoint: ckptSel.value || null, config, launch: launchNow.checked })
      : post<RunDetail>("/api/rl/runs/", { name: name.value, preset: presetSel.value, pool: poolSel.value === "" ? null : Number(poolSel.value), start_checkpoint: startSel.value || null, config, launch: launchNow.checked });
    request
      .then((run) => {
        // Created and launched in one request: a launch the preflight refuses creates nothing.
        window.location.assign(`/runs/${run.id}/`);
      })
      .catch((err: unknown) => {
        if (err instanceof FieldErrors) {
          const loose: string[] = [];
          for (const [key, messages] of Object.entries(err.errors)) {
            const el = errorEls.get(errorSlotFor(key, configForm().mirrored));
            if (el) el.textContent = [el.textContent, messages.join(" ")].filter((t) => t).join(" ");
            else loose.push(`${key}: ${messages.join(" ")}`);
          }
          render(status, notice("error", `Fix the fields marked in red.${loose.length ? ` ${loose.join("; ")}` : ""}`));
          const marked = [...errorEls.values()].filter((el) => el.textContent !== "");
          if (marked.some((el) => advanced.contains(el))) advanced.open = true;
          const first = marked[0];
          first?.scrollIntoView({ block: "center" });
        } else {
          render(status, notice("error", err instanceof Error ? err.message : String(err)));
        }
      });
  });
}
