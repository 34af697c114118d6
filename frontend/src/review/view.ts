// One trajectory under review: a filmstrip of its steps (screenshot with the executed action drawn
// on it), per-step approve / fix / reject with a comment, the overall verdict, the executability
// replay and near-duplicates of the same task. Other reviews appear only after one's own is in.

import { api } from "../lib/api";
import { badge, h, notice, render, type Child } from "../lib/dom";
import { decisionLabel, decisionNumber, percent, reward, stepNumber } from "../lib/format";
import { actionOverlay, lastPoint, stepShot } from "./draw";
import { take } from "./queue";
import { SpeechPanel } from "./speech";
import { clickText, describeAction, draftProblems, fixPoint, newDraft, submitBody, suggestedVerdict, type Draft } from "./model";

import { VERDICTS, type Executability, type ReviewData, type ReviewJson, type Verdict } from "./types";

const VERDICT_LABEL: Record<Verdict, string> = { approve: "Approve", fix: "Fix", reject: "Reject" };
const VERDICT_BADGE: Record<string, string> = { approve: "approved", fix: "needs_fix", reject: "rejected" };

function verdictBadge(v: string): HTMLSpanElement {
  return badge(v, VERDICT_BADGE[v] ?? v);
}

function execSummary(e: Executability | null): Child {
  if (e === null) return notice("empty", "Not checked yet. The replay runs the executed actions in a fresh environment and re-runs the verifier.");
  if (e.status === "queued" || e.status === "running") return notice("loading", `Replay ${e.status}…`);
  if (e.status === "failed") return h("p", { class: "notice notice-error", "data-testid": "exec-result" }, `Replay failed: ${e.error ?? ""}`);
  const line = `${e.ok === true ? "Executable" : "Not executable"}: ${e.replayed_steps ?? 0} / ${e.total_steps ?? 0} steps replayed, verifier reward ${reward(e.reward ?? null)}.`;
  return h(
    "div",
    { "data-testid": "exec-result" },
    h("p", { class: `notice ${e.ok === true ? "notice-ok" : "notice-error"}` }, line),
    e.error ? h("p", { class: "muted" }, e.error) : null,
    e.note ? h("p", { class: "muted" }, e.note) : e.seed_recorded ? h("p", { class: "muted" }, `Same seed as recorded (${e.seed ?? ""}).`) : null,
  );
}

function otherReview(r: ReviewJson, you = false): HTMLElement {
  const flagged = r.step_verdicts.filter((s) => s.verdict !== "approve");
  return h(
    "div",
    { class: "rv-other", "data-testid": "other-review" },
    h("div", {}, h("strong", {}, r.reviewer), you ? h("span", { class: "muted" }, " (you)") : null, " ", r.completed_at ? verdictBadge(r.verdict) : badge("open", "pending")),
    r.comment ? h("p", {}, r.comment) : null,
    flagged.length > 0 ? h("ul", {}, ...flagged.map((s) => h("li", {}, `Step ${stepNumber(s)}: `, verdictBadge(s.verdict), ` ${s.comment}`))) : null,
  );
}

export class ReviewView {
  private data: ReviewData | null = null;
  private draft: Draft = newDraft([]);
  private selected = 0;
  private poll: number | null = null;
  private speech: SpeechPanel | null = null;
  private keysBound = false;
  private readonly parts = {
    head: h("section", { class: "card rv-head", "data-testid": "review-head" }),
    main: h("div", { class: "rv-main" }),
    strip: h("div", { class: "rv-strip", "data-testid": "filmstrip" }),
    exec: h("section", { class: "card", "data-testid": "executability" }),
    verdict: h("section", { class: "card", "data-testid": "overall" }),
  };

  constructor(
    private readonly el: HTMLElement,
    private readonly trajectoryId: number,
  ) {}

