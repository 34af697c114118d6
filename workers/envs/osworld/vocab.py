"""OSWorld's getters and metrics, from OSWorld's own `desktop-env` package, run against a session.

OSWorld's evaluator (`desktop_env.desktop_env.DesktopEnv.evaluate`) calls a *getter*
`get_<type>(env, config)` for the result (and the expected value), then a *metric*
`<func>(result, expected, **options)`. Its getters reach the VM through `env.controller`
(`get_file`, `execute_python_command`, window and screen queries) and `env.cache_dir`; its metrics
are plain functions over files and values. Here both come from the pinned `desktop-env` wheel
(installed with `--no-deps`: its full dependency list pulls torch, easyocr, cloud SDKs; we install
only what the enabled metric modules import, see docs/osworld.md), and `SessionAdapter` plays the
`env` they expect: every file it hands over is read from the session's sandbox, every command runs
in it (its filesystem, its processes, its display, its D-Bus).

Which of OSWorld's names are usable is computed, not listed by hand: a metric is available when its
module imports here (its Python dependencies are installed) — `metric_problem()` says why not; a
getter is available when it needs only what the adapter provides (`GETTERS`).

Getters that reach OSWorld's VM over HTTP (`vm_command_line` & co.) or download from the web
(`cloud_file`) are the platform's own (`workers.envs.osworld.evaluate`): commands run in the sandbox, and
files come from the task's bundle or the admin's local mirror, never the network.
"""

from __future__ import annotations

import base64
import importlib
import logging
import shlex
import sys
import types
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from workers.envs.osworld.common import MAX_READ_BYTES

log = logging.getLogger(__name__)

DESKTOP_ENV_VERSION = "1.0.2"

# metric module -> what it is for; only these are loaded (the others need GPUs / OCR / audio stacks).
METRIC_MODULES = (
    "general",
    "table",
    "basic_os",
    "libreoffice",
    "slides",
    "docs",
    "thunderbird",
    "gimp",
    "vlc",
    "chrome",
    "pdf",
    "others",
    "vscode",  # last, as desktop-env's metrics/__init__ imports it (its names win)
)

# getters of desktop-env that need only the adapter (files, python in the sandbox, window queries).
GETTERS: dict[str, tuple[str, str]] = {
    "vm_file": ("file", "get_vm_file"),
    "cache_file": ("file", "get_cache_file"),
    "content_from_vm_file": ("file", "get_content_from_vm_file"),
    "rule": ("misc", "get_rule"),
    "vm_terminal_output": ("general", "get_vm_terminal_output"),
    "accessibility_tree": ("misc", "get_accessibility_tree"),
    "rule_relativeTime": ("misc", "get_rule_relativeTime"),
    "gimp_config_file": ("gimp", "get_gimp_config_file"),
    "vlc_config": ("vlc", "get_vlc_config"),
    "vm_screen_size": ("info", "get_vm_screen_size"),
    "vm_window_size": ("info", "get_vm_window_size"),
    "vm_wallpaper": ("info", "get_vm_wallpaper"),
    "list_directory": ("info", "get_list_directory"),
    "audio_in_slide": ("impress", "get_audio_in_slide"),
    # Chrome's profile files (Preferences, Local State, Bookmarks, History, Cookies), read from
    # ~/.config/google-chrome in the session, where `google-chrome` keeps it here (osworld.chrome).
    **{
        name: ("chrome", f"get_{name}")
        for name in (
            "default_search_engine",
            "cookie_data",
            "history",
            "enabled_experiments",
            "profile_name",
            "chrome_language",
            "chrome_font_size",
            "bookmarks",
            "shortcuts_on_desktop",
            "enable_do_not_track",
            "enable_enhanced_safety_browsing",
            "enable_safe_browsing",
            "new_startup_page",
            "find_unpacked_extension_path",
            "find_installed_extension_name",
            "data_delete_automacally",
        )
    },
    "background_image_in_slide": ("impress", "get_background_image_in_slide"),
    # the active tab's URL from Chrome's address bar in the accessibility tree (workers.envs.osworld.a11y)
    "active_url_from_accessTree": ("chrome", "get_active_url_from_accessTree"),
}


# desktop-env getters that cannot tell a solved task here from an untouched one, and why.
UNSCOREABLE_GETTERS: dict[str, str] = {
    # chrome 99146c54 ("delete browsing data when Chrome closes") scored 1 with no action
    "data_delete_automacally": "reads only whether Chrome's Preferences has "
    "profile.default_content_setting_values, which this host's Chromium writes on its own when it first "
    "starts (has_migrated_local_network_access): it scores 1 with no action here",
}


class VocabularyMissing(RuntimeError):
    """desktop-env (or a module's dependency) is not installed here."""


def _desktop_env_root() -> Path:
    try:
        import desktop_env.evaluators as evaluators  # the package __init__s above are empty
    except ModuleNotFoundError as exc:
        raise VocabularyMissing(
            f"OSWorld's desktop-env=={DESKTOP_ENV_VERSION} is not installed (make setup installs it)"
        ) from exc
    return Path(evaluators.__file__).parent


