"""Sweep files: validated before anything runs (one error naming the key and the valid choices),
expanded into RunSpecs with stable ids, with the 1-GPU baseline planned automatically."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hvdbench.launchers.plan import plan
from hvdbench.launchers.schedulers import time_minutes as slurm_minutes
from hvdbench.launchers.sweep import SweepError, load_sweep
from hvdbench.core.topology import read_topology_file

from conftest import REPO, hvdbench_exe

pytestmark = pytest.mark.bad_input  # counted in the run's summary (conftest.py)

PCIE = REPO / "tests" / "fixtures" / "topology" / "pcie-8gpu-pix-phb-sys.txt"
DGX_SWEEP = f"""
name: pcie-box
system: pcie-8gpu
launcher: mpirun
repeats: 2
topology: {PCIE}
workloads:
  - benchmark: imagenet
    args: --model resnet50 --steps 50
  - {{benchmark: cifar10, args: [--model, resnet20], batch_size: [128]}}
axes:
  np: [2, 4, 8]
  placements: [PIX, PHB, SYS, all]
  batch_size: [64]
  precision: [fp32, amp]
  env:
    HOROVOD_FUSION_THRESHOLD: [67108864, 134217728]
    NCCL_ALGO: Ring
slurm:
  partition: gpu
  time: "01:30:00"
  setup: ["module load cuda/12.4"]
"""


def _write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_sweep_expands_into_every_combination_with_baselines_first(tmp_path: Path) -> None:
    sweep = load_sweep(_write(tmp_path, DGX_SWEEP))
    assert sweep.scheduler.options.time_min == 90 and sweep.launchers == (("mpirun", "mpi"),)
    assert sweep.scheduler.options.setup == ("module load cuda/12.4",)
    planned = plan(sweep, read_topology_file(PCIE))
    # per workload, precision and fusion threshold: 2 GPUs on PIX, PHB, SYS; 4 on PHB, SYS; 8 on all = 6 sizes
    assert len(planned.specs) == 2 * 2 * 2 * 6 * 2 + len(planned.baselines)
    # one baseline per workload and precision (HOROVOD_/NCCL_ knobs do not touch a 1-GPU run), per repeat
    assert len(planned.baselines) == 2 * 2 * 2
    # repeat-major order: all of repeat 0 (its baselines first), then all of repeat 1
    assert [s.repeat for s in planned.specs] == sorted(s.repeat for s in planned.specs)
    first = planned.specs[: len(planned.baselines) // 2]
    assert all(s.np == 1 and s.repeat == 0 and s.id in planned.baselines and s.env == () for s in first)
    assert {s.placement for s in planned.specs} == {None, "PIX:0,1", "PHB:0,2", "SYS:0,4", "PHB:0,1,2,3",
                                                    "SYS:0,1,2,4", "all"}
    sys_pair = next(s for s in planned.specs if s.placement == "SYS:0,4")
    assert sys_pair.devices == (0, 4) and sys_pair.cpus == ("0-13,28-41", "14-27,42-55")
    cifar = next(s for s in planned.specs if s.benchmark == "cifar10" and s.np == 8)
    assert cifar.args[:4] == ("--model", "resnet20", "--batch-size", "128")
    assert "placement PIX for 4 GPUs: this node offers PHB, SYS" in planned.skipped
    assert "placement all for 2 GPUs: this node offers PIX, PHB, SYS" in planned.skipped
    # stable: the same file plans the same ids, in the same order
    assert [s.id for s in plan(load_sweep(_write(tmp_path, DGX_SWEEP)), read_topology_file(PCIE)).specs] == \
        [s.id for s in planned.specs]


@pytest.mark.parametrize("text, minutes", [("90", 90), ("01:30", 2), ("01:30:00", 90), ("2-00", 2880),
                                           ("1-02:03", 1563), ("0-00:00:30", 1)])
def test_slurm_times_read_as_sbatch_reads_them(text: str, minutes: int) -> None:
    assert slurm_minutes(text) == minutes


def test_launchers_and_controllers_can_be_swept(tmp_path: Path) -> None:
    path = _write(tmp_path, "workloads: [mlp]\naxes: {np: [2]}\nlauncher: [horovodrun, mpirun]\n"
                            "controller: [gloo, mpi]\n")
    specs = plan(load_sweep(path)).specs
    assert [(s.np, s.launcher, s.controller) for s in specs] == [
        (1, "horovodrun", "gloo"), (1, "horovodrun", "mpi"), (1, "mpirun", "mpi"),
        (2, "horovodrun", "gloo"), (2, "horovodrun", "mpi"), (2, "mpirun", "mpi")]


def test_nccl_plugin_and_core_variables_and_cluster_pmi_names_are_accepted(tmp_path: Path) -> None:
    path = _write(tmp_path, "workloads: [mlp]\naxes: {np: [2], env: {NCCL_IB_HCA: [mlx5_0], NCCL_SHARP_DISABLE: [1], "
                            "NCCL_IBEXT_DISABLE: [0], NCCL_ALGO: [Ring]}}\nslurm: {mpi: pmix_v4}\n")
    sweep = load_sweep(path)
    assert sweep.scheduler.options.mpi == "pmix_v4" and len(plan(sweep).specs) == 2


def test_binding_each_rank_to_one_gpu_is_warned_in_one_line(tmp_path: Path) -> None:
    from hvdbench.launchers.sweep import sweep_warnings

    base = "workloads: [mlp]\naxes: {np: [2]}\n"
    assert sweep_warnings(load_sweep(_write(tmp_path, base))) == []
    said = sweep_warnings(load_sweep(_write(tmp_path, base + "slurm: {gpus_per_task: true, directives: "
                                                              "['--gpu-bind=closest']}\n")))
    assert [line.split(":")[0] for line in said] == ["slurm.gpus_per_task", "slurm.directives --gpu-bind=closest"]
    assert all("NVLink peer access between the ranks of a node are lost" in line and "\n" not in line
               for line in said)


def test_toml_sweeps_read_the_same(tmp_path: Path) -> None:
    toml = _write(tmp_path, """
