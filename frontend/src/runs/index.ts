// The run pages (webapp/templates/pages/runs.html): one root element names the view.

import "../review/review.css";
import "./runs.css";
import { notice, render } from "../lib/dom";
import { mountCompare } from "./compare";
import { mountLaunch } from "./launch";
import { mountRunList } from "./list";
import { mountReplay } from "./replay";
import { mountRun } from "./run";

export function mountRuns(doc: Document = document): void {
  const root = doc.querySelector<HTMLElement>("[data-runs-view]");
  if (root === null) return;
  const view = root.dataset.runsView ?? "list";
  const runId = Number(root.dataset.runId ?? "0");
  const trajectoryId = Number(root.dataset.trajectoryId ?? "0");
  const mounted =
    view === "launch" ? mountLaunch(root)
    : view === "run" ? mountRun(root, runId)
    : view === "compare" ? mountCompare(root)
    : view === "replay" ? mountReplay(root, trajectoryId)
    : mountRunList(root);
  mounted.catch((err: unknown) => {
    render(root, notice("error", err instanceof Error ? err.message : String(err)));
  });
}
