// The workspace's panels as DOM builders: the candidate cards, the timeline of steps, the header.

import { badge, h, type Child } from "../lib/dom";
import { decisionLabel, probabilityText, stepNumber } from "../lib/format";
import { formatReward } from "./outcome";
import { colourOf } from "./overlay";
import type { Candidate, Candidates, SessionState, StepRecord } from "./types";

export interface CandidateHandlers {
  accept: (index: number) => void;
  edit: (index: number) => void;
  hover: (index: number | null) => void;
}

function candidateCard(c: Candidate, handlers: CandidateHandlers, enabled: boolean): HTMLElement {
  const key = String(c.index + 1);
  const accept = h("button", { type: "button", class: "btn btn-small", disabled: !enabled || c.parse_error !== "" || c.clamped }, `Accept `, h("kbd", {}, key));
  const edit = h("button", { type: "button", class: "btn btn-secondary btn-small", disabled: !enabled }, "Edit");
  accept.addEventListener("click", () => {
    handlers.accept(c.index);
  });
  edit.addEventListener("click", () => {
    handlers.edit(c.index);
  });
  const card = h(
    "li",
    { class: "ws-cand", "data-index": c.index, "data-testid": `candidate-${c.index}`, style: `--cand: ${colourOf(c.index)}` },
    h(
      "div",
      { class: "ws-cand-head" },
      h("span", { class: "ws-key", "aria-hidden": "true" }, key),
      h("strong", {}, `Candidate ${key}`),
      c.greedy === true ? h("span", { class: "badge", title: "the model's own top answer (greedy decoding)", "data-testid": `greedy-${c.index}` }, "top") : null,
      c.logprob === null ? null : h("span", { class: "muted ws-logprob", title: `the model's probability of this answer (log p ${c.logprob.toFixed(1)})`, "data-testid": `probability-${c.index}` }, probabilityText(c.probability ?? Math.exp(c.logprob))),
    ),
    c.thought !== "" ? h("p", { class: "ws-thought", title: c.thought }, c.thought) : h("p", { class: "ws-thought muted" }, "(no thought)"),
    h("code", { class: "ws-action-text" }, c.action_text || c.raw_text),
    c.parse_error !== "" && h("p", { class: "ws-warn" }, `Does not parse: ${c.parse_error}. Edit it to use it.`),
    c.clamped && h("p", { class: "ws-warn", "data-testid": `offscreen-${c.index}` }, `${c.error !== undefined && c.error !== "" ? c.error : "A point is outside the screen"} — drawn at the edge; edit it to use it.`),
    h("div", { class: "ws-cand-buttons" }, accept, edit),
  );
  card.addEventListener("mouseenter", () => {
    handlers.hover(c.index);
  });
  card.addEventListener("mouseleave", () => {
    handlers.hover(null);
  });
  return card;
}

/** The candidates column: pending indicator, the model's error, or the cards. */
export function candidatesPanel(
  cands: Candidates,
  expected: number,
  pendingSince: number,
  handlers: CandidateHandlers,
  enabled: boolean,
): Child[] {
  if (cands.status === "pending") {
    const seconds = Math.max(0, Math.round((Date.now() - pendingSince) / 1000));
    return [
      h(
        "div",
        { class: "ws-pending", role: "status", "data-testid": "candidates-pending" },
        h("span", { class: "ws-spinner", "aria-hidden": "true" }),
        h("div", {}, h("strong", {}, `The model is proposing ${expected} actions…`), h("br"), h("span", { class: "muted", "data-elapsed": "" }, `${seconds} s`)),
      ),
      h("ul", { class: "ws-cands ws-cands-skeleton", "aria-hidden": "true" }, ...Array.from({ length: expected }, () => h("li", { class: "ws-cand" }))),
      h("p", { class: "muted" }, "You don't have to wait: click the screen or press O to write your own action."),
    ];
  }
  if (cands.status === "failed") {
    return [
      h("div", { class: "notice notice-error", role: "alert", "data-testid": "candidates-failed" }, h("strong", {}, "The model could not propose actions. "), cands.error || "No reason given."),
      h("p", { class: "muted" }, "Write your own action: click the screen or press O."),
    ];
  }
  if (cands.status === "none" || cands.items.length === 0) {
    return [h("p", { class: "notice notice-empty", "data-testid": "candidates-none" }, cands.error ? `No candidates for this screen: ${cands.error}.` : "No candidates for this screen.")];
  }
  return [
    h("ul", { class: "ws-cands", "data-testid": "candidates" }, ...cands.items.map((c) => candidateCard(c, handlers, enabled))),
    cands.model_ms !== null ? h("p", { class: "muted ws-small" }, `Proposed in ${(cands.model_ms / 1000).toFixed(1)} s`) : null,
  ];
}