  async start(): Promise<void> {
    render(this.el, notice("loading", "Loading the trajectory…"));
    this.data = await api<ReviewData>(`/api/review/trajectories/${this.trajectoryId}/`);
    this.speech = new SpeechPanel(this.trajectoryId, () => {
      this.renderStep();
    });
    await this.speech.load();
    this.draft = newDraft(this.data.steps.map((s) => s.index));
    const mine = this.data.my_review;
    if (mine?.completed_at) {
      for (const sv of mine.step_verdicts) this.draft.steps.set(sv.index, { verdict: sv.verdict, comment: sv.comment, actionText: sv.action_text ?? "" });
      this.draft.verdict = mine.verdict as Verdict;
      this.draft.comment = mine.comment;
    }
    render(
      this.el,
      h("p", {}, h("a", { href: "/review/" }, "← Review queue")),
      this.parts.head,
      h("section", { class: "card" }, this.parts.main, this.parts.strip),
      h("div", { class: "grid" }, this.parts.verdict, this.parts.exec),
    );
    if (!this.keysBound) {
      this.keysBound = true;
      document.addEventListener("keydown", (ev) => {
        this.onKey(ev);
      });
    }
    this.renderAll();
    if (this.data.executability?.status === "queued" || this.data.executability?.status === "running") this.pollExec();
  }

  private get open(): boolean {
    return this.data?.my_review?.completed_at === null;
  }

  private renderAll(): void {
    this.renderHead();
    this.renderStep();
    this.renderStrip();
    this.renderVerdict();
    this.renderExec();
  }

  private renderHead(): void {
    const d = this.data;
    if (d === null) return;
    const t = d.trajectory;
    const dups = d.duplicates;
    render(
      this.parts.head,
      h("div", { class: "card-head" }, h("h2", {}, `Trajectory #${t.id}`), badge(t.review_state)),
      h("p", { class: "rv-instruction", "data-testid": "instruction" }, t.instruction || d.task.instruction),
      h(
        "p",
        { class: "rv-meta muted" },
        h("code", {}, d.task.external_id),
        ` · ${d.task.pool} · ${d.task.env_kind} · ${t.source}`,
        t.annotator ? ` · by ${t.annotator}` : "",
        ` · ${d.steps.length} steps · reward ${reward(t.final_reward)}`,
        ` · reviews ${d.reviews_done} / ${d.reviews_required}`,
        t.validation !== null ? ` · V(s) = ${t.validation} (${t.validator})` : "",
      ),
      dups.length > 0
        ? h(
            "p",
            { class: "notice notice-warn", "data-testid": "duplicates" },
            "Possible duplicate of ",
            ...dups.flatMap((x, i) => [i > 0 ? ", " : "", `#${x.trajectory_id} (${percent(x.score)} alike${x.annotator ? `, by ${x.annotator}` : ""}, ${x.review_state.replace(/_/g, " ")})`]),
            ": the same task done with near-identical actions.",
          )
        : null,
      d.others_hidden && d.reviews_done > 0
        ? h("p", { class: "muted" }, "Other reviews are hidden until you submit yours.")
        : null,
    );
  }

