import { afterEach, describe, expect, it, vi } from "vitest";
import { h } from "../lib/dom";
import type { Pool } from "../lib/types";
import { exportFilters, jobRow } from "./exportPanel";
import { pagedTable } from "./lists";
import { mountWidgets } from "./mount";
import { selectedPool } from "./poolBrowser";
import { fileSummary, folderPath, taskFiles } from "./taskImport";

afterEach(() => {
  vi.unstubAllGlobals();
});

function json(body: unknown): Response {
  return new Response(JSON.stringify(body), { status: 200 });
}

describe("mountWidgets", () => {
  it("runs known widgets and flags unknown ones", async () => {
    const root = h("div", {}, h("section", { "data-widget": "hello" }), h("section", { "data-widget": "nope" }));
    mountWidgets(root, { hello: (el) => { el.textContent = "mounted"; } });
    await Promise.resolve();
    expect(root.querySelector('[data-widget="hello"]')?.textContent).toBe("mounted");
    expect(root.querySelector('[data-widget="nope"]')?.textContent).toContain('Unknown section "nope"');
  });

  it("shows a widget's failure in its section", async () => {
    const root = h("div", {}, h("section", { "data-widget": "bad" }));
    mountWidgets(root, { bad: () => Promise.reject(new Error("You do not have permission to do this")) });
    await vi.waitFor(() => {
      expect(root.textContent).toBe("You do not have permission to do this");
    });
  });
});

describe("pagedTable", () => {
  it("shows the empty text", async () => {
    vi.stubGlobal("fetch", vi.fn(() => Promise.resolve(json({ next: null, results: [] }))));
    const el = h("div", { "data-empty": "Queue is empty." });
    await pagedTable(el, "/api/x/", [{ label: "Id", cell: (r: { id: number }) => r.id }]);
    expect(el.textContent).toBe("Queue is empty.");
  });

  it("appends the next page on Show more", async () => {
    const fetchMock = vi
      .fn()
      .mockResolvedValueOnce(json({ count: 3, next: "/api/x/?page=2", results: [{ id: 1 }, { id: 2 }] }))
      .mockResolvedValueOnce(json({ count: 3, next: null, results: [{ id: 3 }] }));
    vi.stubGlobal("fetch", fetchMock);
    const el = h("div");
    await pagedTable(el, "/api/x/", [{ label: "Id", cell: (r: { id: number }) => r.id }]);
    expect(el.querySelectorAll("tbody tr")).toHaveLength(2);
    expect(el.textContent).toContain("2 of 3 shown");
    el.querySelector("button")?.click();
    await vi.waitFor(() => {
      expect(el.querySelectorAll("tbody tr")).toHaveLength(3);
    });
    expect(el.textContent).toContain("3 of 3 shown");
    expect(el.querySelector("button")).toBeNull();
    expect(fetchMock.mock.calls[1]?.[0]).toBe("/api/x/?page=2");
  });
});

describe("export panel", () => {
  it("turns the form into API filters", () => {
    const form = h(
      "form",
      {},
      h("select", { name: "source" }, h("option", { value: "rl", selected: true }, "rl")),
      h("input", { type: "checkbox", name: "validated_only", checked: true }),
      h("input", { type: "text", name: "pool_name", value: "  miniwob " }),
    );
    expect(exportFilters(form)).toEqual({ source: ["rl"], validation: 1, pool_name: "miniwob" });
    const empty = h("form", {}, h("select", { name: "source" }, h("option", { value: "" }, "any")));
    expect(exportFilters(empty)).toEqual({});
  });

  it("offers the download of a finished job and cancel of a running one", () => {
    const base = { id: 3, progress: 100, done_trajectories: 10, total_trajectories: 10, error: "" };
    const done = jobRow({ ...base, status: "succeeded", download_url: "/api/export-jobs/3/download/" }, () => undefined);
    expect(done.querySelector("a")?.getAttribute("href")).toBe("/api/export-jobs/3/download/");
    expect(done.querySelector("button")).toBeNull();
    expect(done.textContent).toContain("10 / 10 trajectories");

    const cancelled: number[] = [];
    const running = jobRow({ ...base, progress: 40, status: "running" }, (id) => cancelled.push(id));
    expect(running.querySelector("a")).toBeNull();
    expect(running.querySelector('[role="progressbar"]')?.getAttribute("aria-valuenow")).toBe("40");
    running.querySelector("button")?.click();
    expect(cancelled).toEqual([3]);

    const failed = jobRow({ ...base, status: "failed", error: "ValueError: invalid filters" }, () => undefined);
    expect(failed.querySelector(".notice-error")?.textContent).toBe("ValueError: invalid filters");
  });
});

describe("selectedPool", () => {
  const pools = [{ id: 4, name: "a" }, { id: 9, name: "b" }] as Pool[];
  it("follows ?pool= and falls back to the first", () => {
    expect(selectedPool(pools, "?pool=9")?.name).toBe("b");
    expect(selectedPool(pools, "?pool=77")?.name).toBe("a");
    expect(selectedPool(pools, "")?.name).toBe("a");
    expect(selectedPool([], "")).toBeUndefined();
  });
});

describe("capped lists", () => {
  it("say they show the latest rows when more exist", async () => {
    vi.stubGlobal("fetch", vi.fn(() => Promise.resolve(json({ next: "/api/x/?cursor=abc", results: [{ id: 1 }] }))));
    const el = h("div", { "data-more": "false" });
    await pagedTable(el, "/api/x/", [{ label: "Id", cell: (r: { id: number }) => r.id }]);
    expect(el.textContent).toContain("Latest 1");
    expect(el.querySelector("button")).toBeNull();
  });
});

describe("task import", () => {
  it("keeps only the files the importers read from a chosen folder", () => {
    const f = (name: string): File => new File(["x"], name);
    const { kept, skipped } = taskFiles([f("a.json"), f("b.jsonl"), f("c.csv"), f("d.tar.gz"), f("README.md"), f(".hidden.json")]);
    expect(kept.map((k) => k.name)).toEqual(["a.json", "b.jsonl", "c.csv", "d.tar.gz"]);
    expect(skipped).toBe(2);
  });
  it("names a folder's files by their path inside it, and leaves hidden folders out", () => {
    const inFolder = (path: string): File => {
      const file = new File(["x"], path.split("/").at(-1) ?? path);
      Object.defineProperty(file, "webkitRelativePath", { value: path });
      return file;
    };
    expect(folderPath(inFolder("tasks/os/tasks.json"))).toBe("os/tasks.json");
    expect(folderPath(inFolder("tasks/good.json"))).toBe("good.json");
    expect(folderPath(new File(["x"], "alone.json"))).toBe("alone.json");
    const { kept, skipped } = taskFiles([inFolder("t/a.json"), inFolder("t/.git/b.json"), inFolder("t/sub/c.json")]);
    expect(kept.map(folderPath)).toEqual(["a.json", "sub/c.json"]);
    expect(skipped).toBe(1);
  });
  it("sums up a file: new, updated, unsupported — or refused with its issue count", () => {
    const task = { external_id: "t", instruction: "", env_kind: "desktop", origin: "a.json", supported: true, unsupported_reasons: [], importance: 1, exists: false };
    expect(fileSummary({ file: "a.json", ok: true, issues: [], tasks: [task, { ...task, exists: true, supported: false }] })).toBe("2 tasks · 1 new · 1 updated · 1 unsupported here (imported disabled)");
    expect(fileSummary({ file: "b.json", ok: false, tasks: [], issues: [{ file: "b.json", field: "id", reason: "missing", message: "" }] })).toBe("refused: 1 issue");
  });
});