const DECISION_VARIANT: Record<string, string> = {
  accepted: "dec-accepted",
  edited: "dec-edited",
  overridden: "dec-overridden",
  takeover: "dec-takeover",
};

export function decisionBadge(step: StepRecord): HTMLElement {
  const el = badge(decisionLabel(step) || "step", DECISION_VARIANT[step.decision] ?? "info");
  el.dataset.decision = step.decision;
  return el;
}

/** One step of the timeline: its screenshot with the executed points, thought, action, decision. */
export function stepCard(step: StepRecord, screen: { width: number; height: number }): HTMLElement {
  const inner = h("div", { class: "ws-thumb-inner" });
  const thumb = h("div", { class: "ws-thumb" }, inner);
  if (step.screenshot_url !== "") inner.append(h("img", { src: step.screenshot_url, alt: `Screen before step ${stepNumber(step)}`, loading: "lazy" }));
  if (screen.width > 0 && screen.height > 0) {
    for (const [x, y] of step.executed_points) {
      inner.append(h("span", { class: "ws-thumb-dot", style: `left: ${(100 * x) / screen.width}%; top: ${(100 * y) / screen.height}%` }));
    }
  }
  return h(
    "li",
    { class: "ws-step", "data-testid": `step-${step.index}` },
    thumb,
    h("div", { class: "ws-step-head" }, h("strong", {}, `Step ${stepNumber(step)}`), decisionBadge(step), step.reward !== 0 ? h("span", { class: "muted" }, `reward ${Number.isInteger(step.reward) ? step.reward : step.reward.toFixed(2)}`) : null),
    h("p", { class: "ws-thought", title: step.thought }, step.thought || "(no thought)"),
    h("code", { class: "ws-action-text", title: step.action_text }, step.action_text),
  );
}

export function timeline(state: SessionState): Child[] {
  if (state.steps.length === 0) return [h("p", { class: "muted ws-timeline-empty" }, "No steps yet: your decisions appear here.")];
  return [h("ol", { class: "ws-steps", "data-testid": "timeline" }, ...state.steps.map((s) => stepCard(s, state.observation)))];
}

/** The chips under the instruction: task, pool, environment, model, track, status, progress. */
export function headerMeta(state: SessionState): Child[] {
  const obs = state.observation;
  return [
    h("span", { class: "ws-chip", title: "task" }, state.task.external_id),
    h("span", { class: "ws-chip", title: "pool" }, state.task.pool),
    h("span", { class: "ws-chip", title: "environment" }, state.task.env_kind),
    h("span", { class: "ws-chip", title: state.policy.measured ? `annotation model: ${state.policy.measured} (greedy, held-out seeds)` : "annotation model (never measured)", "data-testid": "model-chip" }, state.policy.measured ? `model ${state.policy.model} · ${state.policy.measured}` : `model ${state.policy.model}`),
    h("span", { class: "ws-chip", title: "track" }, state.track),
    badge(state.status, state.status === "active" ? "running" : state.status === "submitted" ? "succeeded" : "failed"),
    h("span", { class: "muted", "data-testid": "step-count" }, `${state.steps.length} step${state.steps.length === 1 ? "" : "s"}`),
    h("span", { class: "muted" }, `screen ${obs.width}×${obs.height}`),
    // The stored result once there is one; before, the last step's own reward (not the task's result).
    state.result?.final_reward !== undefined && state.result.final_reward !== null
      ? h("span", { class: "ws-chip ws-reward", "data-testid": "result-chip" }, `result ${formatReward(state.result.final_reward)}`)
      : obs.reward !== 0
        ? h("span", { class: "ws-chip", title: "the environment's reward for the last step (not the task's result)" }, `step reward ${formatReward(obs.reward)}`)
        : null,
  ];
}

/** The mode pill, and for desktops the take-over toggle (enabled once the live desktop is up). */
export function modeControls(desktop: boolean, takeover: boolean, canToggle: boolean, toggle: () => void): Child[] {
  const pill = h(
    "span",
    { class: "ws-mode-pill", "data-mode": takeover ? "takeover" : "proposal", "data-testid": "mode" },
    takeover ? "Take-over: you drive the desktop" : "Proposal mode",
  );
  if (!desktop) return [pill];
  const button = h(
    "button",
    { type: "button", class: `btn btn-small ${takeover ? "" : "btn-secondary"}`, "aria-pressed": String(takeover), disabled: !canToggle, "data-testid": "takeover-toggle", title: "Alt+T" },
    takeover ? "Back to proposals (Alt+T)" : "Take over (Alt+T)",
  );
  button.addEventListener("click", toggle);
  return [pill, button];
}
