"""Every loader is one row of core/loaders.py, and everything that names loaders reads it: each row's batches class
exists where the row says with the batches protocol's methods (found in its source, so neither DALI nor TensorFlow
is imported here), --loader's choices and default per framework, the sweep's loader axis, the checks before a run,
the run table's name for what older runs called tf.data, the docs' line for each; every loader's summary record has
the same fields, the ones the schema's ``data`` field names."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from conftest import REPO
from hvdbench.core.axes import AXES
from hvdbench.core.catalog import BENCHMARKS, get_benchmark
from hvdbench.core.errors import UsageError
from hvdbench.core.loaders import LOADERS, data_record, loader_named, loaders_of
from hvdbench.core.schema import KINDS


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_each_row_names_a_batches_class_that_exists_with_next_and_facts(name: str) -> None:
    module, _, cls = LOADERS[name].batches.partition(":")
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    found = next((node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == cls), None)
    assert found is not None, f"{module} has no class {cls}"
    methods = {node.name: node for node in found.body if isinstance(node, ast.FunctionDef)}
    assert {"next", "facts"} <= set(methods)
    if LOADERS[name].framework == "pytorch":  # the trainer constructs every PyTorch loader alike
        assert [a.arg for a in methods["__init__"].args.args][:6] == ["self", "kind", "flags", "rank", "size", "device"]
    assert f"`--loader {name}`" in (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")


def test_flags_axes_and_checks_read_the_rows() -> None:
    for info in BENCHMARKS.values():
        if not info.trains:
            continue
        action = next(a for a in info.parser()._actions if "--loader" in a.option_strings)
        assert tuple(action.choices) == loaders_of(info.framework) and action.default == loaders_of(info.framework)[0]
    assert AXES["loader"].offered == {fw: loaders_of(fw) for fw in ("pytorch", "tensorflow")}
    with pytest.raises(UsageError, match="--loader dali reads imagenet files, not speech's"):
        get_benchmark("speech").check(["--data", "files", "--data-dir", "/d", "--loader", "dali", "--batch-size", "2"])
    with pytest.raises(UsageError, match="--loader dali reads files"):
        get_benchmark("imagenet").check(["--loader", "dali", "--batch-size", "2"])
    get_benchmark("speech").check(["--data", "files", "--data-dir", "/d", "--batch-size", "2"])  # its default: torch
    assert loader_named("tf.data") == "tfdata" and loader_named("dali") == "dali" and loader_named(None) is None


def test_every_loaders_record_has_the_fields_the_schema_names() -> None:
    class Index:
        root, layout, kind, bytes = Path("/d"), "folder", "imagenet", 1000

        def __len__(self) -> int:
            return 10

    record = data_record(Index(), "tf.data", read=5, nbytes=500, corrupt=1, named=["x.jpg"], wait_s=0.5,
                         cache={"cache": "as-is", "resident_start": 1.0}, shard="every size-th")["data"]
    assert record["loader"] == "tfdata" and record["samples"] == 10 and record["corrupt_named"] == ["x.jpg"]
    said = next(f for f in KINDS["summary"].fields if f.name == "data").meaning
    for key in set(record) - {"cache", "resident_start"}:  # the page cache's own keys: core/pagecache.py's
        assert key in said, key