def _namespace(sub: str) -> str:
    """Register `desktop_env.evaluators.<sub>` without running its __init__, which imports every
    domain's metrics and so every heavy dependency at once; its modules then load one by one."""
    name = f"desktop_env.evaluators.{sub}"
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__path__ = [str(_desktop_env_root() / sub)]
        module.__package__ = name
        sys.modules[name] = module
    return name


# Packages a metric module imports at the top but only one of its functions uses; the module loads
# without them and the functions that name them stay unsupported, with the reason.
FUNCTION_ONLY_IMPORTS = {
    "easyocr": "easyocr, which is not installed here (it needs torchvision; the registry has CUDA builds only)",
    "pydrive": "pydrive (Google Drive), which sessions cannot reach (no network)",
    "PyPDF2": "PyPDF2 (pypdf's old name, vscode's compare_pdf_content), which is not installed here",
}


class _Absent(types.ModuleType):
    """Stands in for a FUNCTION_ONLY_IMPORTS package (or a name imported from it) while its module
    loads; calling it raises, and the functions that use it are reported unsupported."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent(f"{self.__name__}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise VocabularyMissing(f"needs {FUNCTION_ONLY_IMPORTS[self.__name__.split('.')[0]]}")


@cache
def _offline_public_suffixes() -> None:
    """desktop-env's URL metrics call tldextract, which on first use fetches the Public Suffix List
    from the web; the snapshot tldextract ships is used instead (nothing is downloaded at run time)."""
    try:
        from tldextract import tldextract
    except ImportError:
        return
    tldextract.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=())


@cache
def _module(sub: str, name: str) -> types.ModuleType | str:
    """The module, or why it cannot load (a missing dependency, named)."""
    _offline_public_suffixes()
    absent: list[str] = []
    try:
        while True:
            try:
                return importlib.import_module(f"{_namespace(sub)}.{name}")
            except ImportError as exc:
                missing = getattr(exc, "name", None) or str(exc)
                if missing.split(".")[0] not in FUNCTION_ONLY_IMPORTS or missing in absent:
                    return f"needs the Python package {missing!r}, which is not installed here"
                absent.append(missing)
                sys.modules[missing] = _Absent(missing)
    except VocabularyMissing as exc:
        return str(exc)
    finally:
        for missing in absent:  # only the loaded module keeps its placeholder
            sys.modules.pop(missing, None)


def _functions(module: types.ModuleType) -> dict[str, Callable[..., Any]]:
    return {
        name: obj
        for name, obj in vars(module).items()
        if callable(obj) and not name.startswith("_") and getattr(obj, "__module__", "") == module.__name__
    }


@cache
def _metric_index() -> dict[str, tuple[str, Callable[..., Any] | None, str | None]]:
    """metric name -> (module, function or None, why not)."""
    index: dict[str, tuple[str, Callable[..., Any] | None, str | None]] = {}
    root = _desktop_env_root() / "metrics"
    for name in METRIC_MODULES:
        loaded = _module("metrics", name)
        if isinstance(loaded, str):
            # Still list the module's names, so a task hears *why* its metric is unavailable.
            for fn in _defined_names(root / f"{name}.py"):
                index.setdefault(fn, (name, None, loaded))
            continue
        uses = _absent_uses(root / f"{name}.py", loaded)
        for fn, obj in _functions(loaded).items():
            index[fn] = (name, None, uses[fn]) if fn in uses else (name, obj, None)
    return index


def _absent_uses(path: Path, loaded: types.ModuleType) -> dict[str, str]:
    """function -> why not, for the functions that use a package the module loaded without."""
    import ast

    absent = {k for k, v in vars(loaded).items() if isinstance(v, _Absent)}
    if not absent:
        return {}
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} & absent
            for name in sorted(used):
                root = vars(loaded)[name].__name__.split(".")[0]
                out[node.name] = f"needs {FUNCTION_ONLY_IMPORTS[root]}"
    return out


def _defined_names(path: Path) -> list[str]:
    import ast

    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return []
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]


def metric_problem(func: str) -> str | None:
    """None when OSWorld's metric `func` can run here, else why not."""
    try:
        index = _metric_index()
    except VocabularyMissing as exc:
        return str(exc)
    if func not in index:
        return f"metric {func!r} is not one of OSWorld's metrics in desktop-env {DESKTOP_ENV_VERSION}"
    module, fn, why = index[func]
    return None if fn is not None else f"metric {func!r} ({module}) {why}"


def metric(func: str) -> Callable[..., Any]:
    problem = metric_problem(func)
    if problem:
        raise VocabularyMissing(problem)
    fn = _metric_index()[func][1]
    assert fn is not None
    return fn


def getter_problem(gtype: str) -> str | None:
    if gtype not in GETTERS:
        return None if False else f"getter {gtype!r} is not supported here"
    if gtype in UNSCOREABLE_GETTERS:
        return f"getter {gtype!r} {UNSCOREABLE_GETTERS[gtype]}"
    module, fn = GETTERS[gtype]
    loaded = _module("getters", module)
    if isinstance(loaded, str):
        return f"getter {gtype!r} {loaded}"
    why = _absent_uses(_desktop_env_root() / "getters" / f"{module}.py", loaded).get(fn)
    return f"getter {gtype!r} {why}" if why else None


