"""Ranks inside a container image: each runtime's exact argv (pyxis's and Apptainer's checked flag by flag against
their documentation, since neither installs here), the sweep's container: block and the command line's flags, the
checks made before any rank starts, and what a run records of its image."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hvdbench.launchers.base import LaunchContext, get_launcher
from hvdbench.core.containers import RECIPE_PYTHON, RUNTIMES, Container, Host, container_facts, from_flags, preflight
from hvdbench.launchers.sweep import SweepError, load_sweep
from hvdbench.core.errors import UsageError
from hvdbench.core.spec import RunSpec

ROOT = Path("/lustre/results/h100")
RUN_DIR = ROOT / "imagenet-np16-r0-abc"
IMAGE = "nvcr.io#nvidia/pytorch:25.10-py3"
KNOBS = (("NCCL_IB_HCA", "mlx5"), ("NCCL_SOCKET_IFNAME", "ib0"))
# the rank inside every image: the image's interpreter, the image's hvdbench as modules, the results folder
INNER = ["/opt/hvdbench/bin/python", "-m", "hvdbench.core.bind", "0-19;0-19;20-39;20-39", "--",
         "-m", "hvdbench.suite.imagenet", "--model", "resnet50", "--log-dir", str(RUN_DIR)]


def _spec(launcher: str = "srun", runtime: str = "pyxis", image: str = IMAGE, **kw: Any) -> RunSpec:
    """A run whose ranks run in ``image``: its spec holds the whole container (run.json says what they ran in)."""
    fields: dict[str, Any] = dict(benchmark="imagenet", args=("--model", "resnet50"), np=16, nodes=4,
                                  launcher=launcher, controller="mpi", env=KNOBS, cpus=("0-19",) * 2 + ("20-39",) * 2,
                                  image=image, runtime=runtime, mounts=(("/datasets/imagenet", "/data"),),
                                  container_env=("WANDB_MODE",), container_python="/opt/hvdbench/bin/python")
    fields.update(kw)
    return RunSpec(**fields)


def _ctx(runtime: str, image: str = IMAGE, **kw: Any) -> LaunchContext:
    return LaunchContext(python="/home/me/hvdbench/.venv/bin/python", run_dir=RUN_DIR, hosts=("n1", "n2", "n3", "n4"),
                         **kw)


def test_pyxis_puts_srun_tasks_in_the_image_with_its_documented_flags() -> None:
    argv = get_launcher("srun").command(_spec(), _ctx("pyxis"))
    # pyxis's flags (srun --help with the plugin): image, mounts SRC:DST comma-separated, workdir, env names
    assert argv[:9] == ["srun", "--mpi=pmix", "--nodes=4", "--ntasks=16", "--ntasks-per-node=4",
                        "--kill-on-bad-exit=1", "--cpu-bind=none", "--job-name=hvdbench-imagenet",
                        f"--container-image={IMAGE}"]
    assert argv[9].startswith("--container-name=hvdbench-")  # a job's steps share one import of the image
    assert argv[10:13] == [f"--container-mounts={ROOT}:{ROOT},/datasets/imagenet:/data",
                           f"--container-workdir={ROOT}", "--container-env=NCCL_IB_HCA,NCCL_SOCKET_IFNAME,WANDB_MODE"]
    assert argv[13:] == INNER
    assert not any("/home/me/hvdbench" in token for token in argv)  # no checkout path reaches a rank


# every runtime's golden argv: the flags a launcher takes (pyxis: the test above), or what wraps each rank
FLAGGED = ("pyxis",)
HOST_ONLY = ["env", "-u", "PYTHONPATH", "-u", "LD_LIBRARY_PATH"]  # the host's never reach into the image
WRAPS = {
    "apptainer": [*HOST_ONLY, "apptainer", "exec", "--nv", "--bind", f"{ROOT}:{ROOT},/datasets/imagenet:/data",
                  "--pwd", str(ROOT), "/images/hvdbench.sif"],
    "charliecloud": [*HOST_ONLY, "ch-run", f"--bind={ROOT}:{ROOT}", "--bind=/datasets/imagenet:/data", f"--cd={ROOT}",
                     "/images/hvdbench", "--"],
    "podman": [*HOST_ONLY, "podman", "run", "--rm", "--network=host", "--ipc=host", "--pid=host", "--env-host",
               "--security-opt=label=disable", "--device=nvidia.com/gpu=all", f"--volume={ROOT}:{ROOT}",
               "--volume=/datasets/imagenet:/data", f"--workdir={ROOT}", "/images/hvdbench"],
}


def test_every_runtime_has_its_golden_argv() -> None:
    assert sorted([*FLAGGED, *WRAPS]) == sorted(RUNTIMES)
    assert all(RUNTIMES[name].launchers for name in FLAGGED) and not any(RUNTIMES[name].launchers for name in WRAPS)


@pytest.mark.parametrize("runtime, wrap", WRAPS.items())
@pytest.mark.parametrize("launcher", ["srun", "mpirun", "horovodrun", "mpiexec"])
def test_other_runtimes_wrap_each_rank_whichever_launcher_starts_it(runtime: str, wrap: list[str],
                                                                    launcher: str) -> None:
    image = wrap[-2] if runtime == "charliecloud" else wrap[-1]
    controller = "gloo" if launcher == "horovodrun" else "mpi"
    argv = get_launcher(launcher).command(_spec(launcher, runtime, image, controller=controller),
                                          _ctx(runtime, image))
    start = argv.index(wrap[0])
    assert argv[start:] == wrap + INNER
    assert not any(token.startswith("--container-") for token in argv)
    assert "PYTHONPATH" not in argv[:start] and "LD_LIBRARY_PATH" not in argv[:start]
    assert not any("PYTHONPATH" in token.split(",") for token in argv[:start])
    exported = {"mpirun": ["-x", "WANDB_MODE"], "mpiexec": ["WANDB_MODE"]}.get(launcher)
    if exported:  # --container-env's names reach every host's ranks as the run's knobs do (the runtime passes them)
        shown = argv[:start]
        assert any(shown[i:i + len(exported)] == exported for i in range(len(shown))) or \
            any("WANDB_MODE" in token.split(",") for token in shown), shown


def test_a_cpu_run_gets_no_gpu_flags() -> None:
    spec = _spec("mpirun", "apptainer", "/i.sif", args=("--device", "cpu"))
    argv = get_launcher("mpirun").command(spec, _ctx("apptainer", "/i.sif"))
    assert "--nv" not in argv and "apptainer" in argv


def test_pyxis_under_another_launcher_is_refused() -> None:
    with pytest.raises(UsageError, match="pyxis puts ranks in the image through srun's flags: launcher srun only, "
                                         "not mpirun"):
        get_launcher("mpirun").command(_spec("mpirun"), _ctx("pyxis"))


def _sweep(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text("workloads: [cifar10]\naxes: {np: [1]}\n" + textwrap.dedent(body))
    return path


def test_the_sweep_file_container_block_is_read(tmp_path: Path) -> None:
    sweep = load_sweep(_sweep(tmp_path, """\
        launcher: srun
        container: {image: "nvcr.io#nvidia/pytorch:25.10-py3", runtime: pyxis, mounts: [/data, "/a:/b"],
                    env: [WANDB_MODE], python: /opt/venv/bin/python}
    """))
    assert sweep.container == Container(IMAGE, "pyxis", (("/data", "/data"), ("/a", "/b")), ("WANDB_MODE",),
                                        "/opt/venv/bin/python")


@pytest.mark.parametrize("body, message", [
    ("container: {image: x}\n", f"container.runtime: missing: one of {', '.join(RUNTIMES)}"),
    ("container: {image: x, runtime: docker}\n", "'docker' is not one of pyxis, apptainer"),
    ("container: {image: 'x; rm -rf /', runtime: podman}\n", "container.image"),
    ("container: {image: x, runtime: podman, mounts: [relative/dir]}\n", "SOURCE or SOURCE:DESTINATION"),
    ("container: {image: x, runtime: podman, mounts: ['/a:/b:/c']}\n", "SOURCE or SOURCE:DESTINATION"),
    ("container: {image: x, runtime: podman, python: 'python3 -c evil'}\n", "python3 or an absolute path"),
    ("container: {image: x, runtime: pyxis}\n", "pyxis puts ranks in the image through srun's flags: launcher srun "
                                               "only, not horovodrun"),
    ("container: {image: x, runtime: podman, shell: bash}\n", "container.shell: unknown key"),
    ("launcher: srun\nslurm: {directives: ['--container-image=nvcr.io#nvidia/pytorch:25.10-py3']}\n",
     "--container-image is pyxis's srun flag, not a job's #SBATCH line: give the image in the container: key"),
])
def test_a_bad_container_block_is_one_line_naming_its_key(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(SweepError) as caught:
        load_sweep(_sweep(tmp_path, body))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def flags(*argv: str) -> Container | None:
    """The container hvdbench run's --container-* flags give (argparse checks each by its option)."""
    from hvdbench.cli.parser import build_parser

    return from_flags(build_parser().parse_args(["run", "mlp", *argv]))


