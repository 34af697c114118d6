// The review page: the queue at /review/, one trajectory under review at /review/?t=<id>.

import "./review.css";
import { mountQueue } from "./queue";
import { ReviewView } from "./view";

export function mountReview(doc: Document = document): void {
  const el = doc.querySelector<HTMLElement>("[data-review]");
  if (el === null) return;
  const id = Number(new URLSearchParams(doc.location.search).get("t"));
  const failed = (err: unknown): void => {
    el.textContent = "";
    const p = doc.createElement("p");
    p.className = "notice notice-error";
    p.setAttribute("role", "alert");
    p.textContent = err instanceof Error ? err.message : String(err);
    el.append(p);
  };
  if (Number.isInteger(id) && id > 0) {
    new ReviewView(el, id).start().catch(failed);
  } else {
    mountQueue(el, (url) => {
      doc.location.assign(url);
    }).catch(failed);
  }
}
