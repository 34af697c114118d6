// Pools page, admins: import task files in the browser. Choose files or a whole folder (OSWorld
// .json, .jsonl, .csv, archives); the server reads them without writing (preview) and says per file
// which tasks it would create or update, which are unsupported here and why, and which files it
// refuses with a reason per task. Import then writes the good files; the refused ones stay listed.
// API: POST /api/tasks/import/preview/ and /api/tasks/import/ (docs/api.md).

import { api, ApiError, errorText } from "../lib/api";
import { badge, h, notice, render, type Child } from "../lib/dom";
import { truncate } from "../lib/format";
import type { Widget } from "./mount";

export interface ImportIssue {
  file: string;
  field: string;
  reason: string;
  message: string;
}

export interface PreviewTask {
  external_id: string;
  instruction: string;
  env_kind: string;
  origin: string;
  supported: boolean;
  unsupported_reasons: string[];
  importance: number;
  exists: boolean;
}

export interface FileReport {
  file: string;
  ok: boolean;
  tasks: PreviewTask[];
  issues: ImportIssue[];
}

export interface Preview {
  pool_exists: boolean;
  importable: number;
  refused_files: number;
  files: FileReport[];
}

interface ImportAnswer {
  created: number;
  updated: number;
  unsupported: number;
  refused_files: number;
  files: FileReport[];
}

/** Files the importers read (anything else in a chosen folder is left out before upload). */
const TASK_FILE = /\.(json|jsonl|csv|zip|tar|tgz|tar\.gz)$/i;

/** A file's path inside the chosen folder ("sub/tasks.json"; the folder's own name left out), or
 *  its name when it was chosen alone. The server checks it (webapp/store/names.py). */
export function folderPath(f: { name: string; webkitRelativePath?: string }): string {
  const parts = (f.webkitRelativePath ?? "").split("/");
  return parts.length > 1 ? parts.slice(1).join("/") : f.name;
}

export function taskFiles(files: readonly File[]): { kept: File[]; skipped: number } {
  // Hidden files and folders (".git/…") are left out like any file the importers do not read.
  const kept = files.filter((f) => TASK_FILE.test(f.name) && !folderPath(f).split("/").some((part) => part.startsWith(".")));
  return { kept, skipped: files.length - kept.length };
}

/** One line per file: how many tasks it gives (new / updates / unsupported) or why it is refused. */
export function fileSummary(f: FileReport): string {
  if (!f.ok) return `refused: ${f.issues.length} issue${f.issues.length === 1 ? "" : "s"}`;
  const fresh = f.tasks.filter((t) => !t.exists).length;
  const unsupported = f.tasks.filter((t) => !t.supported).length;
  const parts = [`${f.tasks.length} task${f.tasks.length === 1 ? "" : "s"}`, `${fresh} new`, `${f.tasks.length - fresh} updated`];
  if (unsupported > 0) parts.push(`${unsupported} unsupported here (imported disabled)`);
  return parts.join(" · ");
}

function reportView(files: readonly FileReport[]): HTMLElement {
  return h(
    "ul",
    { class: "ti-files", "data-testid": "import-report" },
    ...files.map((f) =>
      h(
        "li",
        { class: `ti-file ${f.ok ? "ti-ok" : "ti-bad"}`, "data-testid": `import-file-${f.file}`, "data-ok": String(f.ok) },
        h("div", { class: "ti-file-head" }, badge(f.ok ? "ok" : "refused", f.ok ? "succeeded" : "failed"), " ", h("strong", {}, f.file), " ", h("span", { class: "muted" }, fileSummary(f))),
        f.issues.length > 0 ? h("ul", { class: "ti-issues" }, ...f.issues.map((i) => h("li", {}, h("code", {}, i.file), i.field ? ` ${i.field}: ` : ": ", i.reason))) : null,
        f.tasks.length > 0
          ? h(
              "table",
              { class: "ti-tasks" },
              h("tbody", {}, ...f.tasks.map((t) =>
                h(
                  "tr",
                  {},
                  h("td", {}, h("code", {}, t.external_id)),
                  h("td", {}, t.env_kind),
                  h("td", { title: t.instruction }, truncate(t.instruction, 80)),
                  h("td", {}, t.exists ? "update" : "new"),
                  h("td", {}, t.supported ? "" : h("span", { class: "ti-unsupported" }, `unsupported: ${t.unsupported_reasons.join("; ")}`)),
                ),
              )),
            )
          : null,
      ),
    ),
  );
}

