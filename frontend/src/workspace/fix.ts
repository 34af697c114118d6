// The fix view (/workspace/fix/<trajectory>/?step=N): a trajectory the reviewers sent back. The
// annotator reads their comments per step, opens the trajectory at a flagged step, edits a thought in
// place, or changes an action — which re-executes from that step as a new branch (steps before it
// replayed on the same seed) and continues in the workspace — and resubmits for review.
// API: docs/annotation.md "Review states, routing and the fix loop".

import "../review/review.css";
import { api, errorText } from "../lib/api";
import { badge, h, notice, render } from "../lib/dom";
import { decisionLabel, reward, stepNumber } from "../lib/format";
import { lastPoint, stepShot } from "../review/draw";
import type { ScreenStep, TaskBrief } from "../lib/trajectory";
import type { SessionState } from "./types";

export interface FixComment {
  reviewer: string;
  verdict: string;
  comment: string;
  action_text: string;
}

export interface FixStep extends ScreenStep {
  number: number;
  decision_number: number | null;
  edited: boolean;
  comments: FixComment[];
}

export interface FixData {
  trajectory: {
    id: number;
    review_state: string;
    review_round: number;
    instruction: string;
    final_reward: number | null;
    status: string;
    seed: number | null;
    branch_of: number | null;
    branch_step: number | null;
    superseded_by: number | null;
  };
  task: TaskBrief;
  reviews: { reviewer: string; verdict: string; comment: string }[];
  steps: FixStep[];
  flagged_steps: number[];
}

interface BranchAnswer {
  session: SessionState;
  trajectory_id: number;
  branch_of: number;
  branch_step: number;
}

const VERDICT_TONE: Record<string, string> = { approve: "approved", fix: "needs_fix", reject: "rejected" };

/** The position in `steps` to open: `?step=N` (1-based, as shown) when it names a step, else the
 *  first flagged step, else the first. */
export function initialStep(steps: readonly FixStep[], flagged: readonly number[], wanted: number | null): number {
  if (wanted !== null) {
    const at = steps.findIndex((s) => stepNumber(s) === wanted);
    if (at >= 0) return at;
  }
  const first = steps.findIndex((s) => flagged.includes(s.index));
  return Math.max(0, first);
}

export class FixView {
  private data: FixData | null = null;
  private selected = 0;
  private readonly head = h("section", { class: "card rv-head", "data-testid": "fix-head" });
  private readonly main = h("div", { class: "rv-main" });
  private readonly strip = h("div", { class: "rv-strip", "data-testid": "filmstrip" });
  private readonly foot = h("section", { class: "card", "data-testid": "fix-resubmit" });
  private readonly status = h("div", { "aria-live": "polite", "data-testid": "fix-status" });

  constructor(
    private readonly el: HTMLElement,
    private readonly trajectoryId: number,
  ) {}

  private get base(): string {
    return `/api/annotation/fixes/${this.trajectoryId}/`;
  }

  private get open(): boolean {
    return this.data?.trajectory.review_state === "needs_fix";
  }

  async start(): Promise<void> {
    try {
      this.data = await api<FixData>(this.base);
    } catch (error) {
      render(this.el, notice("error", `Could not load the trajectory: ${errorText(error)}`));
      return;
    }
    const wanted = Number(new URLSearchParams(window.location.search).get("step"));
    this.selected = initialStep(this.data.steps, this.data.flagged_steps, Number.isInteger(wanted) && wanted > 0 ? wanted : null);
    render(
      this.el,
      h("p", {}, h("a", { href: "/workspace/" }, "← Workspace")),
      this.head,
      this.status,
      h("section", { class: "card" }, this.main, this.strip),
      this.foot,
    );
    document.addEventListener("keydown", (ev) => {
      const target = ev.target as HTMLElement | null;
      if (target !== null && ["TEXTAREA", "INPUT"].includes(target.tagName)) return;
      if (ev.key === "ArrowRight") this.select(this.selected + 1);
      else if (ev.key === "ArrowLeft") this.select(this.selected - 1);
    });
    this.renderAll();
  }

  private renderAll(): void {
    this.renderHead();
    this.renderStep();
    this.renderStrip();
    this.renderFoot();
  }

