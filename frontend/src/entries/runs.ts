// Runs: the run list, launch form, live run page, comparison and episode replay (src/runs/),
// and the checkpoints stored so far.
import { mountRuns } from "../runs";
import { checkpointsWidget } from "../widgets/lists";
import { mountWidgets } from "../widgets/mount";

mountRuns();
mountWidgets(document, { checkpoints: checkpointsWidget });
