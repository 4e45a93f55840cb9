"""The GPU-node section of docs/clusters.md runs as written: every command line of its code blocks is run here in
dry mode (the proof's five parts with their planned minutes, bundle check and what each returns, set-up's stamp,
the sweeps' and runs' plans, the scripts' own --dry-run, pytest's collection); and the pieces a GPU node meets
first: ``--`` ends hvdbench's options, bf16 collectives are refused through Horovod on any device, and a single
process puts Gloo on the loopback interface."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN, REPO, hvdbench_exe
from hvdbench.core.catalog import get_benchmark
from hvdbench.core.environment import gloo_on_loopback
from hvdbench.core.errors import UsageError

def gpu_section_commands() -> list[str]:
    """Every command of the GPU-node section's code blocks, continuation lines joined, comments dropped."""
    text = (REPO / "docs" / "clusters.md").read_text(encoding="utf-8")
    section = text.split("## On a GPU node", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def dry(command: str, workdir: Path) -> list[str]:
    """The dry-mode form of one README command, run from ``workdir``."""
    words = shlex.split(command.replace("$(command -v python3)", sys.executable))
    env_words = [w for w in words if re.fullmatch(r"[A-Z_]+=.*", w)]
    words = words[len(env_words):]
    head = words[0].removeprefix(".venv/bin/")
    if head == "make" and words[1:] == ["setup"]:
        return ["env", *env_words, "bash", str(REPO / "scripts" / "setup.sh"), "--stamp"]
    if head in ("scripts/bundle.sh", "scripts/gpu-proof.sh"):  # a part's --return-to is rehearsed over proof/
        return ["bash", str(REPO / head), *words[1:], "--dry-run"]
    if head == "hvdbench" and words[1] == "topo":
        return [hvdbench_exe(), *words[1:], "--file", str(REPO / "tests" / "fixtures" / "topology" /
                                                         "hgx-a100-nv12-mlx5.txt")]
    if head == "hvdbench" and words[1] in ("sweep", "run"):
        at = words.index("--") if "--" in words else len(words)
        return [hvdbench_exe(), *[str(REPO / w) if w.endswith(".yaml") else w for w in words[1:at]], "--dry-run",
                *words[at:]]
    if head == "python" and words[1:3] == ["-m", "pytest"]:
        return [str(BIN / "python"), "-m", "pytest", "--collect-only", "-q", *words[3:], str(REPO / "tests")]
    if head == "python" and words[1] == "suite/p2p.py":
        return [str(BIN / "python"), str(REPO / words[1]), "--help"]
    if head == "python" and words[1].startswith("benchmarks/"):
        return [str(BIN / "python"), str(REPO / words[1]), *words[2:], "--dry-run"]
    raise AssertionError(f"no dry-mode check for README command: {command}")


@pytest.mark.slow  # starts the scripts, no ranks
def test_every_line_of_the_readme_gpu_section_runs_in_dry_mode(tmp_path: Path) -> None:
    inputs = tmp_path / "proof" / "inputs"
    (inputs / "bundle").mkdir(parents=True)
    (inputs / "bundle" / "horovod-0.28.1.tar.gz").write_bytes(b"\0" * 1024)
    (inputs / "pytorch_synthetic_benchmark.py").write_text("# Horovod's script stands here\n")
    (inputs / "nccl-tests-2.19.6.tar.gz").write_bytes(b"\0")
    commands = gpu_section_commands()
    assert [c.split()[1] for c in commands if c.startswith("scripts/gpu-proof.sh")] == list("01234")
    assert len(commands) >= 14
    for command in commands:
        argv = dry(command, tmp_path)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                              env={**os.environ, "HVDBENCH_VENV": str(BIN.parent)})
        assert proc.returncode == 0, f"{command}\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}"
    assert not (tmp_path / "results").exists()  # dry: nothing measured
    back = sorted(p.name for p in (tmp_path / "back").iterdir())  # what each part would bring back
    assert back == sorted(f"part-{n}{end}" for n in range(5) for end in (".tar.gz", "-summary.md"))


@pytest.mark.slow  # starts the scripts, no ranks
def test_each_proof_part_checks_its_bundle_and_its_inputs(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    (big / "horovod-0.28.1.tar.gz").write_bytes(b"\0" * 1024)
    (big / "pyarrow.whl").write_bytes(b"\0" * 21 * 2**20)
    empty = tmp_path / "empty"
    empty.mkdir()
    script = str(REPO / "scripts" / "gpu-proof.sh")
    for bundle, problem in ((big, "over 20 MB"), (empty, "lacks Horovod's source release")):
        proc = subprocess.run(["bash", script, "1", str(tmp_path / "proof"), "--bundle", str(bundle), "--dry-run"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and problem in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    for argv, problem in ((["4"], "part 4 needs --horovod-script"), (["5"], "usage:"),
                          (["3", "--nccl-tests", __file__], "is not a .tar.gz file")):
        proc = subprocess.run(["bash", script, argv[0], str(tmp_path / "proof"), "--dry-run", *argv[1:]],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and problem in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.slow  # starts the scripts, no ranks
def test_double_dash_ends_hvdbench_options(tmp_path: Path) -> None:
    proc = subprocess.run([hvdbench_exe(), "run", "collectives", "--np", "1", "--dry-run", "-o", str(tmp_path),
                           "--", "--backends", "horovod", "--device", "cpu"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "collectives.py --backends horovod --device cpu --log-dir" in proc.stdout


@pytest.mark.parametrize("args, refused", [
    (["--dtypes", "bf16"], True), (["--dtypes", "fp32,bf16", "--device", "cuda"], True),
    (["--dtypes", "bf16", "--backends", "horovod", "--device", "cpu"], True),
    (["--dtypes", "bf16", "--backends", "mpi"], False), (["--dtypes", "fp16"], False),
])
def test_bf16_collectives_are_refused_through_horovod_on_any_device(args: list[str], refused: bool) -> None:
    info = get_benchmark("collectives")
    if refused:
        with pytest.raises(UsageError, match="Horovod 0.28 has no bfloat16 collectives on any device"):
            info.check(args)
    else:
        info.check(args)


@pytest.mark.parametrize("environ, set_lo", [
    ({}, True),  # python suite/x.py on its own
    ({"OMPI_COMM_WORLD_SIZE": "1"}, True), ({"HOROVOD_SIZE": "1"}, True),  # a one-rank run
    ({"OMPI_COMM_WORLD_SIZE": "2"}, False), ({"PMI_SIZE": "4"}, False), ({"SLURM_STEP_NUM_TASKS": "8"}, False),
    ({"HOROVOD_GLOO_IFACE": "ib0"}, False),  # the user's choice stays
])
def test_a_single_process_puts_gloo_on_loopback(environ: dict[str, str], set_lo: bool) -> None:
    before = dict(environ)
    assert gloo_on_loopback(environ) is set_lo
    assert environ == ({**before, "HOROVOD_GLOO_IFACE": "lo"} if set_lo else before)