  private renderStep(): void {
    const d = this.data;
    const step = d?.steps[this.selected];
    if (d === null || step === undefined) {
      render(this.parts.main, notice("empty", "This trajectory has no steps."));
      return;
    }
    const entry = this.draft.steps.get(step.index) ?? { verdict: null, comment: "", actionText: "" };
    const buttons = VERDICTS.map((v) => {
      const b = h("button", { type: "button", class: `btn btn-small rv-v rv-v-${v}${entry.verdict === v ? " on" : ""}`, "aria-pressed": entry.verdict === v ? "true" : "false", disabled: !this.open, "data-testid": `step-${v}` }, VERDICT_LABEL[v]);
      b.addEventListener("click", () => {
        this.setStepVerdict(step.index, v);
      });
      return b;
    });
    const comment = h("textarea", { rows: 3, placeholder: "Comment (required for fix and reject)", disabled: !this.open, "data-testid": "step-comment" });
    comment.value = entry.comment;
    comment.addEventListener("input", () => {
      entry.comment = comment.value;
      this.draft.steps.set(step.index, entry);
      this.renderProblems();
    });
    const stage = stepShot(step, "rv-large", this.focusBefore(this.selected));
    const fixing = entry.verdict === "fix";
    const fix = h("input", { type: "text", class: "rv-fix", placeholder: "Corrected action, e.g. click(start_box='(x,y)') — or click the screen", disabled: !this.open, "data-testid": "step-fix-action" });
    fix.value = entry.actionText;
    const drawFix = (): void => {
      stage.querySelector(".rv-fix-overlay")?.remove();
      const p = fixPoint(entry.actionText);
      const w = step.screen_width ?? 0;
      const hgt = step.screen_height ?? 0;
      if (fixing && p !== null && w > 0 && hgt > 0) {
        const svg = actionOverlay([{ kind: "click", point: p }], w, hgt, null, "#0ca678");
        svg.classList.add("rv-fix-overlay");
        stage.append(svg);
      }
    };
    fix.addEventListener("input", () => {
      entry.actionText = fix.value;
      this.draft.steps.set(step.index, entry);
      drawFix();
    });
    if (fixing && this.open) {
      stage.classList.add("rv-pick");
      stage.addEventListener("click", (ev) => {
        const rect = stage.getBoundingClientRect();
        const w = step.screen_width ?? 0;
        const hgt = step.screen_height ?? 0;
        if (rect.width <= 0 || w <= 0 || hgt <= 0) return;
        const x = Math.min(w - 1, Math.max(0, ((ev.clientX - rect.left) * w) / rect.width));
        const y = Math.min(hgt - 1, Math.max(0, ((ev.clientY - rect.top) * hgt) / rect.height));
        entry.actionText = clickText([x, y]);
        fix.value = entry.actionText;
        this.draft.steps.set(step.index, entry);
        drawFix();
      });
    }
    drawFix();
    const chosen = decisionNumber(step);
    const cands = step.candidates.map((c, i) =>
      h("li", { class: (c.index ?? i) + 1 === chosen ? "rv-chosen" : null, value: (c.index ?? i) + 1 }, h("code", {}, c.action_text ?? ""), c.thought ? h("span", { class: "muted" }, ` — ${c.thought}`) : null),
    );
    const others = d.other_reviews.flatMap((r) => r.step_verdicts.filter((s) => s.index === step.index).map((s) => h("li", {}, `${r.reviewer}: `, verdictBadge(s.verdict), s.comment ? ` ${s.comment}` : "", s.action_text ? h("code", {}, ` → ${s.action_text}`) : null)));
    render(
      this.parts.main,
      h("div", { class: "rv-stage", "data-testid": "stage" }, stage),
      h(
        "div",
        { class: "rv-side", "data-testid": "step-panel" },
        h("h3", {}, `Step ${stepNumber(step)} of ${d.steps.length}`, " ", h("span", { class: "muted", "data-testid": "step-decision" }, decisionLabel(step))),
        step.thought ? h("p", { class: "rv-thought" }, step.thought) : null,
        this.speech?.panel(step.index) ?? (step.human_thought ? h("p", { class: "muted" }, `Said: ${step.human_thought}`) : null),
        // A step stored with its actions but no action string (imported through the API) shows the
        // actions below only: "(no action)" above them would contradict them.
        step.action_text || step.screen_actions.length === 0 ? h("p", {}, h("code", { "data-testid": "step-action" }, step.action_text || "(no action)")) : null,
        h("p", { class: "muted" }, step.screen_actions.map(describeAction).join("; ") || step.parse_error, step.reward ? ` · reward ${reward(step.reward)}` : "", step.done ? " · episode ended" : ""),
        cands.length > 0 ? h("details", {}, h("summary", {}, `${cands.length} model candidates`), h("ol", {}, ...cands)) : null,
        h("div", { class: "rv-verdicts" }, ...buttons),
        comment,
        fixing ? h("label", { class: "rv-fix-label" }, "Corrected action (screen pixels)", fix) : null,
        others.length > 0 ? h("ul", { class: "rv-others" }, ...others) : null,
        h("p", { class: "muted rv-keys" }, "Keys: ← → steps · A approve · F fix · R reject"),
      ),
    );
  }

