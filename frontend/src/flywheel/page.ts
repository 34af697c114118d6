// The flywheel page: charts from the server-rendered JSON, admin actions through /api/flywheel/,
// and the job list kept fresh while a job runs.
import { api } from "../lib/api";
import { badge, h, notice, render, table } from "../lib/dom";
import { percent } from "../lib/format";
import { barChart } from "./charts";
import { bucketCounts, growth, isTerminal, parseWeights, type FlywheelData, type JobView } from "./data";

const SFT = "#2f7d4f";
const CT = "#c9a227";
const BAR = "#3b6fd8";

export function renderCharts(root: ParentNode, data: FlywheelData): void {
  const v1 = root.querySelector("[data-fw=v1-chart]");
  if (v1) {
    render(
      v1,
      data.v1_by_checkpoint.length === 0
        ? notice("empty", "No rejection-sampled trajectory validated yet.")
        : barChart(
            data.v1_by_checkpoint.map((p) => ({ label: p.checkpoint, values: [p.rate], caption: `${percent(p.rate)} of ${p.n}` })),
            [{ name: "V(s)=1 rate of the checkpoint's rejection sampling", color: SFT }],
            1,
          ),
    );
  }
  const grow = root.querySelector("[data-fw=growth-chart]");
  if (grow) {
    const rows = growth(data.datasets);
    render(
      grow,
      rows.length === 0
        ? notice("empty", "No dataset iteration yet.")
        : barChart(rows.map((r) => ({ label: r.label, values: [r.sft, r.ct] })), [{ name: "SFT (V=1)", color: SFT }, { name: "CT (V=0)", color: CT }]),
    );
  }
  const diff = root.querySelector("[data-fw=difficulty]");
  if (diff) {
    if (!data.difficulty || data.difficulty.history.length === 0) {
      render(diff, notice("empty", "The pool has not been refreshed yet."));
    } else {
      const d = data.difficulty;
      const history = table(d.history.slice(-8).reverse(), [
        { label: "Refreshed", cell: (r) => new Date(r.created_at).toLocaleString() },
        { label: "0-25", cell: (r) => r.buckets["0-25"] ?? 0, numeric: true },
        { label: "25-50", cell: (r) => r.buckets["25-50"] ?? 0, numeric: true },
        { label: "50-75", cell: (r) => r.buckets["50-75"] ?? 0, numeric: true },
        { label: "75-100", cell: (r) => r.buckets["75-100"] ?? 0, numeric: true },
        { label: "Mean success", cell: (r) => percent(r.mean_success), numeric: true },
      ]);
      render(
        diff,
        barChart(bucketCounts(d.buckets).map((b) => ({ label: `${b.bucket} %`, values: [b.count] })), [{ name: "tasks per success bucket (latest refresh)", color: BAR }]),
        h("h3", {}, "History"),
        history,
      );
    }
  }
}

function jobSummary(job: JobView): string {
  const r = job.result;
  if (job.error) return job.error;
  const count = (key: string): number => (typeof r[key] === "number" ? r[key] : 0);
  if (job.kind === "rejection_sampling") return `${count("episodes")} episodes, V=1 ${count("v1")}`;
  if (typeof r.checkpoint === "string") return `→ ${r.checkpoint}`;
  return "";
}

export function renderJobs(el: Element, jobs: readonly JobView[]): void {
  render(
    el,
    jobs.length === 0
      ? notice("empty", "No flywheel job yet.")
      : table(jobs, [
          { label: "Job", cell: (j) => `#${j.id} ${j.kind.replace(/_/g, " ")}` },
          { label: "State", cell: (j) => badge(j.status) },
          { label: "Progress", cell: (j) => `${j.progress.toFixed(0)} %`, numeric: true },
          { label: "Checkpoint", cell: (j) => j.checkpoint ?? "—" },
          { label: "Result", cell: (j) => jobSummary(j) },
        ]),
  );
}

function selected(form: HTMLFormElement, name: string): string[] {
  const el = form.elements.namedItem(name);
  if (el instanceof HTMLSelectElement) return Array.from(el.selectedOptions).map((o) => o.value).filter((v) => v !== "");
  return [];
}

function field(form: HTMLFormElement, name: string): string {
  const el = form.elements.namedItem(name);
  return el instanceof HTMLInputElement || el instanceof HTMLSelectElement ? el.value : "";
}