  private say(kind: "info" | "error" | "ok", text: string): void {
    render(this.status, text === "" ? null : h("p", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : "status" }, text));
  }

  private renderHead(): void {
    const d = this.data;
    if (d === null) return;
    const t = d.trajectory;
    const flagged = d.steps.filter((s) => d.flagged_steps.includes(s.index));
    const jumps = flagged.map((s) => {
      const b = h("button", { type: "button", class: "btn btn-small btn-secondary", "data-testid": `jump-${stepNumber(s)}` }, `Step ${stepNumber(s)}`);
      b.addEventListener("click", () => {
        this.select(d.steps.indexOf(s));
      });
      return b;
    });
    render(
      this.head,
      h("div", { class: "card-head" }, h("h2", {}, `Fix trajectory #${t.id}`), badge(t.review_state.replace(/_/g, " "), t.review_state), h("span", { class: "muted" }, `review round ${t.review_round}`)),
      h("p", { class: "rv-instruction", "data-testid": "instruction" }, t.instruction),
      h("p", { class: "rv-meta muted" }, h("code", {}, d.task.external_id), ` · ${d.task.pool} · ${d.task.env_kind} · ${d.steps.length} steps · final reward ${reward(t.final_reward)}`, t.branch_of !== null ? ` · branch of #${t.branch_of} from step ${(t.branch_step ?? 0) + 1}` : ""),
      d.reviews.length > 0
        ? h(
            "ul",
            { class: "fx-reviews", "data-testid": "fix-reviews" },
            ...d.reviews.map((r) => h("li", {}, h("strong", {}, r.reviewer), " ", badge(r.verdict, VERDICT_TONE[r.verdict] ?? r.verdict), r.comment ? ` ${r.comment}` : "")),
          )
        : null,
      !this.open
        ? notice("info", t.superseded_by !== null ? `This trajectory was replaced by its branch #${t.superseded_by}; nothing is left to fix here.` : `This trajectory is ${t.review_state.replace(/_/g, " ")}: nothing to fix now.`)
        : flagged.length > 0
          ? h("p", { class: "fx-flagged" }, "The reviewers flagged: ", ...jumps)
          : h("p", { class: "muted" }, "The reviewers flagged no single step; see their comments above."),
    );
  }

  private renderStep(): void {
    const d = this.data;
    const step = d?.steps[this.selected];
    if (d === null || step === undefined) {
      render(this.main, notice("empty", "This trajectory has no steps."));
      return;
    }
    const open = this.open;
    const thought = h("textarea", { rows: 4, disabled: !open, "data-testid": "fix-thought", "aria-label": `Thought of step ${stepNumber(step)}` });
    thought.value = step.thought;
    const saveThought = h("button", { type: "button", class: "btn btn-small", disabled: !open, "data-testid": "fix-save-thought" }, "Save thought");
    saveThought.addEventListener("click", () => {
      void this.saveThought(step, thought.value, saveThought);
    });
    const action = h("input", { type: "text", class: "rv-fix", value: step.action_text, disabled: !open, "data-testid": "fix-action", "aria-label": `Action of step ${stepNumber(step)}` });
    const branch = h("button", { type: "button", class: "btn btn-small", disabled: true, "data-testid": "fix-branch" }, `Re-execute from step ${stepNumber(step)}`);
    const syncBranch = (): void => {
      branch.disabled = !open || action.value.trim() === "" || action.value.trim() === step.action_text.trim();
    };
    action.addEventListener("input", syncBranch);
    branch.addEventListener("click", () => {
      void this.branch(step, action.value.trim(), thought.value, branch);
    });
    const comments = step.comments.map((c) => {
      let use: HTMLButtonElement | null = null;
      if (c.action_text !== "" && open) {
        use = h("button", { type: "button", class: "btn btn-small btn-secondary" }, "Use this action");
        use.addEventListener("click", () => {
          action.value = c.action_text;
          syncBranch();
          action.focus();
        });
      }
      return h(
        "li",
        { class: "fx-comment" },
        h("strong", {}, c.reviewer), " ", badge(c.verdict, VERDICT_TONE[c.verdict] ?? c.verdict), c.comment ? ` ${c.comment}` : "",
        c.action_text !== "" ? h("div", {}, "suggests ", h("code", {}, c.action_text), " ", use) : null,
      );
    });
    const focus = lastPoint(d.steps.slice(0, this.selected).map((s) => s.screen_actions));
    render(
      this.main,
      h("div", { class: "rv-stage", "data-testid": "stage" }, stepShot(step, "rv-large", focus)),
      h(
        "div",
        { class: "rv-side", "data-testid": "step-panel" },
        h("h3", {}, `Step ${stepNumber(step)} of ${d.steps.length}`, " ", h("span", { class: "muted", "data-testid": "step-decision" }, decisionLabel(step)), step.edited ? h("span", { class: "muted" }, " · thought edited") : null),
        comments.length > 0 ? h("ul", { class: "rv-others", "data-testid": "fix-comments" }, ...comments) : h("p", { class: "muted" }, "No reviewer comment on this step."),
        h("label", { class: "rv-fix-label" }, "Thought", thought),
        h("div", { class: "rv-actions" }, saveThought, h("span", { class: "muted" }, "Changes the text only; the steps stay as executed.")),
        h("label", { class: "rv-fix-label" }, "Action (screen pixels)", action),
        h("div", { class: "rv-actions" }, branch),
        h("p", { class: "muted" }, `A changed action is re-executed: a fresh environment on the same seed ${stepNumber(step) > 1 ? `replays steps 1–${stepNumber(step) - 1}, then runs` : "runs"} your action as step ${stepNumber(step)}; you continue in the workspace, and Finish there sends the new branch to review in place of this one.`),
        h("p", { class: "muted rv-keys" }, "Keys: ← → steps"),
      ),
    );
  }

  private renderStrip(): void {
    const d = this.data;
    if (d === null) return;
    render(
      this.strip,
      ...d.steps.map((step, i) => {
        const flagged = d.flagged_steps.includes(step.index);
        const item = h(
          "button",
          { type: "button", class: `rv-frame${i === this.selected ? " sel" : ""}${flagged ? " rv-f-fix" : ""}`, "data-testid": `frame-${step.index}`, title: step.action_text },
          stepShot(step, "rv-thumb", lastPoint(d.steps.slice(0, i).map((s) => s.screen_actions))),
          h("span", { class: "rv-frame-label" }, `${stepNumber(step)}`, flagged ? " · flagged" : "", step.edited ? " · edited" : ""),
        );
        item.addEventListener("click", () => {
          this.select(i);
        });
        return item;
      }),
    );
  }

  private renderFoot(): void {
    const d = this.data;
    if (d === null) return;
    const resubmit = h("button", { type: "button", class: "btn", disabled: !this.open, "data-testid": "fix-resubmit-button" }, "Resubmit for review");
    resubmit.addEventListener("click", () => {
      void this.resubmit(resubmit);
    });
    render(
      this.foot,
      h("div", { class: "card-head" }, h("h2", {}, "Done fixing?")),
      h("p", { class: "muted" }, "Resubmit sends this trajectory, with the thoughts you edited, to a new review round. (A changed action is submitted from the workspace instead, as its branch.)"),
      h("div", { class: "rv-actions" }, resubmit),
    );
  }

  private select(i: number): void {
    const n = this.data?.steps.length ?? 0;
    if (n === 0) return;
    this.selected = Math.max(0, Math.min(n - 1, i));
    const step = this.data?.steps[this.selected];
    if (step !== undefined) {
      const url = new URL(window.location.href);
      url.searchParams.set("step", String(stepNumber(step)));
      window.history.replaceState(null, "", url);
    }
    this.renderStep();
    this.renderStrip();
  }

  private async saveThought(step: FixStep, text: string, button: HTMLButtonElement): Promise<void> {
    button.disabled = true;
    try {
      const got = await api<{ step: FixStep }>(`${this.base}steps/${step.index}/`, { method: "PATCH", body: { thought: text } });
      const d = this.data;
      if (d !== null) d.steps = d.steps.map((s) => (s.index === step.index ? got.step : s));
      this.say("ok", `Thought of step ${stepNumber(step)} saved.`);
      this.renderStep();
      this.renderStrip();
    } catch (error) {
      button.disabled = false;
      this.say("error", `Could not save the thought: ${errorText(error)}`);
    }
  }

  private async branch(step: FixStep, actionText: string, thought: string, button: HTMLButtonElement): Promise<void> {
    button.disabled = true;
    this.say("info", `Re-executing up to step ${stepNumber(step)} in a fresh environment…`);
    try {
      const got = await api<BranchAnswer>(`${this.base}steps/${step.index}/branch/`, { method: "POST", body: { action_text: actionText, thought, convention: "screen" } });
      this.say("ok", `Branch #${got.trajectory_id} started: continuing in the workspace…`);
      window.location.assign(`/workspace/${got.session.id}/`);
    } catch (error) {
      button.disabled = false;
      this.say("error", `Could not re-execute: ${errorText(error)}`);
    }
  }

  private async resubmit(button: HTMLButtonElement): Promise<void> {
    button.disabled = true;
    try {
      const got = await api<{ trajectory_id: number; review_state: string; review_round: number }>(`${this.base}resubmit/`, { method: "POST" });
      const d = this.data;
      if (d !== null) {
        d.trajectory.review_state = got.review_state;
        d.trajectory.review_round = got.review_round;
      }
      this.renderAll();
      this.say("ok", `Resubmitted: trajectory #${got.trajectory_id} is ${got.review_state.replace(/_/g, " ")} (review round ${got.review_round}).`);
    } catch (error) {
      button.disabled = false;
      this.say("error", `Could not resubmit: ${errorText(error)}`);
    }
  }
}