def test_command_line_flags_are_checked_as_the_file_is() -> None:
    assert flags("--container-image", "/i.sif", "--container-runtime", "apptainer", "--container-mount", "/data:/d",
                 "--container-env", "X") == Container("/i.sif", "apptainer", (("/data", "/d"),), ("X",), RECIPE_PYTHON)
    assert flags() is None
    for args, message in [(("--container-image", "/i.sif"), "--container-image needs --container-runtime"),
                          (("--container-env", "X"), "--container-env needs --container-image"),
                          (("--container-runtime", "lxc"), "invalid choice: 'lxc'"),
                          (("--container-image", "$(id)"), "'$(id)' is not an image reference, name or path"),
                          (("--container-image", "/i.sif", "--container-mount", "data"),
                           "--container-mount: expected SOURCE or SOURCE:DESTINATION")]:
        with pytest.raises(UsageError, match=message.replace("$", r"\$").replace("(", r"\(").replace(")", r"\)")):
            flags(*args)


def _which(tools: set[str]) -> Any:
    return lambda tool: f"/usr/bin/{tool}" if tool in tools else None


def _answers(code: int = 0, out: str = "") -> Any:
    return lambda argv, **_: subprocess.CompletedProcess(argv, code, out, "")


def test_preflight_names_each_problem_before_any_rank_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "tester")
    monkeypatch.setenv("CH_IMAGE_STORAGE", str(tmp_path / "ch"))
    image = tmp_path / "img.sif"
    image.write_text("sif")
    ok = Container(str(image), "apptainer", mounts=((str(tmp_path), "/data"),))
    preflight(ok, tmp_path / "results", ["mpirun"], host=Host(_which({"apptainer"}), _answers()))
    cases = [
        (ok, ["mpirun"], set(), _answers(),
         "container runtime apptainer is not installed here: apptainer is not on PATH"),
        (Container(str(tmp_path / "none.sif"), "apptainer"), ["mpirun"], {"apptainer"}, _answers(),
         f"container image {tmp_path / 'none.sif'} does not exist"),
        (Container("hvdbench:1", "podman"), ["mpirun"], {"podman"}, _answers(1),
         "container image hvdbench:1 is not in podman's storage"),
        (Container("hvdbench:old", "charliecloud"), ["mpirun"], {"ch-run"}, _answers(),
         f"container image hvdbench:old is not in ch-image's storage ({tmp_path / 'ch' / 'img'})"),
        (Container(str(image), "apptainer", mounts=(("/no/such/dir", "/d"),)), ["mpirun"], {"apptainer"}, _answers(),
         "container mount source /no/such/dir does not exist"),
        (Container(str(image), "apptainer", mounts=((str(tmp_path), str(tmp_path / "results")),)), ["mpirun"],
         {"apptainer"}, _answers(), "hides the results folder"),
        (Container(IMAGE, "pyxis"), ["srun"], {"srun"}, _answers(0, "Usage: srun [OPTIONS...]"),
         "this srun has no --container-image (the pyxis plugin is not loaded"),
        (Container(IMAGE, "pyxis"), ["srun", "mpirun"], {"srun"}, _answers(), "launcher srun only, not mpirun"),
    ]
    with pytest.raises(UsageError, match="podman: no CDI specification of nvidia.com/gpu"):
        preflight(Container("hvdbench:1", "podman"), tmp_path / "results", ["mpirun"], gpu=True,
                  host=Host(_which({"podman"}), _answers(), cdi=[tmp_path / "cdi"]))
    preflight(Container("hvdbench:1", "podman"), tmp_path / "results", ["mpirun"], gpu=False,
              host=Host(_which({"podman"}), _answers(), cdi=[tmp_path / "cdi"]))
    (tmp_path / "ch" / "img" / "hvdbench").mkdir(parents=True)
    preflight(Container("hvdbench", "charliecloud"), tmp_path / "results", ["srun"], host=Host(_which({"ch-run"})))
    for box, launchers, tools, run, message in cases:
        with pytest.raises(UsageError) as caught:
            preflight(box, tmp_path / "results", launchers, host=Host(_which(tools), run))
        assert message in str(caught.value), (message, str(caught.value))
    monkeypatch.delenv("USER")
    with pytest.raises(UsageError, match=r"ch-run needs USER set"):
        preflight(Container("hvdbench", "charliecloud"), tmp_path / "results", ["srun"], host=Host(_which({"ch-run"})))