  private renderStrip(): void {
    const d = this.data;
    if (d === null) return;
    render(
      this.parts.strip,
      ...d.steps.map((step, i) => {
        const v = this.draft.steps.get(step.index)?.verdict ?? null;
        const item = h("button", { type: "button", class: `rv-frame${i === this.selected ? " sel" : ""}${v ? ` rv-f-${v}` : ""}`, "data-testid": `frame-${step.index}`, title: step.action_text }, stepShot(step, "rv-thumb", this.focusBefore(i)), h("span", { class: "rv-frame-label" }, `${stepNumber(step)}`, v ? ` · ${v}` : ""));
        item.addEventListener("click", () => {
          this.select(i);
        });
        return item;
      }),
    );
  }

  private focusBefore(i: number): [number, number] | null {
    return lastPoint((this.data?.steps ?? []).slice(0, i).map((s) => s.screen_actions));
  }

  private renderProblems(): void {
    const box = this.parts.verdict.querySelector<HTMLElement>("[data-problems]");
    const submit = this.parts.verdict.querySelector<HTMLButtonElement>("[data-testid=submit-review]");
    if (box === null || submit === null) return;
    const problems = draftProblems(this.draft);
    render(box, ...problems.map((p) => h("li", {}, p)));
    submit.disabled = problems.length > 0;
  }

  private renderVerdict(): void {
    const d = this.data;
    if (d === null) return;
    if (!this.open) {
      const mine = d.my_review;
      const outcome = d.outcome;
      // No review of this round yet (a fixed trajectory back for round 2, or an admin passing by):
      // claim one here rather than going back to the queue.
      const claimable = mine === null && ["pending", "in_review"].includes(d.trajectory.review_state);
      let claim: HTMLButtonElement | null = null;
      if (claimable) {
        claim = h("button", { type: "button", class: "btn", "data-testid": "claim" }, "Claim it for review");
        claim.addEventListener("click", () => {
          if (claim !== null) claim.disabled = true;
          take(this.trajectoryId)
            .then(() => this.start())
            .catch((err: unknown) => {
              if (claim !== null) claim.disabled = false;
              this.parts.verdict.append(notice("error", err instanceof Error ? err.message : String(err)));
            });
        });
      }
      render(
        this.parts.verdict,
        h("div", { class: "card-head" }, h("h2", {}, "Reviews")),
        mine ? otherReview(mine, true) : claim !== null ? h("div", { "data-testid": "claim-offer" }, h("p", {}, `You hold no review of round ${d.trajectory.review_round ?? 1} of this trajectory.`), claim) : notice("info", "You hold no review of this trajectory (admin view)."),
        ...d.other_reviews.map((r) => otherReview(r)),
        d.others_hidden ? null : d.other_reviews.length === 0 ? notice("empty", "No other review yet.") : null,
        outcome
          ? h("p", { class: "notice notice-info", "data-testid": "outcome" }, `Decided: ${outcome.outcome.replace(/_/g, " ")} · step agreement ${percent(outcome.step_agreement)}`, outcome.disagreeing_steps.length > 0 ? ` · disagreement on step ${outcome.disagreeing_steps.map((i) => i + 1).join(", ")}` : "")
          : h("p", { class: "muted" }, `Waiting for ${d.reviews_required - d.reviews_done} more review(s).`),
      );
      return;
    }
    const suggested = suggestedVerdict(this.draft);
    const radios = VERDICTS.map((v) => {
      const input = h("input", { type: "radio", name: "overall", value: v, checked: this.draft.verdict === v });
      input.addEventListener("change", () => {
        this.draft.verdict = v;
        this.renderProblems();
      });
      return h("label", { class: "rv-radio" }, input, ` ${VERDICT_LABEL[v]}`);
    });
    const comment = h("textarea", { rows: 2, placeholder: "Overall comment (optional)", "data-testid": "overall-comment" });
    comment.value = this.draft.comment;
    comment.addEventListener("input", () => {
      this.draft.comment = comment.value;
    });
    const submit = h("button", { type: "button", class: "btn", "data-testid": "submit-review" }, "Submit review");
    const status = h("div", {});
    submit.addEventListener("click", () => {
      const id = d.my_review?.id;
      if (id === undefined) return;
      submit.disabled = true;
      api<ReviewData>(`/api/review/reviews/${id}/submit/`, { method: "POST", body: submitBody(this.draft) })
        .then((fresh) => {
          this.data = fresh;
          this.renderAll();
        })
        .catch((err: unknown) => {
          submit.disabled = false;
          render(status, notice("error", err instanceof Error ? err.message : String(err)));
        });
    });
    render(
      this.parts.verdict,
      h("div", { class: "card-head" }, h("h2", {}, "Your verdict"), suggested ? h("span", { class: "muted" }, `steps suggest: ${suggested}`) : null),
      h("div", { class: "rv-radios", role: "radiogroup", "aria-label": "Overall verdict" }, ...radios),
      comment,
      h("ul", { class: "rv-problems", "data-problems": "" }),
      h("div", { class: "rv-actions" }, submit),
      status,
    );
    this.renderProblems();
  }

