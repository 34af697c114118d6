"""Who may read which media file, and how the bytes leave the server.

Every media file's path names what it belongs to, and that object's visibility decides:

| path | belongs to | who may read it |
|---|---|---|
| `screenshots/t<id>/…` | trajectory `id` | whoever sees the trajectory (`trajectories_visible_to`) |
| `annotation/s<id>/…`, `thinkaloud/s<id>/…` | annotation session `id` | its annotator, and whoever sees its trajectory |
| a screenshot a step of another trajectory reuses (fix branches) | that trajectory too | whoever sees it |
| `exports/…` | the export job whose archive it is | the job's owner (and admins, like the download endpoint) |
| `checkpoints/…` | a policy checkpoint | researchers and admins |

Anything else (or a path that climbs out, or an anonymous caller) is refused. With filesystem storage
the bytes are sent by Django (`make up`) or, when `MEDIA_ACCEL_REDIRECT_PREFIX` is set, by the web
server in front (nginx `internal` location) through `X-Accel-Redirect`: Django only decides. With S3
storage the storage's own signed, short-lived URLs are handed out by the role-narrowed selectors, and
this view redirects to one after the same check.
"""

from __future__ import annotations

import mimetypes
import posixpath
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.core.files.storage import default_storage
from django.db.models import QuerySet
from django.http import FileResponse, HttpResponse, HttpResponseRedirect

from webapp.accounts.roles import Role, user_roles
from webapp.store.models import Step, Trajectory
from webapp.store.selectors import export_jobs_visible_to, trajectories_visible_to

_OWNED = re.compile(r"^(?P<kind>[a-z]+/[a-z])(?P<id>\d{1,18})/[^/]+$")
# (user, the trajectories the user sees, the owner's id) -> may the user read the owner's files?
MediaReadable = Callable[[Any, QuerySet[Trajectory], int], bool]


def _trajectory_readable(user: Any, visible: QuerySet[Trajectory], owner_id: int) -> bool:
    return visible.filter(pk=owner_id).exists()


# Path prefix -> who may read files of that owner. An app above the store adds its own
# (`media_owner_register` in its AppConfig.ready(): annotation sessions); the store never imports it.
MEDIA_OWNERS: dict[str, MediaReadable] = {"screenshots/t": _trajectory_readable}


def media_owner_register(*, prefix: str, readable: MediaReadable) -> None:
    """Files under `<prefix><id>/` are readable by whom `readable` allows (researchers and admins:
    every such file)."""
    MEDIA_OWNERS[prefix] = readable


def media_name_clean(name: str) -> str | None:
    """The storage name for a requested path, or None when it is not a plain relative path."""
    if not name or len(name) > 300 or "\x00" in name or "\\" in name or any(ord(c) < 32 for c in name):
        return None
    normal = posixpath.normpath(name)
    if normal != name or normal.startswith(("/", "..")) or "/../" in f"/{normal}/":
        return None
    return normal


def media_readable_by(user: Any, name: str) -> bool:
    """May `user` read the media file stored under `name` (a clean storage name)?"""
    if not user.is_authenticated:
        return False
    roles = user_roles(user)
    if not roles:
        return False
    if name.startswith("exports/"):
        return export_jobs_visible_to(user).filter(archive=name).exists()
    if name.startswith("checkpoints/"):
        return bool(roles & {Role.RESEARCHER, Role.ADMIN})
    match = _OWNED.match(name)
    if match is None or match["kind"] not in MEDIA_OWNERS:
        return False
    owner_id = int(match["id"])
    if roles & {Role.RESEARCHER, Role.ADMIN}:
        return True
    visible = trajectories_visible_to(user)
    if MEDIA_OWNERS[match["kind"]](user, visible, owner_id):
        return True
    # A step may reuse another trajectory's stored screenshot (a fix branch copies the steps before
    # the changed one): whoever sees a trajectory whose step shows the file may read it.
    return Step.objects.filter(trajectory_id__in=visible.values("pk"), screenshot=name).exists()


def media_response(name: str, *, attachment_name: str | None = None) -> HttpResponse:
    """The bytes of a stored file the caller was allowed to read (checked before this is called)."""
    storage_class = default_storage.__class__.__name__
    if storage_class != "FileSystemStorage":
        return HttpResponseRedirect(default_storage.url(name))
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    prefix = settings.MEDIA_ACCEL_REDIRECT_PREFIX
    if prefix:
        response = HttpResponse(content_type=content_type)
        response["X-Accel-Redirect"] = prefix.rstrip("/") + "/" + quote(name)
        if attachment_name:
            response["Content-Disposition"] = f'attachment; filename="{attachment_name}"'
    else:
        response = FileResponse(
            default_storage.open(name, "rb"),
            content_type=content_type,
            as_attachment=attachment_name is not None,
            filename=attachment_name or "",
        )
    response["Cache-Control"] = "private, max-age=3600"
    response["X-Content-Type-Options"] = "nosniff"
    return response
