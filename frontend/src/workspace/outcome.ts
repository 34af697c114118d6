// The bottom of the side column: write your own action, finish with an answer, mark the task
// infeasible, call the user, submit or abandon — and, once the session is closed, what happened.
// The outcome form is built once, so what the annotator typed survives redraws and refused sends.

import { h, render } from "../lib/dom";
import type { Decision, SessionResult, SessionState } from "./types";

export type OutcomeKind = "finish" | "infeasible" | "call_user";

export interface OutcomeActions {
  writeOwn: () => void;
  decide: (body: Omit<Decision, "obs_version">) => Promise<boolean>;
  submit: () => void;
  abandon: () => void;
  takeNext: (button: HTMLButtonElement) => void;
}

const FORMS: Record<OutcomeKind, { title: string; answer: string | null; send: string; why: string }> = {
  finish: { title: "Finish the task", answer: "Answer (what the task asked for; may be empty)", send: "Finish", why: "Why the task is done" },
  infeasible: { title: "The task cannot be done", answer: null, send: "Mark infeasible", why: "Why it cannot be done" },
  call_user: { title: "Ask the user", answer: "What to ask", send: "Call user", why: "Why you need the user" },
};

export function formatReward(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(2);
}

/** How a closed session reads: its headline and the tone of its box (not a green box for a
 *  trajectory the reviewers sent back). */
export function closedSummary(status: string, fixUrl: string | null): { tone: "ok" | "info" | "warn" | "bad"; text: string } {
  switch (status) {
    case "submitted":
      return { tone: "ok", text: "Submitted — the trajectory is queued for review." };
    case "in_review":
      return { tone: "info", text: "In review — reviewers are looking at this trajectory." };
    case "approved":
      return { tone: "ok", text: "Approved by the reviewers." };
    case "rejected":
      return { tone: "bad", text: "Rejected by the reviewers." };
    case "needs_fix":
      return { tone: "warn", text: fixUrl !== null ? "The reviewers asked for fixes: open the fix view to see their comments per step." : "The reviewers asked for fixes." };
    case "abandoned":
      return { tone: "warn", text: "Abandoned — the steps so far are kept, marked abandoned." };
    default:
      return { tone: "info", text: `Session ${status.replace(/_/g, " ")}.` };
  }
}

/** The task's result as stored (the verifier's final reward), e.g. "Result: success (reward 1)". */
export function resultText(result: SessionResult): string {
  const r = result.final_reward;
  if (r === null) return `Result: not scored (${result.status}).`;
  const verdict = result.success === true ? "success" : result.success === false ? "not solved" : "scored";
  return `Result: ${verdict} — final reward ${formatReward(r)}.`;
}

/** "bad" for a scored failure, so a green "Submitted" box does not read as the task's success. */
export function resultTone(result: SessionResult): "ok" | "bad" | "plain" {
  return result.final_reward === null ? "plain" : result.success === true ? "ok" : result.success === false ? "bad" : "plain";
}

export class OutcomePanel {
  readonly root = h("div", { class: "ws-outcome" });
  private kind: OutcomeKind | null = null;
  private readonly answer = h("input", { type: "text", id: "ws-answer" });
  private readonly answerLabel = h("label", { for: "ws-answer" });
  private readonly thought = h("textarea", { id: "ws-outcome-thought", rows: 2 });
  private readonly title = h("h3");
  private readonly go = h("button", { type: "button", class: "btn btn-small" });
  private readonly form = h(
    "div",
    { class: "ws-outcome-form" },
    this.title,
    this.answerLabel,
    this.answer,
    h("label", { for: "ws-outcome-thought" }, "Thought"),
    this.thought,
    h("div", { class: "ws-editor-buttons" }, this.go),
  );
  private last: { state: SessionState; busy: boolean } | null = null;

