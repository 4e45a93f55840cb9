"""Ranks inside a container image: the four runtimes GPU clusters use, each a class whose ``flags`` (for srun) or
``wrap`` (around one rank's command) return tokens, and the checks made before any rank starts.

The results folder is always mounted at the same path inside the image, so the ranks' logs land where the
analysis reads them; the benchmark runs as a module of the image's own hvdbench (``python -m hvdbench.suite.X``),
so no path of this checkout reaches a rank. pyxis puts srun's tasks in the image (srun's own flags); Apptainer,
Charliecloud and podman wrap each rank's command, whichever launcher starts it (MPI outside the image, the
ranks inside: the hybrid model all three document)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

from hvdbench.suite.core.errors import UsageError

# a registry reference, a pyxis/enroot name, a file or a folder; never starting with '-' (a runtime would read an
# image "--bind=/etc:/mnt" as its own option, and the next token, the interpreter, as the image)
IMAGE = re.compile(r"^[A-Za-z0-9_./:@#+%=~][A-Za-z0-9_./:@#+%=~-]*$")
MOUNT_PATH = re.compile(r"^/[A-Za-z0-9_./+@%=~-]*$")  # absolute, no ':' or ',' (the runtimes' separators)
INTERPRETER = re.compile(r"^(?:/[A-Za-z0-9_./+@%=~-]+|python[0-9.]*)$")  # the image's: python3 or an absolute path
VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
Runner = Callable[..., Any]
RECIPE_PYTHON = "/opt/hvdbench/venv/bin/python"  # the interpreter container/Containerfile installs hvdbench into


@dataclass(frozen=True)
class Container:
    """Where each rank runs: the image, the runtime that starts it, folders mounted (source, destination), the
    variables passed in besides the run's own, and the image's interpreter."""

    image: str
    runtime: str
    mounts: tuple[tuple[str, str], ...] = ()
    env: tuple[str, ...] = ()
    python: str = RECIPE_PYTHON

    def made_absolute(self, base: Path) -> "Container":
        """The container with an image that names a relative file or folder (``./img.sif``, ``images/x.sif`` where it
        exists under ``base``) made absolute against ``base``: ranks start in their run's folder, where a relative
        image names nothing (the preflight would pass and every rank fail)."""
        image = self.image
        if not image.startswith("/") and (image.startswith(("./", "../")) or (base / image).exists()):
            image = str((base / image).resolve())
        return replace(self, image=image)

    def mounts_problem(self) -> str | None:
        """What is wrong with the mounts together, or None: one over the image's root, two on one destination, or
        one over the image's interpreter (``/tmp:/opt/hvdbench`` hides hvdbench inside the image)."""
        destinations = [d.rstrip("/") or "/" for _, d in self.mounts]
        for source, dest in zip((s for s, _ in self.mounts), destinations):
            if dest == "/":
                return f"container mount {source}:{dest} covers the image's whole root"
            if destinations.count(dest) > 1:
                return f"container mounts: two on {dest}; one destination takes one folder"
            if self.python.startswith("/") and (self.python == dest or self.python.startswith(dest + "/")):
                return f"container mount {source}:{dest} hides the image's interpreter {self.python}"
        return None

    def with_results(self, root: Path) -> tuple[tuple[str, str], ...]:
        """The mounts, the results folder at its own path added unless a mount already shows it there; a mount
        that would hide it (another source over it or over a folder above it), or a results folder whose path
        holds a runtime's separator (',' or ':' in SRC:DST,...), is a UsageError."""
        where = str(root)
        if "," in where or ":" in where:
            raise UsageError(f"results folder {where}: ',' and ':' separate the container runtimes' mounts; give "
                             "-o a folder whose path has neither")
        covering = [(s, d.rstrip("/")) for s, d in self.mounts if where == d or where.startswith(d.rstrip("/") + "/")]
        if not covering:
            return ((where, where), *self.mounts)
        source, dest = max(covering, key=lambda pair: len(pair[1]))  # the deepest mount is what the image shows
        if source.rstrip("/") + where[len(dest):] != where:
            raise UsageError(f"container mount {source}:{dest} hides the results folder {where} inside the image; "
                             "the ranks' logs would land where the analysis cannot read them")
        return self.mounts


class Runtime(ABC):
    """One container runtime: the tool it needs on PATH and the tokens that put a rank inside an image."""

    name: ClassVar[str]
    tool: ClassVar[str]
    srun_only: ClassVar[bool] = False  # the runtime is srun's plugin: only launcher srun can use it

    def flags(self, container: Container, root: Path, knobs: Sequence[str]) -> list[str]:
        """srun's flags that put each task in the image (pyxis only)."""
        return []

    @abstractmethod
    def wrap(self, container: Container, root: Path, inner: list[str], gpu: bool) -> list[str]:
        """``inner`` (one rank's command) inside the image."""

    def missing_image(self, image: str, run: Runner) -> str | None:
        """Why the image cannot be found here (None: found, or the runtime fetches it when it starts)."""
        return _missing_file(image) if image.startswith(("/", "./", "../")) else None


