// Pools page: every pool with its task count; choose one to list its tasks with success rates.

import { api, errorText, resultsOf } from "../lib/api";
import { badge, h, notice, render, type Column } from "../lib/dom";
import type { Pool, Task } from "../lib/types";
import { taskColumns } from "./columns";
import { pagedTable } from "./lists";
import type { Widget } from "./mount";

/** The pool to show: `?pool=<id>` when it names a listed pool, else the first pool. */
export function selectedPool(pools: readonly Pool[], search: string): Pool | undefined {
  const wanted = Number(new URLSearchParams(search).get("pool"));
  return pools.find((p) => p.id === wanted) ?? pools[0];
}

/** A task's state, with why it is unsupported here (the importer's reasons) in words. */
function stateCell(t: Task): HTMLElement {
  if (!t.supported) {
    const reasons = t.unsupported_reasons ?? [];
    return h("span", { class: "pool-unsupported", "data-testid": `unsupported-${t.external_id}` }, badge("unsupported"), reasons.length > 0 ? h("span", { class: "muted" }, ` ${reasons.join("; ")}`) : null);
  }
  return t.enabled ? badge("enabled") : badge("disabled");
}

/** Save one field of a task (admins); the cell shows the saved value or the refusal. */
function saveTask(t: Task, body: Partial<Pick<Task, "enabled" | "importance">>, input: HTMLInputElement, status: HTMLElement): void {
  input.disabled = true;
  api<Task>(`/api/tasks/${t.id}/`, { method: "PATCH", body })
    .then((saved) => {
      Object.assign(t, saved);
      if (input.type === "checkbox") input.checked = saved.enabled;
      else input.value = String(saved.importance);
      status.textContent = "saved";
      status.className = "muted pool-saved";
      // The row's State column follows what was saved.
      const state = input.closest("tr")?.querySelector("td:last-child");
      if (state !== null && state !== undefined) state.replaceChildren(stateCell(t));
    })
    .catch((error: unknown) => {
      status.textContent = errorText(error);
      status.className = "pool-error";
    })
    .finally(() => {
      input.disabled = !t.supported && input.type === "checkbox";
    });
}

/** The pool's task columns; admins edit enabled and importance in place. */
export function poolTaskColumns(admin: boolean): Column<Task>[] {
  const base = taskColumns.filter((c) => c.label !== "State" && c.label !== "Pool");
  if (!admin) return [...base, { label: "Importance", cell: (t) => t.importance.toFixed(2), numeric: true }, { label: "State", cell: stateCell }];
  return [
    ...base,
    {
      label: "Importance",
      cell: (t) => {
        const input = h("input", { type: "number", min: "0", step: "0.1", value: String(t.importance), class: "pool-importance", "aria-label": `Importance of ${t.external_id}`, "data-testid": `importance-${t.external_id}` });
        const status = h("span", { class: "muted" });
        input.addEventListener("change", () => {
          const value = Number(input.value);
          if (!Number.isFinite(value) || value < 0) {
            status.textContent = "a number ≥ 0";
            status.className = "pool-error";
            return;
          }
          saveTask(t, { importance: value }, input, status);
        });
        return h("span", {}, input, " ", status);
      },
    },
    {
      label: "Enabled",
      cell: (t) => {
        const input = h("input", { type: "checkbox", checked: t.enabled, disabled: !t.supported, "aria-label": `Enable ${t.external_id}`, "data-testid": `enabled-${t.external_id}`, title: t.supported ? "" : "Unsupported tasks stay disabled" });
        const status = h("span", { class: "muted" });
        input.addEventListener("change", () => {
          saveTask(t, { enabled: input.checked }, input, status);
        });
        return h("span", {}, input, " ", status);
      },
    },
    { label: "State", cell: stateCell },
  ];
}

/** Admins: queue the no-action check of the pool's enabled OSWorld tasks (docs/osworld.md); tasks
 * that already pass with no action, or whose set-up fails, end up disabled with the reason. */
function osworldCheck(pool: Pool): HTMLElement {
  const status = h("span", { class: "muted", role: "status", "data-testid": "osworld-check-status" });
  const button = h("button", { type: "button", class: "btn btn-secondary btn-small", "data-testid": "osworld-check", title: "Set each enabled OSWorld task up on a real desktop and evaluate it with no action" }, "Check OSWorld tasks");
  button.addEventListener("click", () => {
    button.disabled = true;
    api<{ queued: number }>(`/api/pools/${pool.id}/osworld-check/`, { method: "POST" })
      .then((got) => {
        status.textContent = got.queued === 0 ? " no enabled OSWorld task to check" : ` ${got.queued} task(s) queued for the no-action check; reload to see their state`;
        status.className = "muted";
      })
      .catch((error: unknown) => {
        status.textContent = ` ${errorText(error)}`;
        status.className = "pool-error";
      })
      .finally(() => {
        button.disabled = false;
      });
  });
  return h("span", { class: "pool-osworld-check" }, " ", button, status);
}

export const poolBrowserWidget: Widget = async (el) => {
  const admin = el.dataset.admin === "true";
  // An import on this page shows its pool afterwards (a new pool appears as a tab).
  document.addEventListener("tasks-imported", (ev) => {
    const name = (ev as CustomEvent<{ pool: string }>).detail.pool;
    void api<Pool[] | { results: Pool[] }>("/api/pools/?page_size=200").then((got) => {
      const found = resultsOf(got).find((p) => p.name === name);
      if (found !== undefined) history.replaceState(null, "", `?pool=${found.id}`);
      void poolBrowserWidget(el);
    });
  }, { once: true });
  render(el, notice("loading", "Loading pools…"));
  const pools = resultsOf(await api<Pool[] | { results: Pool[] }>("/api/pools/?page_size=200"));
  if (pools.length === 0) {
    render(el, notice("empty", admin ? "No task pools yet: import task files above." : "No task pools yet. Admins import tasks into pools."));
    return;
  }
  const tasks = h("div", { class: "pool-tasks", "data-empty": "This pool has no tasks yet." });
  const heading = h("h2", {});
  const tabs = h("nav", { class: "pool-tabs", "aria-label": "Task pools" });

  const choose = (pool: Pool, push: boolean): void => {
    for (const link of tabs.querySelectorAll("a")) {
      link.classList.toggle("active", link.dataset.poolId === String(pool.id));
    }
    render(heading, pool.name, " ", h("span", { class: "muted" }, `${pool.task_count} tasks · ${pool.validation_mode} validation`), admin ? osworldCheck(pool) : null);
    if (push) history.replaceState(null, "", `?pool=${pool.id}`);
    pagedTable<Task>(tasks, `/api/tasks/?pool=${pool.id}`, poolTaskColumns(admin)).catch((error: unknown) => {
      render(tasks, notice("error", error instanceof Error ? error.message : String(error)));
    });
  };

  for (const pool of pools) {
    const link = h("a", { href: `?pool=${pool.id}`, "data-pool-id": pool.id }, pool.name, " ", h("span", { class: "count" }, pool.task_count));
    link.addEventListener("click", (event) => {
      event.preventDefault();
      choose(pool, true);
    });
    tabs.append(link);
  }
  render(el, tabs, heading, tasks);
  const first = selectedPool(pools, window.location.search);
  if (first !== undefined) choose(first, false);
};
