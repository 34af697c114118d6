"""The platform packages must import without Django (STYLE.md §3); imports run one way (STYLE.md §14:
the import-linter contracts in pyproject.toml); the product imports nothing from benchmarks/."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PURE = ["workers.actions", "workers.envs", "workers.policy", "workers.rl", "workers.asr"]


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
        "import project.asgi\n"
        "from django.urls import get_resolver\n"
        "get_resolver().url_patterns\n"
        "heavy = [m for m in ('torch', 'transformers', 'tensorboardX') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    _runs_clean(code)


PRODUCT = ("webapp", "annotation", "rl_control", "workers", "project", "demo", "flywheel_verl")
ROOT = Path(__file__).resolve().parent.parent


def _imported_modules(path: Path) -> set[str]:
    """Every module a Python file imports (at any depth: inside functions too), by static reading."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_product_imports_nothing_from_benchmarks() -> None:
    """The benchmarks (benchmarks/) may import the product; the product never imports them."""
    bad = [
        f"{path.relative_to(ROOT)}: {module}"
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        for module in _imported_modules(path)
        if module == "benchmarks" or module.startswith("benchmarks.")
    ]
    assert not bad, bad


def test_no_benchmark_module_lives_in_the_product() -> None:
    """Every benchmark and its harness live in benchmarks/ (issue 35)."""
    strays = [str(p.relative_to(ROOT)) for package in PRODUCT for p in (ROOT / package).rglob("*bench*")
              if "__pycache__" not in p.parts]  # fmt: skip
    assert not strays, strays


def test_imports_run_one_way() -> None:
    """`lint-imports` keeps every contract of [tool.importlinter]: rl_control -> annotation -> webapp ->
    workers, the composition root and demo data above them, workers/ without Django (about 2 s)."""
    result = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache", "--no-logo"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout, result.stdout[-4000:]