def _missing_file(image: str) -> str | None:
    path = Path(image)
    return None if path.exists() else f"container image {image} does not exist"


class Pyxis(Runtime):
    """NVIDIA's SLURM plugin: ``srun --container-image=IMG --container-name=NAME --container-mounts=SRC:DST,...
    --container-workdir=DIR --container-env=NAME,...`` (the run's knobs and the variables named override any the image
    sets). The name (from the image's) lets a job's steps share one import of the image instead of one each. Ranks
    wired by ``--mpi=pmix`` inside the image need enroot's PMIx hook (``50-slurm-pmi.sh`` in enroot's hooks.d), which
    enroot ships but does not enable."""

    name, tool, srun_only = "pyxis", "srun", True

    def flags(self, container: Container, root: Path, knobs: Sequence[str]) -> list[str]:
        mounts = ",".join(f"{s}:{d}" for s, d in container.with_results(root))
        names = sorted({*knobs, *container.env})
        named = "hvdbench-" + hashlib.sha256(container.image.encode()).hexdigest()[:10]
        return [f"--container-image={container.image}", f"--container-name={named}", f"--container-mounts={mounts}",
                f"--container-workdir={root}", *([f"--container-env={','.join(names)}"] if names else [])]

    def wrap(self, container: Container, root: Path, inner: list[str], gpu: bool) -> list[str]:
        return inner  # srun's flags did it


class Apptainer(Runtime):
    """``apptainer exec --nv --bind SRC:DST,... --pwd DIR IMAGE cmd`` (--nv: the host's driver, for GPU runs);
    the host's environment passes in, as Apptainer does by default."""

    name, tool = "apptainer", "apptainer"

    def wrap(self, container: Container, root: Path, inner: list[str], gpu: bool) -> list[str]:
        binds = ",".join(f"{s}:{d}" for s, d in container.with_results(root))
        return ["apptainer", "exec", *(["--nv"] if gpu else []), "--bind", binds, "--pwd", str(root),
                container.image, *inner]


class Charliecloud(Runtime):
    """``ch-run --bind=SRC:DST ... --cd=DIR IMAGE -- cmd`` (unprivileged; the image a folder or a name in
    ch-image's storage; GPU libraries injected once with ch-fromhost --nvidia); the environment passes in."""

    name, tool = "charliecloud", "ch-run"

    def wrap(self, container: Container, root: Path, inner: list[str], gpu: bool) -> list[str]:
        binds = [f"--bind={s}:{d}" for s, d in container.with_results(root)]
        return ["ch-run", *binds, f"--cd={root}", container.image, "--", *inner]

    def missing_image(self, image: str, run: Runner) -> str | None:
        if image.startswith(("/", "./", "../")):
            return _missing_file(image)
        # a name: ch-run finds it in ch-image's storage, a folder per image ('/' and ':' spelled '%' and '+')
        storage = Path(os.environ.get("CH_IMAGE_STORAGE") or f"/var/tmp/{os.environ.get('USER', '')}.ch") / "img"
        folder = storage / image.replace("/", "%").replace(":", "+")
        return None if folder.is_dir() else f"container image {image} is not in ch-image's storage ({storage})"


class Podman(Runtime):
    """``podman run --rm --network=host --ipc=host --pid=host --env-host -v SRC:DST -w DIR IMAGE cmd``: podman's
    own recipe for MPI ranks (the launcher's rank variables pass in with the host's environment; shared
    memory and the network as on the host); GPUs through CDI (``--device nvidia.com/gpu=all``)."""

    name, tool = "podman", "podman"

    def wrap(self, container: Container, root: Path, inner: list[str], gpu: bool) -> list[str]:
        volumes = [f"--volume={s}:{d}" for s, d in container.with_results(root)]
        return ["podman", "run", "--rm", "--network=host", "--ipc=host", "--pid=host", "--env-host",
                "--security-opt=label=disable", *(["--device=nvidia.com/gpu=all"] if gpu else []), *volumes,
                f"--workdir={root}", container.image, *inner]

    def missing_image(self, image: str, run: Runner) -> str | None:
        out = _ask(run, ["podman", "image", "exists", image])
        return None if out is None or out.returncode == 0 else f"container image {image} is not in podman's storage"


RUNTIMES: dict[str, Runtime] = {cls.name: cls() for cls in (Pyxis, Apptainer, Charliecloud, Podman)}


def runtime(name: str) -> Runtime:
    """A runtime by name; an unknown one is a UsageError listing the known ones."""
    try:
        return RUNTIMES[name]
    except KeyError:
        raise UsageError(f"container runtime {name!r} is not one of {', '.join(RUNTIMES)}") from None