def test_a_mount_that_already_shows_the_results_folder_is_not_doubled(tmp_path: Path) -> None:
    box = Container("/i.sif", "apptainer", mounts=((str(tmp_path), str(tmp_path)),))
    assert box.with_results(tmp_path / "results") == ((str(tmp_path), str(tmp_path)),)


def test_a_container_run_has_its_own_id_and_a_host_run_keeps_its_old_one() -> None:
    host = RunSpec(benchmark="cifar10")
    boxed = RunSpec(benchmark="cifar10", image="/i.sif", runtime="apptainer")
    assert host.id != boxed.id and "image" not in {k for k, v in host.to_dict().items() if v is not None}
    assert RunSpec.from_dict(boxed.to_dict()) == boxed
    with pytest.raises(Exception, match="image and RunSpec.runtime go together"):
        RunSpec(benchmark="cifar10", image="/i.sif")


def test_a_rank_records_the_container_it_sees(tmp_path: Path) -> None:
    containerenv = tmp_path / ".containerenv"
    containerenv.write_text('engine="podman-4.3.1"\nname="x"\nimage="localhost/hvdbench:1"\nimageid="3f2a9c"\n')
    assert container_facts({}, containerenv) == {"runtime": "podman", "image": "localhost/hvdbench:1",
                                                 "image_id": "3f2a9c"}
    containerenv.write_text("")  # unprivileged podman leaves it empty: the id the launching side asked podman for
    assert container_facts({"HVDBENCH_IMAGE_ID": "f443876a"}, containerenv)["image_id"] == "f443876a"
    missing = tmp_path / "none"
    assert container_facts({"APPTAINER_CONTAINER": "/i.sif"}, missing)["runtime"] == "apptainer"
    assert container_facts({"CH_RUNNING": "Weird Al Yankovic"}, missing)["runtime"] == "charliecloud"
    assert container_facts({}, missing) is None


