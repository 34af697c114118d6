"""`{% vite_entry %}` turns the Vite manifest into tags, and says plainly when nothing is built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.template import Context, Template

from webapp.pages.templatetags import vite

MANIFEST = {
    "_mount-abc.js": {"file": "assets/mount-abc.js", "name": "mount", "css": ["assets/mount-abc.css"]},
    "_dom-def.js": {"file": "assets/dom-def.js", "name": "dom"},
    "src/entries/home.ts": {
        "file": "assets/home-123.js",
        "name": "home",
        "src": "src/entries/home.ts",
        "isEntry": True,
        "imports": ["_mount-abc.js", "_dom-def.js"],
    },
    "src/entries/app.ts": {
        "file": "assets/app-456.js",
        "name": "app",
        "isEntry": True,
        "css": ["assets/app-456.css"],
        "imports": ["_dom-def.js"],
    },
}


@pytest.fixture
def manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / ".vite" / "manifest.json"
    monkeypatch.setattr(vite, "manifest_path", lambda: path)
    return path


def _render(name: str) -> str:
    return Template('{% load vite %}{% vite_entry "' + name + '" %}').render(Context())


def test_entry_emits_css_preloads_and_module_script(manifest: Path) -> None:
    manifest.parent.mkdir()
    manifest.write_text(json.dumps(MANIFEST))
    html = _render("home")
    assert '<link rel="stylesheet" href="/static/assets/mount-abc.css">' in html
    assert '<link rel="modulepreload" href="/static/assets/mount-abc.js">' in html
    assert '<link rel="modulepreload" href="/static/assets/dom-def.js">' in html
    assert html.endswith('<script type="module" src="/static/assets/home-123.js"></script>')
    assert "app-456" not in html


def test_entry_css_comes_first_and_is_not_repeated(manifest: Path) -> None:
    manifest.parent.mkdir()
    manifest.write_text(json.dumps(MANIFEST))
    html = _render("app")
    assert html.count("app-456.css") == 1
    assert html.index("stylesheet") < html.index("<script")


def test_missing_build_says_run_make_build(manifest: Path) -> None:
    html = _render("home")
    assert 'class="bundle-missing"' in html
    assert "make build" in html
    assert "manifest.json does not exist" in html


def test_unknown_entry_is_reported(manifest: Path) -> None:
    manifest.parent.mkdir()
    manifest.write_text(json.dumps(MANIFEST))
    html = _render("nope")
    assert "no entry &quot;nope&quot;" in html


def test_a_rebuild_is_picked_up(manifest: Path) -> None:
    manifest.parent.mkdir()
    manifest.write_text(json.dumps(MANIFEST))
    assert "home-123.js" in _render("home")
    rebuilt = dict(MANIFEST)
    rebuilt["src/entries/home.ts"] = {**MANIFEST["src/entries/home.ts"], "file": "assets/home-789.js"}
    manifest.write_text(json.dumps(rebuilt))
    import os

    os.utime(manifest, ns=(1, 1))  # a different mtime even on coarse clocks
    assert "home-789.js" in _render("home")
