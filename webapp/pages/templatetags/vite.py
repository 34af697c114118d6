"""`{% vite_entry "home" %}`: the <script>/<link> tags of one Vite entry, from the build manifest.

The manifest (frontend/dist/.vite/manifest.json, written by `npm run build`) maps each entry to
its hashed files; they are static files (frontend/dist is in STATICFILES_DIRS), so `static()`
gives URLs that work under runserver, the test server and whitenoise alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django import template
from django.conf import settings
from django.templatetags.static import static
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

register = template.Library()

_cache: dict[str, Any] = {"mtime": None, "entries": {}}


class ManifestMissing(LookupError):
    """The frontend has not been built (or not this entry)."""


def manifest_path() -> Path:
    return Path(settings.BASE_DIR) / "frontend" / "dist" / ".vite" / "manifest.json"


def load_manifest() -> dict[str, Any]:
    """The manifest, re-read when the file changes (a rebuild during development)."""
    path = manifest_path()
    try:
        mtime = path.stat().st_mtime_ns
    except FileNotFoundError as exc:
        raise ManifestMissing(f"{path} does not exist") from exc
    if _cache["mtime"] != mtime:
        _cache["entries"] = json.loads(path.read_text())
        _cache["mtime"] = mtime
    return _cache["entries"]


def entry_files(manifest: dict[str, Any], name: str) -> tuple[str, list[str], list[str]]:
    """(script, imported chunks to preload, stylesheets) of entry `name`, imports followed transitively."""
    key = next((k for k, v in manifest.items() if v.get("isEntry") and v.get("name") == name), None)
    if key is None:
        raise ManifestMissing(f'no entry "{name}" in the manifest')
    preload: list[str] = []
    css: list[str] = []
    seen: set[str] = set()

    def visit(chunk_key: str, is_root: bool) -> None:
        if chunk_key in seen:
            return
        seen.add(chunk_key)
        chunk = manifest[chunk_key]
        for sheet in chunk.get("css", []):
            if sheet not in css:
                css.append(sheet)
        if not is_root:
            preload.append(chunk["file"])
        for imported in chunk.get("imports", []):
            visit(imported, False)

    visit(key, True)
    return manifest[key]["file"], preload, css


@register.simple_tag
def vite_entry(name: str) -> SafeString:
    try:
        script, preload, css = entry_files(load_manifest(), name)
    except ManifestMissing as exc:
        return format_html(
            '<div class="bundle-missing" role="alert">The page scripts are not built ({}): '
            "run <code>make build</code> (or <code>npm --prefix frontend run build</code>).</div>",
            exc,
        )
    links = format_html_join("", '<link rel="stylesheet" href="{}">', ((static(f),) for f in css))
    preloads = format_html_join("", '<link rel="modulepreload" href="{}">', ((static(f),) for f in preload))
    return format_html('{}{}<script type="module" src="{}"></script>', links, preloads, static(script))
