"""The code's shape: layers (the core vocabulary imports no other part; the rank side, the launchers and the
analysis import the core and never each other, but for the command line, which reaches the analysis), no
import cycles (lazy imports included), no file over 600 lines and no function over 60 in the product's
packages, the report path imports no training framework, and each record field has one home that writers
and readers share."""

from __future__ import annotations

import ast
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from hvdbench.core import schema

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {folder: f"hvdbench.{folder}" for folder in ("core", "readers", "suite", "launchers", "analysis",
                                                            "workflows", "cli")}
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in PACKAGES.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            name = ".".join((package, *parts))
            out[name.removesuffix(".__init__")] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every hvdbench module this one imports, anywhere in it (functions included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names}
    return {m for m in found if m in modules and m != name}


def test_no_import_cycles() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


def layer(module: str) -> str:
    """The layer of an hvdbench module: its top-level folder (core, launchers, analysis, cli), suite/'s being the
    rank's."""
    top = module.split(".")[1]
    return "rank" if top == "suite" else top


ALLOWED = {"core": {"core"}, "readers": {"core", "readers"}, "rank": {"core", "rank"},
           "launchers": {"core", "readers", "launchers"}, "analysis": {"core", "readers", "analysis"},
           "workflows": {"core", "readers", "launchers", "analysis", "workflows"},
           "cli": {"core", "readers", "launchers", "analysis", "workflows", "cli"}}


def test_layers_import_only_what_they_may() -> None:
    """core is the vocabulary every part shares and imports none of them; what runs on a rank, the
    launchers and the analysis never import one another (the command line alone reaches the analysis)."""
    modules = _modules()
    wrong = [f"{name} ({layer(name)}) imports {other} ({layer(other)})"
             for name, path in sorted(modules.items()) for other in sorted(_imports(name, path, modules))
             if layer(other) not in ALLOWED[layer(name)]]
    assert not wrong, "\n".join(wrong)
    core = [name for name in modules if layer(name) == "core"]
    frameworks = [f"{name} imports {top}" for name in core for node in ast.walk(ast.parse(modules[name].read_text()))
                  if isinstance(node, (ast.Import, ast.ImportFrom))
                  for top in {(a.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
                              for a in node.names} & {"torch", "tensorflow", "keras", "horovod"}]
    assert not frameworks, frameworks


# analysis/'s rooms, each importing only those before it
ROOMS = ("tables", "verdicts", "projection", "report", "history")


def room(module: str) -> str | None:
    """The room of an analysis module (None: the ground floor), as analysis/__init__.py lists them."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[2] in ROOMS else None


def test_analysis_rooms_import_only_the_ground_floor_and_the_rooms_before_them() -> None:
    modules = _modules()
    analysis = {name: path for name, path in modules.items() if layer(name) == "analysis"}
    wrong = []
    for name, path in sorted(analysis.items()):
        mine = room(name)
        for other in sorted(_imports(name, path, modules)):
            theirs = room(other) if layer(other) == "analysis" else None
            if layer(other) != "analysis" or theirs is None or theirs == mine:
                continue
            if mine is None or ROOMS.index(theirs) > ROOMS.index(mine) or mine in ("verdicts", "projection") and \
                    theirs in ("verdicts", "projection"):
                wrong.append(f"{name} ({mine or 'ground floor'}) imports {other} ({theirs})")
    assert not wrong, "\n".join(wrong)
    for folder in ROOMS:
        doc = ast.get_docstring(ast.parse((REPO / "analysis" / folder / "__init__.py").read_text()))
        assert doc and "Imports" in doc, f"analysis/{folder} says what it answers and what it may import"


def test_scheduler_variables_are_read_through_one_table() -> None:
    """SLURM's in-job variables are named in its own modules and the job environment table alone (a second
    scheduler is one row there, not a hunt through the tree)."""
    own = {"core/job_env.py"} | {f"launchers/{p.name}" for p in (REPO / "launchers").glob("slurm*.py")}
    named = sorted(str(p.relative_to(REPO)) for folder in PACKAGES for p in (REPO / folder).rglob("*.py")
                   if "SLURM_" in p.read_text(encoding="utf-8") and str(p.relative_to(REPO)) not in own)
    assert len(named) <= 2, named


FUNCTION_LINES = 60


def test_no_function_over_60_lines() -> None:
    long = {f"{path.relative_to(REPO)}:{node.name}": node.end_lineno - node.lineno + 1  # type: ignore[operator]
            for path in (p for folder in PACKAGES for p in (REPO / folder).rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno >= FUNCTION_LINES}
    assert not long, f"functions over {FUNCTION_LINES} lines: {long}"


def _compared_names(path: Path) -> list[tuple[int, str, str]]:
    """(line, name, comparison) for every string literal compared (==, !=, in) in a module; a comparison about a
    collective's backend (core/collective_ops.py: its own vocabulary, where "horovod" is a backend) is not one."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        if any("backend" in ast.unparse(side) for side in sides):
            continue
        for side in sides:
            items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            out += [(node.lineno, item.value, ast.unparse(node)) for item in items
                    if isinstance(item, ast.Constant) and isinstance(item.value, str)]
    return out