def test_the_dry_run_of_a_16_node_pyxis_sweep_puts_every_rank_in_the_image(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from hvdbench.cli import main

    sweep = tmp_path / "cluster.yaml"
    sweep.write_text(textwrap.dedent("""\
        name: h100-16
        launcher: srun
        workloads: [{benchmark: imagenet, args: [--model, resnet50, --precision, amp]}]
        axes: {nodes: [1, 2, 4, 8, 16], gpus_per_node: [8], env: {NCCL_IB_HCA: [mlx5]}}
        container: {image: /shared/hvdbench.sqsh, runtime: pyxis, mounts: [/datasets:/data]}
    """))
    assert main(["sweep", str(sweep), "--dry-run", "-o", str(tmp_path / "results")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("imagenet-")]
    assert len(lines) == 6  # 8, 16, ... 128 GPUs and the 1-GPU baseline
    checkout = str(Path(__file__).resolve().parents[1])
    for line in lines:
        assert " srun --mpi=pmix " in line and " --container-image=/shared/hvdbench.sqsh " in line, line
        assert f"--container-mounts={tmp_path / 'results'}:{tmp_path / 'results'},/datasets:/data" in line
        assert " -m hvdbench.suite.imagenet " in line
        assert ("--container-env=NCCL_IB_HCA" in line) == ("(baseline)" not in line)  # knobs override the image's
        assert checkout not in line, line
    assert any("--nodes=16 --ntasks=128" in line for line in lines)


def test_a_hybrid_launch_says_where_the_hosts_mpi_and_the_images_differ(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """mpirun on the host starting ranks inside an Apptainer image: Open MPI 4.1 here and 5.0 inside is said, an image
    without mpirun is said, the same major.minor (4.1.5 and 4.1.6) is not; pyxis (srun puts the tasks in the image)
    and launchers without an MPI tool are not asked."""
    from hvdbench.launchers import runs

    monkeypatch.setattr(runs.shutil, "which", lambda tool: f"/usr/bin/{tool}")

    def answers(inside: str | None) -> Any:
        def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
            if "apptainer" in argv[:6]:
                return subprocess.CompletedProcess(argv, 0 if inside else 127, inside or "", "")
            return subprocess.CompletedProcess(argv, 0, "mpirun (Open MPI) 4.1.6\n", "")
        return run

    box = Container(str(tmp_path / "img.sif"), "apptainer")
    [line] = runs.mpi_mismatch(box, ["mpirun", "srun"], tmp_path, answers("mpirun (Open MPI) 5.0.3\n"))
    assert line == ("launcher mpirun: the host's MPI is Open MPI 4.1.6, the image's Open MPI 5.0.3: with MPI outside "
                    "the image they must be one implementation at one major.minor version, or the ranks fail to start "
                    "or wire up")
    [line] = runs.mpi_mismatch(box, ["mpirun"], tmp_path, answers(None))
    assert "answers no mpirun --version" in line and "Open MPI 4.1.6 here" in line
    assert runs.mpi_mismatch(box, ["mpirun"], tmp_path, answers("mpirun (Open MPI) 4.1.5\n")) == []
    assert runs.mpi_mismatch(Container("hvdbench+1", "pyxis"), ["srun"], tmp_path, answers(None)) == []