name = "t"
[[workloads]]
benchmark = "mlp"
args = ["--steps", "3"]
[axes]
np = [1, 2]
[axes.env]
HOROVOD_CYCLE_TIME = [1, 5]
""", "sweep.toml")
    specs = plan(load_sweep(toml)).specs
    assert [(s.np, s.env_dict.get("HOROVOD_CYCLE_TIME")) for s in specs] == [(1, "1"), (2, "1"), (1, "5"), (2, "5")]


@pytest.mark.parametrize("text, message", [
    ("workloads: [cifar10]\naxes: {np: [2]}\nrepeat: 3\n",
     r"repeat: unknown key \(did you mean 'repeats'\?\); valid: name, system, launcher"),
    ("workloads: [cifar10]\naxes: {np: [2], precisions: [fp16]}\n",
     r"axes.precisions: unknown key \(did you mean 'precision'\?\); valid: np, nodes, gpus_per_node"),
    ("workloads: [cifar10]\naxes: {np: [two]}\n", r"axes.np\[0\]: expected a positive integer, got 'two'"),
    ("workloads: [cifar10]\naxes: {np: [2]}\nrepeats: true\n", r"repeats: expected a positive integer, got True"),
    ("workloads: [cifar10]\naxes: {np: [2]}\nlauncher: pbsdsh\n",
     r"launcher: 'pbsdsh' is not one of horovodrun, mpiexec, mpirun, srun"),
    ("workloads: [cifar10]\naxes: {np: [2]}\nlauncher: srun\ncontroller: gloo\n",
     r"controller: launcher srun runs Horovod.s mpi controller only \(SLURM starts the ranks through PMI\): "
     r"add controller mpi"),
    ("workloads: [cifar10]\naxes: {np: [2], env: {HOROVOD_FUSION_TRESHOLD: [1]}}\n",
     r"axes.env.HOROVOD_FUSION_TRESHOLD: .*did you mean HOROVOD_FUSION_THRESHOLD"),
    ("workloads: [cifar10]\naxes: {np: [2], env: {NCCL_IB_HCAS: [mlx5_0]}}\n",
     r"axes.env.NCCL_IB_HCAS: NCCL_IB_HCAS is read by no NCCL release .*did you mean NCCL_IB_HCA\?"),
    ("workloads: [cifar10]\naxes: {np: [2]}\nslurm: {mpi: pmix_v9}\n", r"slurm.mpi: .*pmix_v9"),
    ("workloads: [cifar10]\naxes: {np: [2]}\nslurm: {time: soon}\n",
     r"slurm.time: expected minutes or sbatch's time format"),
    ("workloads: [cifar10]\naxes: {np: [2]}\ntransport: ucx\n",
     r"transport: launcher horovodrun selects transport auto only \(with --mpi it passes Open MPI its own flags"),
    ("workloads: [cifar10]\naxes: {np: [2]}\nlauncher: srun\ntransport: verbs\n",
     r"transport: 'verbs' is not one of auto, ucx, tcp"),
    ("workloads: [cifar10]\naxes: {np: [2]}\nlauncher: srun\nslurm: {gpus_per_task: true}\nretries: -1\n",
     r"retries: expected a whole number, 0 or more, got -1"),
    ("workloads: [cifar10]\naxes: {nodes: [2]}\n", r"axes.gpus_per_node: nodes and gpus_per_node go together"),
    ("workloads: [cifar10]\n", r"axes.np: give the rank counts"),
    ("axes: {np: [2]}\n", r"workloads: missing"),
    ("workloads: [{benchmark: cifar10, args: [--model, resnet21]}]\naxes: {np: [2]}\n", r"workloads\[0\].*resnet21"),
    ("workloads: [resnet]\naxes: {np: [2]}\n", r"workloads\[0\].benchmark: unknown benchmark 'resnet'; known: "),
    ("workloads: [cifar10]\naxes: {np: [2, 16]}\nnode_gpus: 8\n", r"16 GPUs per node, but a node has 8.*valid: 1-8"),
    ("workloads: [cifar10]\naxes: {nodes: [2], gpus_per_node: [1]}\n", r"axes.nodes: 2 node\(s\) need as many hosts"),
    ("workloads: [cifar10]\naxes: {np: [2], placements: [NV2]}\n", r"placements needs the node's topology"),
    (f"workloads: [cifar10]\naxes: {{np: [2], placements: [NV2]}}\ntopology: {PCIE}\n",
     r"axes.placements\[0\]: the topology .* has no 'NV2' placement for 2 GPU\(s\); valid: PIX, PHB, SYS, auto, each"),
    (f"workloads: [cifar10]\naxes: {{np: [2], placements: [[0, 9]]}}\ntopology: {PCIE}\n",
     r"axes.placements\[0\]: GPU id\(s\) \[9\] do not exist: this node has 8"),
    ("workloads: [cifar10]\naxes: {np: [2]\n", r"not valid YAML at line"),
    ("- just\n- a list\n", r"the file: must be a mapping"),
    ("name: ../etc\nworkloads: [cifar10]\naxes: {np: [2]}\n", r"name: '../etc' names the results directory"),
])
def test_bad_sweeps_are_one_error_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(SweepError, match=message) as caught:
        plan(load_sweep(path), read_topology_file(PCIE) if "topology:" in text else None)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


def test_dry_run_prints_each_run_with_its_quoted_command(tmp_path: Path) -> None:
    path = _write(tmp_path, """
