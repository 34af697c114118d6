// Server templates mark where live sections go (`<section data-widget="tasks" ...>`); each page
// entry mounts the widgets it knows. A widget reads its options from the element's data attributes.

import { notice, render } from "../lib/dom";

export type Widget = (el: HTMLElement) => Promise<void> | void;

export function mountWidgets(root: ParentNode, registry: Readonly<Record<string, Widget>>): void {
  for (const el of root.querySelectorAll<HTMLElement>("[data-widget]")) {
    const name = el.dataset.widget ?? "";
    const widget = registry[name];
    if (widget === undefined) {
      render(el, notice("error", `Unknown section "${name}" (no widget in this page's bundle).`));
      continue;
    }
    Promise.resolve()
      .then(() => widget(el))
      .catch((error: unknown) => {
        render(el, notice("error", error instanceof Error ? error.message : String(error)));
      });
  }
}
