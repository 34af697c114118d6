"""The platform packages must import without Django (STYLE.md §3)."""

import subprocess
import sys

import pytest

PURE = ["workers.actions", "workers.envs", "workers.policy", "workers.rl", "workers.asr", "workers.benchkit"]


def _runs_clean(code: str) -> None:
    """`code` in a fresh interpreter (nothing imported yet) exits 0."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("package", PURE)
def test_pure_package_imports_without_django(package: str) -> None:
    code = (
        "import sys, importlib, pkgutil\n"
        f"pkg = importlib.import_module({package!r})\n"
        "for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "{'django', 'rest_framework', 'channels', 'annotation', 'rl_control', 'webapp'}]\n"
        "assert not bad, bad\n"
    )
    _runs_clean(code)


def test_the_web_process_does_not_import_torch() -> None:
    """The ASGI application and every URL module load without torch (the policy, trainer and the
    TensorBoard export's tensorboardX load it where they run): the export bench's server RSS goal."""
    code = (
        "import os, sys\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'webapp.settings')\n"
        "import webapp.asgi\n"
        "from django.urls import get_resolver\n"
        "get_resolver().url_patterns\n"
        "heavy = [m for m in ('torch', 'transformers', 'tensorboardX') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    _runs_clean(code)