  private renderExec(): void {
    const d = this.data;
    if (d === null) return;
    const e = d.executability;
    const busy = e?.status === "queued" || e?.status === "running";
    const run = h("button", { type: "button", class: "btn btn-secondary", disabled: busy, "data-testid": "run-replay" }, e ? "Replay again" : "Check executability");
    const status = h("div", {});
    run.addEventListener("click", () => {
      run.disabled = true;
      api<{ executability: Executability }>(`/api/review/trajectories/${this.trajectoryId}/executability/`, { method: "POST" })
        .then((got) => {
          d.executability = got.executability;
          this.renderExec();
          this.pollExec();
        })
        .catch((err: unknown) => {
          run.disabled = false;
          render(status, notice("error", err instanceof Error ? err.message : String(err)));
        });
    });
    render(this.parts.exec, h("div", { class: "card-head" }, h("h2", {}, "Executability"), run), execSummary(e), status);
  }

  private pollExec(): void {
    if (this.poll !== null) return;
    this.poll = window.setInterval(() => {
      api<{ executability: Executability | null }>(`/api/review/trajectories/${this.trajectoryId}/executability/`)
        .then((got) => {
          if (this.data === null) return;
          this.data.executability = got.executability;
          const st = got.executability?.status;
          if (st !== "queued" && st !== "running" && this.poll !== null) {
            window.clearInterval(this.poll);
            this.poll = null;
          }
          this.renderExec();
        })
        .catch(() => undefined);
    }, 1500);
  }

  private setStepVerdict(index: number, verdict: Verdict): void {
    const entry = this.draft.steps.get(index) ?? { verdict: null, comment: "", actionText: "" };
    entry.verdict = verdict;
    this.draft.steps.set(index, entry);
    this.renderStep();
    this.renderStrip();
    this.renderVerdict();
    if (verdict !== "approve") this.parts.main.querySelector<HTMLTextAreaElement>("[data-testid=step-comment]")?.focus();
  }

  private select(i: number): void {
    const n = this.data?.steps.length ?? 0;
    if (n === 0) return;
    this.selected = Math.max(0, Math.min(n - 1, i));
    this.speech?.reset();
    this.renderStep();
    this.renderStrip();
  }

  private onKey(ev: KeyboardEvent): void {
    const target = ev.target as HTMLElement | null;
    if (target !== null && (target.tagName === "TEXTAREA" || target.tagName === "INPUT")) return;
    const step = this.data?.steps[this.selected];
    if (ev.key === "ArrowRight") this.select(this.selected + 1);
    else if (ev.key === "ArrowLeft") this.select(this.selected - 1);
    else if (step !== undefined && this.open) {
      const v = ({ a: "approve", f: "fix", r: "reject" } as Record<string, Verdict | undefined>)[ev.key.toLowerCase()];
      if (v !== undefined) this.setStepVerdict(step.index, v);
    }
  }
}