def getter(gtype: str) -> Callable[..., Any]:
    problem = getter_problem(gtype)
    if problem:
        raise VocabularyMissing(problem)
    module, fn = GETTERS[gtype]
    loaded = _module("getters", module)
    assert not isinstance(loaded, str)
    getter: Callable[..., Any] = getattr(loaded, fn)
    return getter


# the `env` OSWorld's getters take ------------------------------------------------------------


class SessionController:
    """The subset of OSWorld's `PythonController` its getters call, answered from the session's
    sandbox instead of a VM's HTTP server."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner

    def _run(self, command: str | list[str], timeout_s: float = 30.0) -> Any:
        return self.runner.run_command(
            command, timeout_s=timeout_s, separate_stderr=True, max_output=MAX_READ_BYTES
        )

    def get_file(self, file_path: str) -> bytes | None:
        """The file's bytes as the session sees it (/home/user is the session's home), or None."""
        result = self._run(["/usr/bin/base64", "-w0", "--", _home_path(self.runner, file_path)])
        if not result.ok:
            return None
        try:
            return base64.b64decode(result.output.strip(), validate=True)
        except ValueError:
            return None

    def execute_python_command(self, command: str) -> dict[str, Any] | None:
        """OSWorld runs `python -c` with pyautogui imported; getters use it to read paths."""
        result = self._run(["/usr/bin/python3", "-c", command], timeout_s=60.0)
        return {
            "status": "success" if result.ok else "error",
            "output": result.output,
            "error": result.stderr,
            "returncode": result.returncode,
        }

    def get_terminal_output(self) -> str | None:
        """The text of the session's terminal (the terminal env's transcript; on a desktop, the
        terminal in the active window, as OSWorld's server reads the focused GNOME Terminal), or
        None. OSWorld's server strips trailing whitespace."""
        transcript = getattr(self.runner, "terminal_transcript", None)
        text = transcript() if transcript is not None else None
        return text.rstrip() if text is not None else None

    def get_vm_desktop_path(self) -> str:
        return "/home/user/Desktop"

    def get_vm_platform(self) -> str:
        return "Linux"

    def get_vm_screen_size(self) -> dict[str, int]:
        config = getattr(self.runner, "config", None)
        return {"width": int(getattr(config, "width", 0)), "height": int(getattr(config, "height", 0))}

    def get_vm_window_size(self, app_class_name: str) -> dict[str, int] | None:
        """The first window of that WM_CLASS (xdotool inside the session), as OSWorld's server does."""
        script = (
            f"id=$(xdotool search --limit 1 --class {shlex.quote(app_class_name)}) && "
            'xdotool getwindowgeometry --shell "$id"'
        )
        result = self._run(script)
        if not result.ok:
            return None
        values = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
        try:
            return {"width": int(values["WIDTH"]), "height": int(values["HEIGHT"])}
        except (KeyError, ValueError):
            return None

    def get_vm_wallpaper(self) -> bytes | None:
        result = self._run("gsettings get org.gnome.desktop.background picture-uri")
        uri = result.output.strip().strip("'") if result.ok else ""
        return self.get_file(uri.removeprefix("file://")) if uri else None

    def get_vm_directory_tree(self, path: str) -> dict[str, Any] | None:
        code = (
            "import json,os,sys\n"
            "def t(p):\n"
            " d={'type':'directory','name':os.path.basename(p),'children':[]}\n"
            " for n in sorted(os.listdir(p)):\n"
            "  q=os.path.join(p,n)\n"
            "  d['children'].append(t(q) if os.path.isdir(q) and not os.path.islink(q) else {'type':'file','name':n})\n"
            " return d\n"
            "print(json.dumps(t(sys.argv[1])))"
        )
        result = self._run(["/usr/bin/python3", "-c", code, _home_path(self.runner, path)])
        if not result.ok:
            return None
        import json

        parsed: dict[str, Any] | None = json.loads(result.output)
        return parsed

    def get_accessibility_tree(self) -> str:
        """The session's AT-SPI tree as OSWorld's server serialises it (workers.envs.osworld.a11y)."""
        from workers.envs.osworld import a11y

        return a11y.accessibility_tree(self.runner)


class SessionAdapter:
    """What OSWorld's getters read from their `env` argument, for one evaluation of a session."""

    vm_platform = "Linux"
    vm_ip = "127.0.0.1"  # never used: the HTTP getters are the platform's own
    server_port = 0
    chromium_port = 0
    vlc_port = 0

    def __init__(self, runner: Any, cache_dir: Path) -> None:
        self.runner = runner
        self.controller = SessionController(runner)
        self.cache_dir = str(cache_dir)


def _home_path(runner: Any, path: str) -> str:
    """OSWorld's paths name /home/user; the sandbox has it (a link to the session's home) and
    `~` expands to it as well."""
    if path.startswith("~"):
        return "/home/user" + path[1:]
    return path