name: quoting
system: "a b; rm -rf x"
workloads: [{benchmark: cifar10, args: [--model, resnet20, --steps, "3"]}]
axes: {np: [2], env: {NCCL_DEBUG: "INFO; touch pwned"}}
""")
    out = subprocess.run([hvdbench_exe(), "sweep", str(path), "--dry-run", "-o", str(tmp_path / "res dir")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split(":")[0].startswith("cifar10-np1-") and "(baseline)" in lines[0]
    assert "NCCL_DEBUG='INFO; touch pwned' horovodrun -np 2 -H localhost:2 --gloo" in lines[1]
    assert f"--log-dir '{tmp_path / 'res dir'}/cifar10-np2-" in lines[1]
    assert lines[-2].startswith("2 run(s), 1 of them 1-GPU baselines")
    assert lines[-1].startswith("node-hours from step times: not estimated")
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "res dir").exists()


def test_a_bad_sweep_file_on_the_command_line_is_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "workloads: [cifar10]\naxes: {np: [2]}\nrepeats: 0\n")
    out = subprocess.run([hvdbench_exe(), "sweep", str(path), "--dry-run"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == f"hvdbench: error: {path}: repeats: expected a positive integer, got 0\n"


def test_submit_dry_run_shows_each_jobs_resources_and_what_its_tasks_run(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: t\nlauncher: srun\nworkloads: [mlp]\naxes: {np: [2]}\n"
                            "slurm: {partition: gpu, time: 30, mpi: pmi2}\n")
    out = subprocess.run([hvdbench_exe(), "submit", str(path), "--dry-run", "-o", str(tmp_path / "r"),
                          "--step-time", "0.001"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    heads = [line for line in out.stdout.splitlines() if not line.startswith(" ")]
    assert len(heads) == 4 and heads[1].startswith("mlp-np2-") and heads[1].endswith(": job script:")
    assert heads[2].startswith("2 run(s), 1 of them 1-GPU baselines added for speedup")
    assert heads[3] == ("node-hours from step times: about 0.00 (2 from --step-time 0.001 s (start-up not counted))")
    block = out.stdout.split(heads[1], 1)[1].split(heads[2], 1)[0].splitlines()
    script = [line.strip() for line in block if line.startswith("        ")]
    assert script[0] == "#!/bin/bash" and "wckey" not in out.stdout  # the script sbatch gets, as submitit writes it
    assert {"#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=2", "#SBATCH --gpus-per-node=2", "#SBATCH --partition=gpu",
            "#SBATCH --time=30"} <= set(script)
    assert "--mpi=pmi2 --kill-on-bad-exit=1" in script[-1] and "submitit.core._submit" in script[-1]
    assert block[-3].startswith("    CPUs a rank: 1 (") and block[-1].startswith("    each task runs: ")
    assert block[-2].startswith("    the tasks start ") and "the compute nodes must see it at that path" in block[-2]
    assert block[-1].endswith(f"--log-dir {tmp_path / 'r'}/{heads[1].split(':')[0]}")
    assert not (tmp_path / "r").exists()


def test_independent_runs_at_one_node_count_serve_every_node_count(tmp_path: Path) -> None:
    """Ranks that exchange nothing train on every node as on one: the plan runs them at the first node count of
    each ranks-per-node and says why the others are left out."""
    planned = plan(load_sweep(_write(tmp_path, """
name: twins
launcher: srun
workloads: [{benchmark: cifar10, args: [--model, resnet20, --device, cpu]}]
axes: {nodes: [1, 2, 4], gpus_per_node: [2], independent: [false, true]}
""")))
    twins = sorted((s.nodes, s.np) for s in planned.specs if "--independent" in s.args)
    exchanged = sorted((s.nodes, s.np) for s in planned.specs if "--independent" not in s.args)
    assert twins == [(1, 2)] and exchanged == [(1, 1), (1, 2), (2, 4), (4, 8)]
    assert sum("independent cifar10 at" in note and "the 1-node twin serves every node count" in note
               for note in planned.skipped) == 2
