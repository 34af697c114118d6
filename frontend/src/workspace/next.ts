// Starting the next session: used by the lobby (/workspace/) and by a finished session's outcome panel.

import { api, errorText } from "../lib/api";
import type { SessionState } from "./types";

/** Start a session on `task` (or the next task of the annotator's queue) and open it. */
export async function takeNextTask(button: HTMLButtonElement, errorBox: HTMLElement, task?: number): Promise<void> {
  button.disabled = true;
  const label = button.textContent;
  button.textContent = "Starting the environment…";
  try {
    const state = await api<SessionState>("/api/annotation/sessions/", { method: "POST", body: task === undefined ? {} : { task } });
    window.location.assign(`/workspace/${state.id}/`);
  } catch (error) {
    errorBox.textContent = errorText(error);
    errorBox.hidden = false;
    button.disabled = false;
    button.textContent = label;
  }
}