function checked(form: HTMLFormElement, name: string): boolean {
  const el = form.elements.namedItem(name);
  return el instanceof HTMLInputElement && el.checked;
}

/** The API request an action form stands for. */
export function actionRequest(action: string, form: HTMLFormElement): { path: string; body: unknown } {
  const pool = field(form, "pool");
  switch (action) {
    case "validate":
      return { path: "/api/flywheel/validate/", body: { pool: pool ? Number(pool) : null } };
    case "dataset": {
      const after = field(form, "created_after");
      return {
        path: "/api/flywheel/datasets/",
        body: { pool: pool ? Number(pool) : null, sources: selected(form, "sources"), created_after: after ? `${after}T00:00:00Z` : null },
      };
    }
    case "rejection_sampling":
      return {
        path: "/api/flywheel/jobs/",
        body: { kind: "rejection_sampling", checkpoint: field(form, "checkpoint"), params: { pool: Number(pool), k: Number(field(form, "k")), use_fleet: checked(form, "use_fleet") } },
      };
    case "merge": {
      const checkpoints = selected(form, "checkpoints");
      return { path: "/api/flywheel/jobs/", body: { kind: "merge", params: { checkpoints, weights: parseWeights(field(form, "weights"), checkpoints.length) } } };
    }
    case "refresh":
      return { path: "/api/flywheel/jobs/", body: { kind: "refresh", params: { pool: Number(pool), shift: Number(field(form, "shift")) } } };
    case "promote": {
      const targets = [checked(form, "annotation") && "annotation", checked(form, "rl_start") && "rl_start"].filter((t): t is string => Boolean(t));
      return { path: "/api/flywheel/promote/", body: { checkpoint: field(form, "checkpoint"), targets } };
    }
    default:
      throw new Error(`unknown action ${action}`);
  }
}

export function mountFlywheel(root: Document, data: FlywheelData): void {
  renderCharts(root, data);
  const jobsEl = root.querySelector("[data-fw=jobs]");
  const status = root.querySelector("[data-fw=action-status]");
  let timer: number | undefined;

  const refreshJobs = async (): Promise<void> => {
    if (!jobsEl) return;
    const jobs = await api<JobView[]>("/api/flywheel/jobs/");
    renderJobs(jobsEl, jobs);
    window.clearTimeout(timer);
    if (jobs.some((j) => !isTerminal(j.status))) timer = window.setTimeout(() => void refreshJobs(), 3000);
  };
  if (jobsEl) renderJobs(jobsEl, data.jobs);
  if (data.jobs.some((j) => !isTerminal(j.status))) void refreshJobs();

  root.querySelectorAll<HTMLFormElement>("form[data-fw-action]").forEach((form) => {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const action = form.dataset.fwAction ?? "";
      void (async () => {
        try {
          const { path, body } = actionRequest(action, form);
          const result = await api<Record<string, unknown>>(path, { method: "POST", body });
          if (status) render(status, notice("info", `${action.replace(/_/g, " ")}: ${JSON.stringify(result).slice(0, 300)}`));
          await refreshJobs();
          if (action === "dataset" || action === "promote") {
            window.setTimeout(() => {
              window.location.reload();
            }, 800);
          }
        } catch (err) {
          if (status) render(status, notice("error", err instanceof Error ? err.message : String(err)));
        }
      })();
    });
  });

  root.querySelectorAll<HTMLButtonElement>("[data-fw-export]").forEach((button) => {
    button.addEventListener("click", () => {
      const format = window.prompt("Export format: jsonl, sharegpt, verl or osworld", "jsonl");
      if (!format) return;
      const split = window.prompt("Split: sft, ct, or empty for both", "sft") ?? "";
      const out = root.querySelector("[data-fw=export-status]");
      void api<{ export_job: number }>(`/api/flywheel/datasets/${button.dataset.fwExport ?? ""}/export/`, { method: "POST", body: { format, split } })
        .then((job) => {
          if (out) render(out, notice("info", "Export job "), h("a", { href: `/api/export-jobs/${job.export_job}/` }, `#${job.export_job}`), " queued; download it from the trajectories page when done.");
        })
        .catch((err: unknown) => {
          if (out) render(out, notice("error", err instanceof Error ? err.message : String(err)));
        });
    });
  });
}
