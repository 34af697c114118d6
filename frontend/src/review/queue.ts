// The reviewer's queue: take the next trajectory (or a chosen one), and the reviews they hold.

import { api } from "../lib/api";
import { badge, h, notice, render, table } from "../lib/dom";
import { ago, reward, truncate } from "../lib/format";
import type { Queue } from "./types";

export function reviewUrl(trajectoryId: number): string {
  return `/review/?t=${trajectoryId}`;
}

export async function take(trajectory: number | null): Promise<number> {
  const body = trajectory === null ? {} : { trajectory };
  const got = await api<{ review_id: number; trajectory_id: number }>("/api/review/take/", { method: "POST", body });
  return got.trajectory_id;
}

export async function mountQueue(el: HTMLElement, go: (url: string) => void): Promise<void> {
  render(el, notice("loading", "Loading the review queue…"));
  const q = await api<Queue>("/api/review/queue/");
  const status = h("div", { class: "rv-take-status" });
  const start = (trajectory: number | null, button: HTMLButtonElement): void => {
    button.disabled = true;
    take(trajectory)
      .then((id) => {
        go(reviewUrl(id));
      })
      .catch((err: unknown) => {
        button.disabled = false;
        render(status, notice("error", err instanceof Error ? err.message : String(err)));
      });
  };
  const next = h("button", { type: "button", class: "btn", "data-testid": "take-next", disabled: q.count === 0 }, "Review the next trajectory");
  next.addEventListener("click", () => {
    start(null, next);
  });
  const open = q.mine.filter((r) => !r.submitted);

  const queueTable =
    q.queue.length === 0
      ? notice("empty", "Nothing is waiting for your review.")
      : h(
          "div",
          { class: "table-wrap" },
          table(q.queue, [
            { label: "Trajectory", cell: (r) => `#${r.id}` },
            { label: "Task", cell: (r) => h("div", {}, h("code", {}, r.task), " ", h("span", { class: "muted" }, r.pool), h("div", { class: "muted rv-instr" }, truncate(r.instruction, 90))) },
            { label: "Steps", cell: (r) => r.num_steps, numeric: true },
            { label: "Reward", cell: (r) => reward(r.final_reward), numeric: true },
            { label: "Reviews", cell: (r) => `${r.reviews} / ${q.reviews_required}`, numeric: true },
            { label: "State", cell: (r) => badge(r.review_state) },
            { label: "Submitted", cell: (r) => ago(r.created_at) },
            {
              label: "",
              cell: (r) => {
                const b = h("button", { type: "button", class: "btn btn-small btn-secondary", "data-testid": `take-${r.id}` }, "Review");
                b.addEventListener("click", () => {
                  start(r.id, b);
                });
                return b;
              },
            },
          ]),
        );
  const mineTable =
    q.mine.length === 0
      ? notice("empty", "You have not reviewed anything yet.")
      : h(
          "div",
          { class: "table-wrap" },
          table(q.mine, [
            { label: "Trajectory", cell: (r) => h("a", { href: reviewUrl(r.trajectory_id) }, `#${r.trajectory_id}`) },
            { label: "Task", cell: (r) => h("code", {}, r.task) },
            { label: "Your verdict", cell: (r) => (r.submitted ? badge(r.verdict, r.verdict === "approve" ? "approved" : r.verdict === "reject" ? "rejected" : "needs_fix") : badge("open", "pending")) },
            { label: "Trajectory state", cell: (r) => badge(r.review_state) },
            { label: "Submitted", cell: (r) => ago(r.completed_at) },
          ]),
        );

  render(
    el,
    h(
      "section",
      { class: "card", "data-testid": "review-queue" },
      h("div", { class: "card-head" }, h("h2", {}, "Waiting for you"), h("span", { class: "muted" }, `${q.count} in your queue · ${q.reviews_required} independent reviews per trajectory`)),
      open.length > 0
        ? h("p", { class: "notice notice-info" }, "You have an open review: ", h("a", { href: reviewUrl(open[0]?.trajectory_id ?? 0) }, `continue trajectory #${open[0]?.trajectory_id ?? ""}`), ".")
        : null,
      h("div", { class: "rv-actions" }, next),
      status,
      queueTable,
    ),
    h("section", { class: "card", "data-testid": "my-reviews" }, h("div", { class: "card-head" }, h("h2", {}, "Your reviews")), mineTable),
  );
}