export const taskImportWidget: Widget = (el) => {
  const pool = h("input", { type: "text", id: "ti-pool", required: true, placeholder: "pool name", "data-testid": "import-pool", list: "ti-pools" });
  const pools = h("datalist", { id: "ti-pools" });
  const create = h("input", { type: "checkbox", id: "ti-create", checked: true });
  const files = h("input", { type: "file", multiple: true, accept: ".json,.jsonl,.csv,.zip,.tar,.tgz,.gz", "data-testid": "import-files", id: "ti-files" });
  const folder = h("input", { type: "file", multiple: true, "data-testid": "import-folder", id: "ti-folder" });
  folder.setAttribute("webkitdirectory", "");
  const previewBox = h("div", { "aria-live": "polite", "data-testid": "import-preview" });
  const go = h("button", { type: "button", class: "btn", disabled: true, "data-testid": "import-go" }, "Import");
  let chosen: File[] = [];

  void api<{ results: { name: string }[] } | { name: string }[]>("/api/pools/?page_size=200")
    .then((got) => {
      const rows = Array.isArray(got) ? got : got.results;
      render(pools, ...rows.map((p) => h("option", { value: p.name })));
      const wanted = new URLSearchParams(window.location.search).get("pool");
      if (pool.value === "" && rows[0] !== undefined && wanted === null) pool.value = rows[0].name;
    })
    .catch(() => undefined);

  const form = (): FormData => {
    const body = new FormData();
    body.append("pool", pool.value.trim());
    body.append("create_pool", create.checked ? "true" : "false");
    for (const f of chosen) {
      body.append("file", f, f.name);
      body.append("path", folderPath(f)); // the browser sends the file's base name only
    }
    return body;
  };

  let previewed = "";
  const preview = async (): Promise<void> => {
    // A blur after typing the pool fires "change" again as the Import button is pressed: read the
    // files again only when something changed (else the press would land on a disabled button).
    const key = [pool.value.trim(), create.checked, ...chosen.map((f) => `${folderPath(f)}:${f.size}:${f.lastModified}`)].join("|");
    if (key === previewed) return;
    previewed = key;
    go.disabled = true;
    if (chosen.length === 0) {
      render(previewBox);
      return;
    }
    if (pool.value.trim() === "") {
      render(previewBox, notice("error", "Name the pool to import into first."));
      return;
    }
    render(previewBox, notice("loading", `Reading ${chosen.length} file${chosen.length === 1 ? "" : "s"}…`));
    try {
      const got = await api<Preview>("/api/tasks/import/preview/", { method: "POST", body: form() });
      const lines: Child[] = [
        h(
          "p",
          { class: `notice ${got.importable > 0 ? "notice-info" : "notice-error"}`, "data-testid": "import-summary" },
          `${got.importable} task${got.importable === 1 ? "" : "s"} can be imported into ${got.pool_exists ? "" : "the new pool "}“${pool.value.trim()}”`,
          got.refused_files > 0 ? `; ${got.refused_files} file${got.refused_files === 1 ? " is" : "s are"} refused (below, with the reason per task) and will not be imported.` : ".",
        ),
        !got.pool_exists && !create.checked ? notice("error", "This pool does not exist: tick “create the pool” or pick an existing one.") : null,
        reportView(got.files),
      ];
      render(previewBox, ...lines);
      go.disabled = got.importable === 0 || (!got.pool_exists && !create.checked);
      go.textContent = `Import ${got.importable} task${got.importable === 1 ? "" : "s"}`;
    } catch (error) {
      previewed = "";
      render(previewBox, notice("error", `Could not read the files: ${errorText(error)}`));
    }
  };

  const choose = (input: HTMLInputElement): void => {
    const { kept, skipped } = taskFiles(Array.from(input.files ?? []));
    chosen = kept;
    (input === files ? folder : files).value = "";
    void preview().then(() => {
      if (skipped > 0) previewBox.prepend(h("p", { class: "muted" }, `${skipped} file${skipped === 1 ? "" : "s"} in the folder skipped (hidden, or not .json, .jsonl, .csv or an archive).`));
    });
  };
  files.addEventListener("change", () => {
    choose(files);
  });
  folder.addEventListener("change", () => {
    choose(folder);
  });
  pool.addEventListener("change", () => void preview());
  create.addEventListener("change", () => void preview());

  go.addEventListener("click", () => {
    go.disabled = true;
    api<ImportAnswer>("/api/tasks/import/", { method: "POST", body: form() })
      .then((got) => {
        render(
          previewBox,
          h(
            "p",
            { class: "notice notice-ok", "data-testid": "import-result" },
            `Imported into “${pool.value.trim()}”: ${got.created} created, ${got.updated} updated`,
            got.unsupported > 0 ? `, ${got.unsupported} unsupported (disabled)` : "",
            got.refused_files > 0 ? `; ${got.refused_files} file${got.refused_files === 1 ? "" : "s"} refused.` : ".",
          ),
          reportView(got.files),
        );
        previewed = "";
        el.dispatchEvent(new CustomEvent("tasks-imported", { bubbles: true, detail: { pool: pool.value.trim() } }));
      })
      .catch((error: unknown) => {
        const report = error instanceof ApiError && error.body !== null && typeof error.body === "object" && "files" in error.body ? (error.body as { files: FileReport[] }).files : null;
        render(previewBox, notice("error", `Nothing imported: ${report !== null ? "every file was refused" : errorText(error)}`), report !== null ? reportView(report) : null);
        go.disabled = false;
      });
  });

  render(
    el,
    h("div", { class: "card-head" }, h("h2", {}, "Import tasks")),
    h("p", { class: "muted" }, "OSWorld task JSON, JSONL or CSV task lists, or archives of them. Choose files or a folder: each file is checked first and imported whole or not at all; the good files are imported, the refused ones are listed with the reason for each task."),
    h(
      "div",
      { class: "ti-form" },
      h("label", { for: "ti-pool" }, "Pool"),
      h("span", {}, pool, pools, " ", h("label", { class: "ti-check" }, create, " create the pool if it does not exist")),
      h("label", { for: "ti-files" }, "Files"),
      files,
      h("label", { for: "ti-folder" }, "or a folder"),
      folder,
    ),
    previewBox,
    h("div", { class: "rv-actions" }, go),
  );
};