def _ask(run: Runner, argv: list[str]) -> Any:
    """The completed process of a short query, or None where it could not run."""
    try:
        return run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None


def image_id(container: Container, run: Runner = subprocess.run) -> str | None:
    """The image's id where the runtime gives one here (podman's image id; a file image's size and time are no
    id, so none), for the record beside the image's name."""
    if container.runtime != "podman":
        return None
    out = _ask(run, ["podman", "image", "inspect", "--format", "{{.Id}}", container.image])
    if out is None or out.returncode != 0:
        return None
    return out.stdout.strip()[:71] or None


CDI_SPECS = (Path("/etc/cdi"), Path("/var/run/cdi"))  # where podman looks for nvidia.com/gpu (nvidia-ctk cdi generate)


def preflight(container: Container, root: Path, launchers: Sequence[str], *, gpu: bool = False,
              which: Callable[[str], str | None] = shutil.which, run: Runner = subprocess.run,
              cdi: Sequence[Path] = CDI_SPECS) -> None:
    """Refuse, in one line and before any rank starts, what would fail inside every rank: a runtime not
    installed here, pyxis under a launcher that is not srun (or an srun without the plugin), an image that does
    not exist, a mount source that is missing, the results folder hidden inside the image, podman asked for GPUs
    (``gpu``: a run not told ``--device cpu``) where no CDI specification names them."""
    rt = runtime(container.runtime)
    others = sorted(set(launchers) - {"srun"})
    if rt.srun_only and others:
        raise UsageError(f"container runtime pyxis puts ranks in the image through srun's flags: launcher srun "
                         f"only, not {', '.join(others)} (apptainer, charliecloud and podman work with every launcher)")
    if which(rt.tool) is None:
        raise UsageError(f"container runtime {rt.name} is not installed here: {rt.tool} is not on PATH")
    if rt.name == "charliecloud" and not os.environ.get("USER"):
        raise UsageError("container runtime charliecloud: ch-run needs USER set (export USER=$(id -un))")
    if rt.srun_only:
        out = _ask(run, ["srun", "--help"])
        if out is not None and "--container-image" not in f"{out.stdout}{out.stderr}":
            raise UsageError("container runtime pyxis: this srun has no --container-image (the pyxis plugin is not "
                             "loaded; plugstack.conf names it)")
    for source, _ in container.mounts:
        if not Path(source).exists():
            raise UsageError(f"container mount source {source} does not exist")
    container.with_results(root.resolve())
    if gpu and rt.name == "podman" and not any(path.is_dir() and any(path.glob("*nvidia*")) for path in cdi):
        raise UsageError("container runtime podman: no CDI specification of nvidia.com/gpu in /etc/cdi or "
                         "/var/run/cdi (nvidia-ctk cdi generate makes it); on a node without GPUs give the "
                         "benchmark --device cpu")
    problem = rt.missing_image(container.image, run)
    if problem:
        raise UsageError(problem)


def parse_mount(text: str) -> tuple[str, str] | None:
    """``SOURCE[:DESTINATION]`` (absolute paths; the destination defaults to the source), or None if it is not one."""
    parts = text.split(":")
    return (parts[0], parts[-1]) if len(parts) <= 2 and all(MOUNT_PATH.match(p) for p in parts) else None


def from_flags(image: str, runtime_name: str | None, mounts: Sequence[str] = (), env: Sequence[str] = (),
               python: str | None = None) -> Container:
    """The container of the command line's ``--container-*`` flags, each checked as the sweep file's key is."""
    if not IMAGE.match(image):
        raise UsageError(f"--container-image {image[:80]!r}: an image reference, name or path "
                         "(letters, digits and _./:@#+%=~- only)")
    if runtime_name is None:
        raise UsageError(f"--container-image needs --container-runtime: one of {', '.join(RUNTIMES)}")
    runtime(runtime_name)
    pairs = []
    for text in mounts:
        pair = parse_mount(text)
        if pair is None:
            raise UsageError(f"--container-mount {text[:80]!r}: SOURCE or SOURCE:DESTINATION, absolute paths "
                             "without ',' or ':'")
        pairs.append(pair)
    bad = [name for name in env if not VARIABLE.match(name)]
    if bad:
        raise UsageError(f"--container-env {bad[0][:60]!r} is not a variable name")
    if python is not None and not INTERPRETER.match(python):
        raise UsageError(f"--container-python {python[:80]!r}: python3 or an absolute path inside the image")
    container = Container(image, runtime_name, tuple(pairs), tuple(env), python or RECIPE_PYTHON)
    problem = container.mounts_problem()
    if problem:
        raise UsageError(problem)
    return container.made_absolute(Path.cwd())
