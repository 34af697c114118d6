// The launch form's layout rules, kept pure so they are tested: the fields read from the run
// config's JSON schema (label, help, choices, default of each), which are basic and which are folded
// under "Advanced", fields asked once and copied into another (the group size), and where a server
// error is shown.

/** The parts of a JSON schema (as pydantic writes it) the form reads. */
export interface JsonSchema {
  title?: string;
  description?: string;
  default?: unknown;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  type?: string;
  $ref?: string;
  properties?: Record<string, JsonSchema>;
  $defs?: Record<string, JsonSchema>;
  "x-basic"?: string[]; // the fields shown before "Advanced", in order
  "x-mirrored"?: Record<string, string>; // field → the field it is copied from
}

export interface FieldSpec {
  label: string;
  help: string;
  choices?: unknown[]; // the values of a fixed-set field; null among them when it may be empty
  default?: unknown;
}

export interface ConfigForm {
  fields: Map<string, FieldSpec>; // "section.field" (top-level fields by name) → spec, in schema order
  sections: Record<string, string>; // section → its title; "run" holds the top-level fields
  basic: string[];
  mirrored: Record<string, string>;
}

function fieldSpec(schema: JsonSchema): FieldSpec {
  const arms = schema.anyOf ?? [schema];
  const values = arms.flatMap((arm) => arm.enum ?? []);
  const spec: FieldSpec = { label: schema.title ?? "", help: schema.description ?? "" };
  if (values.length > 0) spec.choices = arms.some((arm) => arm.type === "null") ? [...values, null] : values;
  if ("default" in schema) spec.default = schema.default;
  return spec;
}

/** The form of one algorithm's run config, from its JSON schema (GET /api/rl/config-schema/). */
export function schemaForm(schema: JsonSchema): ConfigForm {
  const fields = new Map<string, FieldSpec>();
  const sections: Record<string, string> = { run: schema.title ?? "Run" };
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const section = prop.$ref === undefined ? undefined : schema.$defs?.[prop.$ref.split("/").pop() ?? ""];
    if (section === undefined) {
      fields.set(name, fieldSpec(prop));
      continue;
    }
    sections[name] = section.title ?? name;
    for (const [key, spec] of Object.entries(section.properties ?? {})) fields.set(`${name}.${key}`, fieldSpec(spec));
  }
  return { fields, sections, basic: schema["x-basic"] ?? [], mirrored: schema["x-mirrored"] ?? {} };
}

/** The values the form starts from: `config`'s, and each field's default where it has none (a run
 * stored before the field existed); in the schema's order. */
export function formValues(form: ConfigForm, config: Map<string, unknown>): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [key, spec] of form.fields) {
    if (config.has(key)) out.set(key, config.get(key));
    else if ("default" in spec) out.set(key, spec.default);
  }
  return out;
}

export interface FormLayout {
  basic: string[];
  advanced: Map<string, string[]>; // section → field keys, in config order
}

/** Basic fields first, in the server's order; everything else by section. A mirrored field is
 * never shown (the form fills it from its source). */
export function layoutFields(keys: readonly string[], basic: readonly string[], mirrored: Record<string, string>): FormLayout {
  const present = new Set(keys);
  const hidden = new Set(Object.keys(mirrored));
  const basicShown = basic.filter((k) => present.has(k) && !hidden.has(k));
  const inBasic = new Set(basicShown);
  const advanced = new Map<string, string[]>();
  for (const key of keys) {
    if (inBasic.has(key) || hidden.has(key)) continue;
    const section = key.includes(".") ? (key.split(".", 1)[0] ?? "run") : "run";
    advanced.set(section, [...(advanced.get(section) ?? []), key]);
  }
  return { basic: basicShown, advanced };
}

/** The words a field is labelled with: the schema's label, else the last key part in words. */
export function fieldLabel(key: string, label: string | undefined): string {
  if (label !== undefined && label !== "") return label;
  const last = key.split(".").pop() ?? key;
  const words = last.replace(/_/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** Copy each mirrored field's source value into it (the group size asked once). */
export function applyMirrors(values: Map<string, unknown>, mirrored: Record<string, string>, known: ReadonlySet<string>): Map<string, unknown> {
  const out = new Map(values);
  for (const [target, source] of Object.entries(mirrored)) {
    if (known.has(target) && out.has(source)) out.set(target, out.get(source));
  }
  return out;
}

/** The field whose slot shows an error keyed `key` (a mirrored field's error shows at its source). */
export function errorSlotFor(key: string, mirrored: Record<string, string>): string {
  return mirrored[key] ?? key;
}

/** Policy endpoints: one URL per line in the form, comma-separated in the config. */
export function endpointsToConfig(text: string): string {
  return text.split(/[\n,]/).map((u) => u.trim()).filter((u) => u !== "").join(",");
}

export function endpointsToText(value: unknown): string {
  return typeof value === "string" ? value.split(",").map((u) => u.trim()).filter((u) => u !== "").join("\n") : "";
}

export interface PoolKind {
  /** env.kind a run on the pool takes (the server infers the same), or null when it has no task to play. */
  kind: string | null;
  /** What the form says about it under the pool. */
  note: string;
}

/** The environment kind of a pool's runnable (enabled, supported) task kinds: their one kind, "mixed"
 * when they mix; null with a note in words when there is none. */
export function poolKind(kinds: readonly string[]): PoolKind {
  const distinct = [...new Set(kinds)].sort();
  if (distinct.length === 0) return { kind: null, note: "This pool has no enabled task this install can run: enable or import tasks first." };
  if (distinct.length === 1) {
    const kind = distinct[0] ?? "";
    return { kind, note: `Its tasks run in ${kind} environments: Environment kind ${kind}.` };
  }
  return { kind: "mixed", note: `Its tasks mix ${distinct.join(", ")}: Environment kind mixed (each rollout leases its task's kind).` };
}

const START_PROFILE_WORDS: Record<string, string> = {
  embedded: "the embedded model (the starter): the settings bench learn shows it learns under",
  hf_vlm: "a Hugging Face vision-language model: the paper's settings",
  endpoint: "an external endpoint (vLLM): the paper's settings",
};

/** "Defaults for <the start model>: …" under the preset, or "" when the server did not say. */
export function startProfileNote(profile: string | undefined): string {
  const words = profile === undefined ? undefined : START_PROFILE_WORDS[profile];
  return words === undefined ? "" : `Defaults for ${words}.`;
}
