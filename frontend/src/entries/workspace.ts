// Workspace: the annotator's sessions and assigned tasks, and the live annotation page of a session.
import { tasksWidget } from "../widgets/lists";
import { mountWidgets } from "../widgets/mount";
import { mountWorkspace } from "../workspace";

mountWidgets(document, { tasks: tasksWidget });
mountWorkspace();
