import { describe, expect, it } from "vitest";
import { badge, h, render, table } from "./dom";

describe("h", () => {
  it("sets attributes, skips false ones, and keeps text as text", () => {
    const el = h("a", { href: "/x", hidden: false, "data-id": 3, download: true }, "<b>hi</b>", 5, null);
    expect(el.getAttribute("href")).toBe("/x");
    expect(el.hasAttribute("hidden")).toBe(false);
    expect(el.getAttribute("data-id")).toBe("3");
    expect(el.getAttribute("download")).toBe("");
    expect(el.textContent).toBe("<b>hi</b>5");
    expect(el.querySelector("b")).toBeNull();
  });
});

describe("table", () => {
  it("renders one row per item and right-aligns numeric columns", () => {
    const t = table([{ n: "a", v: 1 }, { n: "b", v: 2 }], [
      { label: "Name", cell: (r) => r.n },
      { label: "Value", cell: (r) => r.v, numeric: true },
    ]);
    expect([...t.querySelectorAll("th")].map((th) => th.textContent)).toEqual(["Name", "Value"]);
    expect(t.querySelectorAll("tbody tr")).toHaveLength(2);
    expect(t.querySelector("td.num")?.textContent).toBe("1");
  });
});

describe("render and badge", () => {
  it("replaces content", () => {
    const el = h("div", {}, "old");
    render(el, badge("in_review"));
    expect(el.innerHTML).toBe('<span class="badge badge-in_review">in review</span>');
  });
});
