// Home page, admins: which Whisper model transcribes think-aloud. Lists each named model with its
// measured cost (real-time factor on 2 cores, bench asr) and whether its pinned weights are
// installed here; choosing one takes effect from the ASR workers' next job. The server refuses a
// model that is not installed or fails its SHA-256 check (400 with the reason, shown here).
// API: GET / PUT /api/annotation/thinkaloud/asr/ {"model"} (annotation/api/thinkaloud_views.py).

import { api, errorText } from "../lib/api";
import { badge, h, notice, render, table } from "../lib/dom";
import type { Widget } from "./mount";

export const ASR_URL = "/api/annotation/thinkaloud/asr/";

export interface AsrModelRow {
  name: string;
  packages: string;
  size_mb: number;
  rtf_wall: number;
  rtf_cpu: number;
  note: string;
  installed: boolean;
}

export interface AsrModels {
  model: string; // in use now
  chosen: string; // the admins' choice; "" = the deploy default
  deploy_default: string;
  updated_at: string | null;
  models: AsrModelRow[];
}

/** One sentence on what is in use and why: an admin's choice or the deploy default. */
export function inUseText(state: AsrModels): string {
  if (state.chosen === "") return `In use: ${state.model} (the deploy default; no admin has chosen a model).`;
  const when = state.updated_at === null ? "" : ` on ${new Date(state.updated_at).toLocaleString()}`;
  return `In use: ${state.model} (chosen by an admin${when}; the deploy default is ${state.deploy_default}).`;
}

/** Whether `row` can be chosen, and if not, why (shown on its disabled button). */
export function choosable(row: AsrModelRow, state: AsrModels): { ok: boolean; why: string } {
  if (row.name === state.model) return { ok: false, why: "in use" };
  if (!row.installed) return { ok: false, why: `not installed here (needs ${row.packages})` };
  return { ok: true, why: "" };
}

/** Real-time factor as "0.136 (CPU 0.123)": seconds of work per second of speech. */
export function rtfText(row: AsrModelRow): string {
  return `${row.rtf_wall.toFixed(3)} (CPU ${row.rtf_cpu.toFixed(3)})`;
}

export const asrModelWidget: Widget = async (el) => {
  const message = h("div", { "aria-live": "polite", "data-testid": "asr-message" });

  const show = (state: AsrModels): void => {
    const choose = (row: AsrModelRow): HTMLElement => {
      const can = choosable(row, state);
      if (!can.ok) return h("span", { class: "muted", "data-testid": `asr-state-${row.name}` }, can.why);
      const button = h("button", { type: "button", class: "btn btn-secondary", "data-testid": `asr-choose-${row.name}` }, "Use this model");
      button.addEventListener("click", () => {
        button.disabled = true;
        render(message, notice("loading", `Checking ${row.name}'s files…`));
        api<AsrModels>(ASR_URL, { method: "PUT", body: { model: row.name } })
          .then((next) => {
            show(next);
            render(message, h("p", { class: "notice notice-ok", "data-testid": "asr-saved" }, `${next.model} transcribes think-aloud from the ASR workers' next job on.`));
          })
          .catch((error: unknown) => {
            button.disabled = false;
            render(message, notice("error", `${row.name} was not chosen: ${errorText(error)}`));
          });
      });
      return button;
    };
    render(
      el,
      h("div", { class: "card-head" }, h("h2", {}, "Think-aloud speech model")),
      h("p", { "data-testid": "asr-in-use" }, inUseText(state)),
      h("div", { class: "table-wrap" }, table(state.models, [
        { label: "Model", cell: (r) => h("span", {}, h("strong", {}, r.name), r.name === state.model ? " " : null, r.name === state.model ? badge("in use", "succeeded") : null) },
        { label: "Real-time factor", cell: rtfText, numeric: true },
        { label: "Size", cell: (r) => `${r.size_mb}\u00a0MB`, numeric: true },
        { label: "Installed", cell: (r) => (r.installed ? "yes" : h("span", { class: "muted" }, "no")) },
        { label: "Note", cell: (r) => h("span", { class: "muted" }, r.note) },
        { label: "", cell: choose },
      ])),
      h("p", { class: "muted" }, "Real-time factor: seconds of transcription per second of speech on 2 CPU cores, measured by bench asr on the hard speech set (wall time grows with the machine's load; CPU time does not). The full pass of a recording takes about this share of its length."),
      message,
    );
  };

  render(el, notice("loading", "Loading the speech models…"));
  show(await api<AsrModels>(ASR_URL));
};
