// Task pools: pools with task counts, tasks with success rates; admins import task files and edit
// tasks in place.
import { mountWidgets } from "../widgets/mount";
import { poolBrowserWidget } from "../widgets/poolBrowser";
import { taskImportWidget } from "../widgets/taskImport";

mountWidgets(document, { "pool-browser": poolBrowserWidget, "task-import": taskImportWidget });