  constructor(private readonly actions: OutcomeActions) {
    this.go.addEventListener("click", () => {
      const kind = this.kind;
      if (kind === null) return;
      const body: Omit<Decision, "obs_version"> = { kind, thought: this.thought.value.trim() };
      if (FORMS[kind].answer !== null) body.answer = this.answer.value;
      void this.actions.decide(body).then((ok) => {
        if (ok) this.close();
      });
    });
  }

  close(): void {
    this.kind = null;
    this.answer.value = "";
    this.thought.value = "";
    this.redraw();
  }

  private open(kind: OutcomeKind): void {
    this.kind = this.kind === kind ? null : kind;
    const form = FORMS[kind];
    this.form.dataset.testid = `outcome-${kind}`;
    this.title.textContent = form.title;
    this.answerLabel.textContent = form.answer ?? "";
    this.answerLabel.hidden = form.answer === null;
    this.answer.hidden = form.answer === null;
    this.thought.placeholder = form.why;
    this.go.textContent = form.send;
    this.redraw();
    if (this.kind !== null) (form.answer !== null ? this.answer : this.thought).focus();
  }

  private redraw(): void {
    if (this.last !== null) this.update(this.last.state, this.last.busy);
  }

  update(state: SessionState, busy: boolean): void {
    this.last = { state, busy };
    if (state.status !== "active") {
      const next = h("button", { type: "button", class: "btn" }, "Take the next task");
      next.addEventListener("click", () => {
        this.actions.takeNext(next);
      });
      const fixUrl = state.status === "needs_fix" && state.trajectory_id !== null ? `/workspace/fix/${state.trajectory_id}/` : null;
      const summary = closedSummary(state.status, fixUrl);
      const result = state.result ?? null;
      render(
        this.root,
        h(
          "div",
          { class: `ws-done ws-done-${summary.tone}`, "data-testid": "done", "data-status": state.status },
          h("strong", {}, summary.text),
          result !== null ? h("p", { class: `ws-result ws-result-${resultTone(result)}`, "data-testid": "result", "data-reward": result.final_reward ?? "" }, resultText(result)) : null,
          state.error !== "" ? h("p", {}, state.error) : null,
          h(
            "div",
            { class: "ws-editor-buttons" },
            fixUrl !== null ? h("a", { class: "btn", href: fixUrl, "data-testid": "open-fix" }, "Open the fix view") : null,
            next,
            h("a", { class: "btn btn-secondary", href: "/workspace/" }, "Back to my sessions"),
          ),
        ),
      );
      return;
    }
    const ended = state.observation.env_done;
    const toggle = (label: string, kind: OutcomeKind): HTMLButtonElement => {
      const b = h("button", { type: "button", class: "btn btn-secondary btn-small", disabled: busy, "aria-pressed": String(this.kind === kind) }, label);
      b.addEventListener("click", () => {
        this.open(kind);
      });
      return b;
    };
    const own = h("button", { type: "button", class: "btn btn-secondary btn-small", disabled: busy || ended }, "Write my own (O)");
    own.addEventListener("click", () => {
      this.actions.writeOwn();
    });
    const submit = h("button", { type: "button", class: `btn ${ended ? "" : "btn-secondary"} btn-small`, disabled: busy, "data-testid": "submit" }, "Submit episode");
    submit.addEventListener("click", () => {
      this.actions.submit();
    });
    const abandon = h("button", { type: "button", class: "btn-link" }, "Abandon");
    abandon.addEventListener("click", () => {
      if (window.confirm("Abandon this session? The steps so far are kept, marked abandoned.")) this.actions.abandon();
    });
    this.go.disabled = busy;
    render(
      this.root,
      ended ? h("p", { class: "notice notice-info", "data-testid": "env-done" }, "The environment says the episode is over. Submit it: the verifier's result is shown once it is stored.") : null,
      h("div", { class: "ws-outcome-buttons" }, own, toggle("Finish with answer", "finish"), toggle("Infeasible", "infeasible"), toggle("Call user", "call_user")),
      this.kind !== null ? this.form : null,
      h("div", { class: "ws-outcome-buttons ws-outcome-end" }, submit, abandon),
    );
  }
}
