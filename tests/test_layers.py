"""The platform packages must import without Django (STYLE.md §3)."""

import subprocess
import sys

import pytest

PURE = ["workers.actions", "workers.envs", "workers.policy", "workers.rl", "workers.asr", "workers.benchkit"]


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
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
