// Pools page: every pool with its task count; choose one to list its tasks with success rates.

import { api, resultsOf } from "../lib/api";
import { h, notice, render } from "../lib/dom";
import type { Pool, Task } from "../lib/types";
import { taskColumns } from "./columns";
import { pagedTable } from "./lists";
import type { Widget } from "./mount";

/** The pool to show: `?pool=<id>` when it names a listed pool, else the first pool. */
export function selectedPool(pools: readonly Pool[], search: string): Pool | undefined {
  const wanted = Number(new URLSearchParams(search).get("pool"));
  return pools.find((p) => p.id === wanted) ?? pools[0];
}

export const poolBrowserWidget: Widget = async (el) => {
  render(el, notice("loading", "Loading pools…"));
  const pools = resultsOf(await api<Pool[] | { results: Pool[] }>("/api/pools/?page_size=200"));
  if (pools.length === 0) {
    render(el, notice("empty", "No task pools yet. Admins import tasks into pools (Django admin or the import command)."));
    return;
  }
  const tasks = h("div", { class: "pool-tasks", "data-empty": "This pool has no tasks yet." });
  const heading = h("h2", {});
  const tabs = h("nav", { class: "pool-tabs", "aria-label": "Task pools" });

  const choose = (pool: Pool, push: boolean): void => {
    for (const link of tabs.querySelectorAll("a")) {
      link.classList.toggle("active", link.dataset.poolId === String(pool.id));
    }
    render(heading, pool.name, " ", h("span", { class: "muted" }, `${pool.task_count} tasks · ${pool.validation_mode} validation`));
    if (push) history.replaceState(null, "", `?pool=${pool.id}`);
    pagedTable<Task>(tasks, `/api/tasks/?pool=${pool.id}`, taskColumns).catch((error: unknown) => {
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
