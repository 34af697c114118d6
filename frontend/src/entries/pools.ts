// Task pools: pools with task counts, tasks with success rates.
import { mountWidgets } from "../widgets/mount";
import { poolBrowserWidget } from "../widgets/poolBrowser";

mountWidgets(document, { "pool-browser": poolBrowserWidget });
