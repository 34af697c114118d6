// Small DOM helpers: build elements without innerHTML, so API text can never inject markup.

export type Child = Node | string | number | null | undefined | false;
export type Attrs = Record<string, string | number | boolean | null | undefined>;

/** `h("a", {href: "/x", class: "btn"}, "text")`; `false`/`null` attributes and children are skipped. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(parent: Element, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : String(child));
  }
}

/** Replace everything inside `el` with `children`. */
export function render(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

export function notice(kind: "empty" | "error" | "loading" | "info", text: string): HTMLParagraphElement {
  return h("p", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : null }, text);
}

export interface Column<T> {
  label: string;
  cell: (row: T) => Child;
  numeric?: boolean;
}

export function table<T>(rows: readonly T[], columns: readonly Column<T>[]): HTMLTableElement {
  const head = h("tr", {}, ...columns.map((c) => h("th", { class: c.numeric ? "num" : null }, c.label)));
  const body = rows.map((row) =>
    h("tr", {}, ...columns.map((c) => h("td", { class: c.numeric ? "num" : null }, c.cell(row)))),
  );
  return h("table", { class: "data" }, h("thead", {}, head), h("tbody", {}, ...body));
}

/** A status pill, e.g. `badge("succeeded")` → `<span class="badge badge-succeeded">`. */
export function badge(text: string, variant: string = text): HTMLSpanElement {
  return h("span", { class: `badge badge-${variant.replace(/[^a-z0-9_-]/gi, "")}` }, text.replace(/_/g, " "));
}
