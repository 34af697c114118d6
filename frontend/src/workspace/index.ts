// Mount the workspace: the session page when the template names a session, the fix view when it
// names a trajectory to fix, else the start page.

import "./workspace.css";
import { FixView } from "./fix";
import { mountStart } from "./start";
import { SessionPage } from "./session";

export function mountWorkspace(doc: Document = document): void {
  const session = doc.querySelector<HTMLElement>("[data-workspace-session]");
  if (session !== null) {
    void new SessionPage(session, Number(session.dataset.workspaceSession)).start();
    return;
  }
  const fix = doc.querySelector<HTMLElement>("[data-workspace-fix]");
  if (fix !== null) {
    void new FixView(fix, Number(fix.dataset.workspaceFix)).start();
    return;
  }
  const start = doc.querySelector<HTMLElement>("[data-workspace-start]");
  if (start !== null) void mountStart(start);
}