def test_no_exchange_runtime_launcher_loader_or_scheduler_name_is_compared_outside_its_own_module() -> None:
    """What an exchange, a container runtime, a launcher, a loader or a scheduler can do is an attribute of its
    descriptor or class; code elsewhere reads the attribute, never compares the name (a new one would be missed
    there)."""
    from hvdbench.core.containers import RUNTIMES
    from hvdbench.core.exchanges import EXCHANGES
    from hvdbench.core.job_env import SCHEDULERS as IN_JOB
    from hvdbench.core.loaders import LOADERS
    from hvdbench.launchers.base import launcher_names
    from hvdbench.launchers.schedulers import schedulers

    owners = {**{name: {"core/exchanges.py", "suite/exchange.py", "suite/tfharness.py"} for name in EXCHANGES},
              **{name: {"core/containers.py"} for name in RUNTIMES},
              **{name: {"core/loaders.py"} for name in LOADERS},
              **{name: {f"launchers/{name}.py", "launchers/schedulers.py", "core/job_env.py"}
                 for name in {*schedulers(), *IN_JOB}},
              **{name: {f"launchers/builtin/{name}.py", "launchers/base.py"} for name in launcher_names()}}
    found = [f"{where}:{line}: {text}" for folder in PACKAGES for path in sorted((REPO / folder).rglob("*.py"))
             for line, name, text in _compared_names(path)
             if name in owners and (where := str(path.relative_to(REPO))) not in owners[name]]
    assert not found, "\n".join(found)


def test_no_file_over_600_lines() -> None:
    files = [p for folder in (*PACKAGES, "tests", "benchmarks") for p in (REPO / folder).rglob("*.py")]
    long = {str(p.relative_to(REPO)): n for p in files
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"


PRODUCT_LINES = 450  # a product file past this is split by what it owns before it nears the hard limit


def test_no_product_file_near_the_limit() -> None:
    files = [p for folder in PACKAGES for p in (REPO / folder).rglob("*.py")]
    long = {str(p.relative_to(REPO)): n for p in files
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > PRODUCT_LINES}
    assert not long, f"product files over {PRODUCT_LINES} lines (split them by what each part owns): {long}"


def test_report_and_its_command_import_no_training_framework(tmp_path: Path) -> None:
    with tarfile.open(REPO / "tests" / "fixtures" / "runs-v1.tar.xz") as archive:
        archive.extractall(tmp_path, filter="data")
    code = ("import sys\n"
            "from hvdbench.cli import main\n"
            f"assert main(['report', {str(tmp_path)!r}, '-o', {str(tmp_path / 'out')!r}]) == 0\n"
            "loaded = [m for m in ('torch', 'tensorflow', 'keras', 'horovod') if m in sys.modules]\n"
            "assert not loaded, loaded\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "out" / "report.html").exists()


def test_a_login_host_plans_and_submits_without_the_training_stack(tmp_path: Path) -> None:
    """pip install 'hvdbench[slurm]' on a login host: a submit's dry run imports neither torch, Horovod nor
    TensorFlow (they are refused on import here), and the package asks none of them (the train extra does)."""
    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: s\nlauncher: mpirun\nworkloads: [{benchmark: imagenet, args: [--model, resnet50]}]\n"
                     "axes: {nodes: [2], gpus_per_node: [8]}\nslurm: {partition: gpu, gpu_type: h100}\n")
    code = ("import sys\n"
            "class Refuse:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('torch', 'tensorflow', 'keras', 'horovod'):\n"
            "            raise ImportError(name + ' refused: a login host has no training stack')\n"
            "sys.meta_path.insert(0, Refuse())\n"
            "from hvdbench.cli import main\n"
            f"assert main(['submit', {str(sweep)!r}, '--dry-run', '-o', {str(tmp_path / 'r')!r}]) == 0\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--gres=gpu:h100:8" in proc.stdout or "slurm_gres=gpu:h100:8" in proc.stdout
    requires = (REPO / "setup.cfg").read_text().split("install_requires =", 1)[1].split("\n\n", 1)[0]
    assert "torch" not in requires and "horovod" not in requires


def test_every_record_kind_declares_its_fields_once() -> None:
    for kind in schema.KINDS.values():
        names = kind.names()
        assert len(names) == len(set(names)), kind.name
        assert not set(names) & set(schema.HEADER_NAMES), kind.name
    from hvdbench.core import run_table

    assert (REPO / "docs" / "records.md").read_text(encoding="utf-8") == run_table.markdown(), \
        "docs/records.md is stale: python -m hvdbench.core.run_table > docs/records.md"


def test_every_catalog_entry_names_a_script_that_exists() -> None:
    from hvdbench.core.catalog import BENCHMARKS

    missing = [f"{b.name}: {b.path}" for b in BENCHMARKS.values() if not b.path.is_file()]
    assert not missing, missing


def test_a_misspelt_column_or_record_field_is_refused_where_it_is_named() -> None:
    """Column groups (analysis/keys.py) and record tables (analysis/collect.py) name run-table columns and record
    fields through checked helpers: a misspelling fails at import, never as an empty grouping in a report."""
    from hvdbench.analysis.collect import COMM_SCHEMA, fields_of
    from hvdbench.analysis.keys import WORKLOAD, columns

    assert WORKLOAD == ["system", "framework", "benchmark", "model"] and COMM_SCHEMA["bytes"] == "int64"
    with pytest.raises(KeyError, match="sytem"):
        columns("sytem", "np")
    with pytest.raises(KeyError):
        fields_of("comm", "byte")
