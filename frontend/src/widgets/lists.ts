// List sections: fetch an API list and show it as a table, with "Show more" while pages remain.

import { api } from "../lib/api";
import { h, notice, render, table, type Column } from "../lib/dom";
import type { Checkpoint, Pool, Task, Trajectory } from "../lib/types";
import { checkpointColumns, poolColumns, taskColumns, trajectoryColumns } from "./columns";
import type { Widget } from "./mount";

interface Page<T> {
  next: string | null;
  results: T[];
  count?: number;
}

/** Show `url`'s rows in `el`; `data-empty` on the element is the text when there are none. */
export async function pagedTable<T>(el: HTMLElement, url: string, columns: readonly Column<T>[]): Promise<void> {
  render(el, notice("loading", "Loading…"));
  const first = await api<Page<T>>(url);
  if (first.results.length === 0) {
    render(el, notice("empty", el.dataset.empty ?? "Nothing here yet."));
    return;
  }
  const tbl = table(first.results, columns);
  const body = tbl.querySelector("tbody");
  const footer = h("div", { class: "table-footer" });
  render(el, h("div", { class: "table-wrap" }, tbl), footer);

  const capped = el.dataset.more === "false";
  let next = capped ? null : first.next;
  let shown = first.results.length;
  const updateFooter = (): void => {
    const total = first.count === undefined ? "" : ` of ${first.count}`;
    // A capped list (data-more="false") with more rows says it shows only the latest ones.
    const label = capped && first.next !== null ? `Latest ${shown}` : `${shown}${total} shown`;
    const more = h("button", { type: "button", class: "btn btn-secondary" }, "Show more");
    more.addEventListener("click", () => {
      if (next === null) return;
      more.disabled = true;
      api<Page<T>>(next)
        .then((page) => {
          const extra = table(page.results, columns).querySelector("tbody");
          if (body !== null && extra !== null) body.append(...extra.children);
          shown += page.results.length;
          next = page.next;
          updateFooter();
        })
        .catch((error: unknown) => {
          render(footer, notice("error", error instanceof Error ? error.message : String(error)));
        });
    });
    render(footer, h("span", { class: "muted" }, label), next !== null && more);
  };
  updateFooter();
}

function query(el: HTMLElement, defaults: string): string {
  const extra = el.dataset.query ?? "";
  return [defaults, extra].filter((part) => part !== "").join("&");
}

export const tasksWidget: Widget = (el) =>
  pagedTable<Task>(el, `/api/tasks/?${query(el, "")}`, taskColumns);

export const trajectoriesWidget: Widget = (el) =>
  pagedTable<Trajectory>(el, `/api/trajectories/?${query(el, `page_size=${el.dataset.limit ?? "10"}`)}`, trajectoryColumns);

export const poolsWidget: Widget = (el) => pagedTable<Pool>(el, `/api/pools/?${query(el, "")}`, poolColumns);

export const checkpointsWidget: Widget = (el) =>
  pagedTable<Checkpoint>(el, `/api/checkpoints/?${query(el, "")}`, checkpointColumns);
