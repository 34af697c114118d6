// Episode replay: a filmstrip of the trajectory's screenshots with the executed action drawn on
// each, the selected step large with its thought, reward and RL figures (value, advantage, λ used,
// importance ratio, clip flag, policy version). ←/→ (or j/k) step, Home/End jump. Works for RL
// episodes and annotation trajectories alike.

import { api } from "../lib/api";
import { badge, h, render } from "../lib/dom";
import { actionOverlay, lastPoint } from "../review/draw";
import { formatValue } from "./chart";
import type { JudgeVerdict, Replay, ReplayStep } from "./types";

function judgeCard(j: JudgeVerdict, steps: number): HTMLElement {
  const what = j.role === "reward" ? "reward of this episode" : "V(s) of this trajectory";
  return h(
    "section",
    { class: "card rp-judge", "data-testid": "judge-verdict" },
    h("div", { class: "card-head" }, h("h2", {}, "LLM judge"), h("span", { class: "muted" }, `${j.model || "judge"} · gave the ${what}`)),
    h("p", {}, j.success ? badge("success", "completed") : badge("failure", "failed"), j.reason ? ` ${j.reason}` : "", j.correct_steps !== null && !j.success ? h("span", { class: "muted" }, ` · first ${j.correct_steps} of ${steps} steps judged correct`) : null),
    j.env_reward !== null ? h("p", { class: "muted" }, `environment's own reward: ${formatValue(j.env_reward)}`) : null,
    j.raw ? h("details", {}, h("summary", {}, "The judge's answer"), h("pre", { class: "rp-raw" }, j.raw)) : null,
  );
}

const RL_LABELS: [string, string][] = [
  ["value", "value V(s)"],
  ["advantage", "advantage"],
  ["lambda", "λ used"],
  ["ratio", "importance ratio"],
  ["clipped", "clipped"],
  ["kept", "kept by the entropy filter"],
  ["tokens", "generated tokens"],
];

function shot(step: ReplayStep, cls: string, focus: [number, number] | null): HTMLElement {
  const w = step.screen_width ?? 0;
  const hgt = step.screen_height ?? 0;
  const box = h("div", { class: `rv-shot ${cls}`, style: w > 0 && hgt > 0 ? `aspect-ratio:${w}/${hgt}` : null });
  box.append(step.screenshot_url ? h("img", { src: step.screenshot_url, alt: `screenshot of step ${step.index + 1}` }) : h("div", { class: "rp-noshot" }, "no screenshot"));
  if (w > 0 && hgt > 0) box.append(actionOverlay(step.screen_actions, w, hgt, focus));
  return box;
}

export function rlValue(v: unknown): string {
  if (v === null || v === undefined) return "—";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v === "number") return formatValue(v);
  return JSON.stringify(v);
}

export async function mountReplay(root: HTMLElement, trajectoryId: number): Promise<void> {
  const t = await api<Replay>(`/api/rl/trajectories/${trajectoryId}/replay/`);
  let selected = 0;
  const stage = h("div", { class: "rv-stage", "data-testid": "stage" });
  const panel = h("div", { class: "rp-panel", "data-testid": "step-panel" });
  const strip = h("div", { class: "rv-strip", "data-testid": "filmstrip" });
  const focusBefore = (i: number): [number, number] | null => lastPoint(t.steps.slice(0, i).map((s) => s.screen_actions));
  const frames = t.steps.map((step, i) => {
    const b = h("button", { type: "button", class: "rv-frame", "data-testid": `frame-${step.index}`, title: step.action_text }, shot(step, "rv-thumb", focusBefore(i)), h("span", { class: "rv-frame-label" }, `${step.index + 1}`, step.reward ? ` · r ${formatValue(step.reward)}` : ""));
    b.addEventListener("click", () => { show(i); });
    return b;
  });
  strip.append(...frames);

  const show = (i: number): void => {
    if (t.steps.length === 0) return;
    selected = Math.max(0, Math.min(t.steps.length - 1, i));
    const step = t.steps[selected];
    if (step === undefined) return;
    frames.forEach((f, k) => f.classList.toggle("sel", k === selected));
    frames[selected]?.scrollIntoView({ block: "nearest", inline: "nearest" });
    render(stage, shot(step, "rv-big", focusBefore(selected)));
    const extra = Object.entries(step.rl).filter(([k]) => !RL_LABELS.some(([n]) => n === k));
    render(
      panel,
      h("h3", {}, `Step ${selected + 1} of ${t.steps.length}`),
      h("p", { class: "rp-thought", "data-testid": "thought" }, step.thought || h("span", { class: "muted" }, "(no thought)")),
      h("p", {}, h("code", { "data-testid": "action-text" }, step.action_text || "—"), step.parse_error ? h("span", { class: "rc-error" }, ` parse error: ${step.parse_error}`) : null),
      h(
        "table",
        { class: "data rp-figures", "data-testid": "step-figures" },
        h("tbody", {},
          h("tr", {}, h("th", {}, "reward"), h("td", { class: "num", "data-testid": "fig-reward" }, formatValue(step.reward))),
          ...RL_LABELS.map(([k, label]) => h("tr", {}, h("th", {}, label), h("td", { class: "num", "data-testid": `fig-${k}` }, rlValue(step.rl[k])))),
          h("tr", {}, h("th", {}, "policy version"), h("td", { class: "num", "data-testid": "fig-version" }, step.policy_version || "—")),
          ...extra.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", { class: "num" }, rlValue(v)))),
        ),
      ),
    );
  };

  const runLink = t.run_id !== null ? h("a", { href: `/runs/${t.run_id}/` }, `run #${t.run_id}`) : h("span", {}, t.annotator ? `annotated by ${t.annotator}` : t.source);
  render(
    root,
    h(
      "div",
      { class: "page-head", "data-testid": "replay-head" },
      h("div", {}, h("h1", {}, `Trajectory #${t.id} · ${t.task}`), h("p", {}, t.instruction), h("p", { class: "muted" }, runLink, ` · ${t.source} · ${t.env_kind} · `, badge(t.status), ` · final reward ${t.final_reward === null ? "—" : formatValue(t.final_reward)} · ${t.validation === null ? "not validated" : `V = ${t.validation}`}${t.policy_version ? ` · policy ${t.policy_version}` : ""}`)),
    ),
    t.judge ? judgeCard(t.judge, t.num_steps) : null,
    t.steps.length === 0
      ? h("p", { class: "notice notice-empty" }, "This trajectory has no steps.")
      : h("div", {}, h("div", { class: "rp-main" }, stage, panel), h("p", { class: "muted" }, "← / → step · Home / End jump · click a frame"), strip),
  );
  document.addEventListener("keydown", (ev) => {
    if (ev.target instanceof HTMLInputElement || ev.target instanceof HTMLTextAreaElement) return;
    if (ev.key === "ArrowRight" || ev.key === "j") show(selected + 1);
    else if (ev.key === "ArrowLeft" || ev.key === "k") show(selected - 1);
    else if (ev.key === "Home") show(0);
    else if (ev.key === "End") show(t.steps.length - 1);
    else return;
    ev.preventDefault();
  });
  show(0);
}
