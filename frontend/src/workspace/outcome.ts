// The bottom of the side column: write your own action, finish with an answer, mark the task
// infeasible, call the user, submit or abandon — and, once the session is closed, what happened.
// The outcome form is built once, so what the annotator typed survives redraws and refused sends.

import { h, render } from "../lib/dom";
import type { Decision, SessionState } from "./types";

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
      render(
        this.root,
        h(
          "div",
          { class: `ws-done ws-done-${state.status}`, "data-testid": "done" },
          h("strong", {}, state.status === "submitted" ? "Submitted — the trajectory is queued for review." : `Session ${state.status}.`),
          state.error !== "" ? h("p", {}, state.error) : null,
          h("div", { class: "ws-editor-buttons" }, next, h("a", { class: "btn btn-secondary", href: "/workspace/" }, "Back to my sessions")),
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
      ended ? h("p", { class: "notice notice-info", "data-testid": "env-done" }, `The environment says the episode is over (reward ${formatReward(state.observation.reward)}). Submit it.`) : null,
      h("div", { class: "ws-outcome-buttons" }, own, toggle("Finish with answer", "finish"), toggle("Infeasible", "infeasible"), toggle("Call user", "call_user")),
      this.kind !== null ? this.form : null,
      h("div", { class: "ws-outcome-buttons ws-outcome-end" }, submit, abandon),
    );
  }
}
