"""Ranks inside a container image: the four runtimes GPU clusters use, each a class that owns everything about it
(the launchers it works with, its ``flags`` for srun or its ``wrap`` around one rank's command, what the host needs
before a rank starts, how it finds an image and names its id, and how a rank tells from inside that it runs in one).

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
from dataclasses import MISSING, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Sequence

from .errors import UsageError
from .options import Block, Choice, Grammar, Kind, OptionError, Text, add_flags, option, options_of

# a registry reference, a pyxis/enroot name, a file or a folder; never starting with '-' (a runtime would read an
# image "--bind=/etc:/mnt" as its own option, and the next token, the interpreter, as the image)
IMAGE = re.compile(r"^[A-Za-z0-9_./:@#+%=~][A-Za-z0-9_./:@#+%=~-]*$")
MOUNT_PATH = re.compile(r"^/[A-Za-z0-9_./+@%=~-]*$")  # absolute, no ':' or ',' (the runtimes' separators)
INTERPRETER = re.compile(r"^(?:/[A-Za-z0-9_./+@%=~-]+|python[0-9.]*)$")  # the image's: python3 or an absolute path
VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
Runner = Callable[..., Any]
RECIPE_PYTHON = "/opt/hvdbench/venv/bin/python"  # the interpreter container/Containerfile installs hvdbench into
CDI_SPECS = (Path("/etc/cdi"), Path("/var/run/cdi"))  # where podman looks for nvidia.com/gpu (nvidia-ctk cdi generate)
CONTAINERENV = Path("/run/.containerenv")  # podman writes the container's and the image's names and ids here
IMAGE_ID_VARIABLE = "HVDBENCH_IMAGE_ID"  # the image's id as the launching side asked its runtime (podman)
HOST_ONLY = ("PYTHONPATH", "LD_LIBRARY_PATH")  # the host's, never passed into an image (Runtime.host_only)


@dataclass(frozen=True)
class Host:
    """What a runtime's checks read of the host: a tool's path, a short query's result, the environment, where
    podman's CDI specifications are."""

    which: Callable[[str], str | None] = shutil.which
    run: Runner = subprocess.run
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    cdi: Sequence[Path] = CDI_SPECS


class Runtime(ABC):
    """One container runtime: the tool it needs on PATH, the launchers it works with, the tokens that put a rank
    inside an image, and its checks."""

    name: ClassVar[str]
    tool: ClassVar[str]
    launchers: ClassVar[tuple[str, ...]] = ()  # the launchers that can start its ranks (empty: every one)
    launchers_note: ClassVar[str] = ""  # why only those
    submit_note: ClassVar[str] = ""  # why a run's own job cannot start its ranks ("": it can; else one job a shape)
    refusal: ClassVar[str] = ""  # how its own refusal of a launch begins (a regex): a failed run's first real reason

    def flags(self, container: Container, root: Path, knobs: Sequence[str]) -> list[str]:
        """The launcher's flags that put each task in the image (none: ``wrap`` does it)."""
        return []

    @abstractmethod
    def wrap(self, container: Container, root: Path, inner: list[str], gpu: bool) -> list[str]:
        """``inner`` (one rank's command) inside the image."""

    @staticmethod
    def host_only() -> list[str]:
        """``env -u PYTHONPATH -u LD_LIBRARY_PATH``: what starts a runtime that passes the host's environment in, so
        that the host's Python path and library path (a venv's, a module's) never reach into the image, whose own
        Python and libraries run the rank (the image's own settings of them stand). Not --cleanenv: the launcher's
        variables (Open MPI's, PMIx's, SLURM's) must reach the rank for MPI to wire it."""
        return ["env", *(token for name in HOST_ONLY for token in ("-u", name))]

    def launcher_problem(self, launchers: Sequence[str]) -> str | None:
        """Why these launchers cannot start this runtime's ranks, or None."""
        others = sorted(set(launchers) - set(self.launchers)) if self.launchers else []
        if not others:
            return None
        return (f"container runtime {self.name} {self.launchers_note}: launcher {', '.join(self.launchers)} only, "
                f"not {', '.join(others)} ({', '.join(n for n, r in RUNTIMES.items() if not r.launchers)} work with "
                "every launcher)")

    def host_problem(self, host: Host, gpu: bool) -> str | None:
        """What the host lacks to start ranks in this runtime (``gpu``: the ranks use GPUs), or None."""
        if host.which(self.tool) is None:
            return f"container runtime {self.name} is not installed here: {self.tool} is not on PATH"
        return None

    def missing_image(self, image: str, run: Runner) -> str | None:
        """Why the image cannot be found here (None: found, or the runtime fetches it when it starts)."""
        return _missing_file(image) if image.startswith(("/", "./", "../")) else None

    def image_id(self, container: Container, run: Runner) -> str | None:
        """The image's id where the runtime gives one here, for the record beside the image's name (None: it gives
        none; a file image's size and time are no id)."""
        return None

    def inside(self, environ: Mapping[str, str], containerenv: Path) -> dict[str, Any] | None:
        """This process's container as seen from inside, where this runtime leaves a mark (None: none seen)."""
        return None


def _missing_file(image: str) -> str | None:
    path = Path(image)
    return None if path.exists() else f"container image {image} does not exist"


class Pyxis(Runtime):
    """NVIDIA's SLURM plugin: ``srun --container-image=IMG --container-name=NAME --container-mounts=SRC:DST,...
    --container-workdir=DIR --container-env=NAME,...`` (the run's knobs and the variables named override any the image
    sets). The name (from the image's) lets a job's steps share one import of the image instead of one each. Ranks
    wired by ``--mpi=pmix`` inside the image need enroot's PMIx hook (``50-slurm-pmi.sh`` in enroot's hooks.d), which
    enroot ships but does not enable. A rank sees no mark of it here: run.json's spec says what it ran in."""

    name, tool = "pyxis", "srun"
    launchers = ("srun",)
    launchers_note = "puts ranks in the image through srun's flags"
    submit_note = ("takes srun's flags, which a submitted job's tasks do not pass through: run the sweep in an "
                   "allocation (sbatch slurm/hvdbench.sbatch SWEEP), whose srun puts every rank in the image")

    def flags(self, container: Container, root: Path, knobs: Sequence[str]) -> list[str]:
        mounts = ",".join(f"{s}:{d}" for s, d in container.with_results(root))
        names = sorted({*knobs, *container.env})
        named = "hvdbench-" + hashlib.sha256(container.image.encode()).hexdigest()[:10]
        return [f"--container-image={container.image}", f"--container-name={named}", f"--container-mounts={mounts}",
                f"--container-workdir={root}", *([f"--container-env={','.join(names)}"] if names else [])]

    def wrap(self, container: Container, root: Path, inner: list[str], gpu: bool) -> list[str]:
        return inner  # srun's flags did it

    def host_problem(self, host: Host, gpu: bool) -> str | None:
        problem = super().host_problem(host, gpu)
        out = None if problem else _ask(host.run, [self.tool, "--help"])
        if out is not None and "--container-image" not in f"{out.stdout}{out.stderr}":
            return (f"container runtime {self.name}: this srun has no --container-image (the pyxis plugin is not "
                    "loaded; plugstack.conf names it)")
        return problem


class Apptainer(Runtime):
    """``apptainer exec --nv --bind SRC:DST,... --pwd DIR IMAGE cmd`` (--nv: the host's driver, for GPU runs);
    the host's environment passes in, as Apptainer does by default, but its PYTHONPATH and LD_LIBRARY_PATH."""

    name, tool = "apptainer", "apptainer"
    refusal = r"FATAL:"  # Apptainer's and Singularity's

    def wrap(self, container: Container, root: Path, inner: list[str], gpu: bool) -> list[str]:
        binds = ",".join(f"{s}:{d}" for s, d in container.with_results(root))
        return [*self.host_only(), "apptainer", "exec", *(["--nv"] if gpu else []), "--bind", binds, "--pwd",
                str(root), container.image, *inner]

    def inside(self, environ: Mapping[str, str], containerenv: Path) -> dict[str, Any] | None:
        image = environ.get("APPTAINER_CONTAINER") or environ.get("SINGULARITY_CONTAINER")
        return {"runtime": self.name, "image": image, "image_id": None} if image else None


class Charliecloud(Runtime):
    """``ch-run --bind=SRC:DST ... --cd=DIR IMAGE -- cmd`` (unprivileged; the image a folder or a name in
    ch-image's storage; GPU libraries injected once with ch-fromhost --nvidia); the environment passes in."""

    name, tool = "charliecloud", "ch-run"
    refusal = r"(?:ch-run|ch-image)\[\d+\]: "

    def wrap(self, container: Container, root: Path, inner: list[str], gpu: bool) -> list[str]:
        binds = [f"--bind={s}:{d}" for s, d in container.with_results(root)]
        return [*self.host_only(), "ch-run", *binds, f"--cd={root}", container.image, "--", *inner]

    def host_problem(self, host: Host, gpu: bool) -> str | None:
        if not host.environ.get("USER"):
            return f"container runtime {self.name}: ch-run needs USER set (export USER=$(id -un))"
        return super().host_problem(host, gpu)

    def missing_image(self, image: str, run: Runner) -> str | None:
        if image.startswith(("/", "./", "../")):
            return _missing_file(image)
        # a name: ch-run finds it in ch-image's storage, a folder per image ('/' and ':' spelled '%' and '+')
        storage = Path(os.environ.get("CH_IMAGE_STORAGE") or f"/var/tmp/{os.environ.get('USER', '')}.ch") / "img"
        folder = storage / image.replace("/", "%").replace(":", "+")
        return None if folder.is_dir() else f"container image {image} is not in ch-image's storage ({storage})"

    def inside(self, environ: Mapping[str, str], containerenv: Path) -> dict[str, Any] | None:
        return {"runtime": self.name, "image": None, "image_id": None} if environ.get("CH_RUNNING") else None


class Podman(Runtime):
    """``podman run --rm --network=host --ipc=host --pid=host --env-host -v SRC:DST -w DIR IMAGE cmd``: podman's
    own recipe for MPI ranks (the launcher's rank variables pass in with the host's environment; shared
    memory and the network as on the host); GPUs through CDI (``--device nvidia.com/gpu=all``)."""

    name, tool = "podman", "podman"
    refusal = r"Error: "

    def wrap(self, container: Container, root: Path, inner: list[str], gpu: bool) -> list[str]:
        volumes = [f"--volume={s}:{d}" for s, d in container.with_results(root)]
        return [*self.host_only(), "podman", "run", "--rm", "--network=host", "--ipc=host", "--pid=host", "--env-host",
                "--security-opt=label=disable", *(["--device=nvidia.com/gpu=all"] if gpu else []), *volumes,
                f"--workdir={root}", container.image, *inner]

    def host_problem(self, host: Host, gpu: bool) -> str | None:
        problem = super().host_problem(host, gpu)
        if problem is None and gpu and not any(path.is_dir() and any(path.glob("*nvidia*")) for path in host.cdi):
            return (f"container runtime {self.name}: no CDI specification of nvidia.com/gpu in /etc/cdi or "
                    "/var/run/cdi (nvidia-ctk cdi generate makes it); on a node without GPUs give the benchmark "
                    "--device cpu")
        return problem

    def missing_image(self, image: str, run: Runner) -> str | None:
        out = _ask(run, ["podman", "image", "exists", image])
        return None if out is None or out.returncode == 0 else f"container image {image} is not in podman's storage"

    def image_id(self, container: Container, run: Runner) -> str | None:
        out = _ask(run, ["podman", "image", "inspect", "--format", "{{.Id}}", container.image])
        if out is None or out.returncode != 0:
            return None
        return out.stdout.strip()[:71] or None

    def inside(self, environ: Mapping[str, str], containerenv: Path) -> dict[str, Any] | None:
        """podman's /run/.containerenv (empty unless privileged), else the id the launching side asked podman for."""
        if not containerenv.is_file():
            return None
        try:
            text = containerenv.read_text(encoding="utf-8", errors="replace")[:8192]
        except OSError:
            text = ""
        said = dict(re.findall(r'^(\w+)="([^"\n]*)"', text, re.M))
        return {"runtime": self.name, "image": said.get("image") or None,
                "image_id": said.get("imageid") or environ.get(IMAGE_ID_VARIABLE) or None}


RUNTIMES: dict[str, Runtime] = {cls.name: cls() for cls in (Pyxis, Apptainer, Charliecloud, Podman)}


def runtime(name: str) -> Runtime:
    """A runtime by name; an unknown one is a UsageError listing the known ones."""
    try:
        return RUNTIMES[name]
    except KeyError:
        raise UsageError(f"container runtime {name!r} is not one of {', '.join(RUNTIMES)}") from None


class Mount(Kind):
    """A container mount, ``SOURCE[:DESTINATION]`` (absolute paths; the destination defaults to the source)."""

    def read(self, value: Any, base: Path) -> tuple[str, str]:
        pair = parse_mount(Text().read(value, base))
        if pair is None:
            raise OptionError(f"expected SOURCE or SOURCE:DESTINATION, absolute paths without ',' or ':', got "
                              f"{value!r}")
        return pair


@dataclass(frozen=True)
class Container:
    """Where each rank runs: the image, the runtime that starts it, folders mounted (source, destination), the
    variables passed in besides the run's own, and the image's interpreter. Each field is an option: a sweep
    file's container: key and a --container-* flag, checked alike."""

    image: str = option(MISSING, Grammar(IMAGE, "an image reference, name or path"),
                        "run every rank inside this image (a registry reference or enroot name for pyxis, a .sif for "
                        "apptainer, an image folder or name for charliecloud, an image for podman)",
                        flag="--container-image", metavar="IMAGE")
    runtime: str = option(MISSING, Choice(RUNTIMES.keys()), "what starts the ranks in the image (pyxis: srun's flags, "
                                                              "launcher srun only)", flag="--container-runtime")
    mounts: tuple[tuple[str, str], ...] = option((), Mount(), "a folder mounted into the image (repeatable); the "
                                                 "results folder is always mounted at its own path",
                                                 flag="--container-mount", many=True, metavar="SRC[:DST]")
    env: tuple[str, ...] = option((), Grammar(VARIABLE, "a variable name"), "a variable passed into the image "
                                  "besides the run's own knobs (repeatable)", flag="--container-env", many=True,
                                  metavar="NAME")
    python: str = option(RECIPE_PYTHON, Grammar(INTERPRETER, "python3 or an absolute path inside the image"),
                         "the image's interpreter with hvdbench installed (container/Containerfile's by default)",
                         flag="--container-python", metavar="PATH")

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


def _ask(run: Runner, argv: list[str]) -> Any:
    """The completed process of a short query, or None where it could not run."""
    try:
        return run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None


def image_id(container: Container, run: Runner = subprocess.run) -> str | None:
    """The image's id as its runtime gives it here, or None."""
    return runtime(container.runtime).image_id(container, run)


def container_facts(environ: Mapping[str, str] | None = None,
                    containerenv: Path = CONTAINERENV) -> dict[str, Any] | None:
    """The container this process runs in, as the first runtime that left a mark says (runtime, image, image id);
    None on the host."""
    environ = os.environ if environ is None else environ
    return next((facts for rt in RUNTIMES.values() if (facts := rt.inside(environ, containerenv))), None)


def preflight(container: Container, root: Path, launchers: Sequence[str], *, gpu: bool = False,
              host: Host | None = None) -> None:
    """Refuse, in one line and before any rank starts, what would fail inside every rank: launchers the runtime
    does not work with, what the host lacks for it (its tool, its plugin, podman's CDI specifications where ``gpu``:
    a run not told ``--device cpu``), a mount source that is missing, the results folder hidden inside the image,
    an image that does not exist."""
    rt, host = runtime(container.runtime), host or Host()
    problem = rt.launcher_problem(launchers) or rt.host_problem(host, gpu)
    if problem:
        raise UsageError(problem)
    for source, _ in container.mounts:
        if not Path(source).exists():
            raise UsageError(f"container mount source {source} does not exist")
    container.with_results(root.resolve())
    problem = rt.missing_image(container.image, host.run)
    if problem:
        raise UsageError(problem)


def parse_mount(text: str) -> tuple[str, str] | None:
    """``SOURCE[:DESTINATION]`` (absolute paths; the destination defaults to the source), or None if it is not one."""
    parts = text.split(":")
    return (parts[0], parts[-1]) if len(parts) <= 2 and all(MOUNT_PATH.match(p) for p in parts) else None


FLAG_PREFIX = "container_"  # where the command line's --container-* flags land (args.container_image, ...)


def container_flags(group: Any) -> None:
    """The --container-* flags, generated from the Container's options (a sweep file's container: block, replaced)."""
    add_flags(group, Container, tuple(options_of(Container)), defaults={"python": None}, prefix=FLAG_PREFIX)


def from_flags(args: Any) -> Container | None:
    """The container of the command line's --container-* flags (each checked by its option as argparse read it),
    None where none is given."""
    options = options_of(Container)
    given = {name: getattr(args, FLAG_PREFIX + name, None) for name in options}
    if given["image"] is None:
        named = [options[name].flag for name, value in given.items() if value not in (None, [], ())]
        if named:
            raise UsageError(f"{named[0]} needs --container-image")
        return None
    if given["runtime"] is None:
        raise UsageError(f"--container-image needs --container-runtime: one of {', '.join(RUNTIMES)}")
    container = Container(given["image"], given["runtime"], tuple(given["mounts"] or ()), tuple(given["env"] or ()),
                          given["python"] or RECIPE_PYTHON)
    problem = container.mounts_problem()
    if problem:
        raise UsageError(problem)
    return container.made_absolute(Path.cwd())


def from_block(block: Block) -> Container:
    """The container of a sweep file's container: block, checked by the same options."""
    container = Container(**block.options(Container))
    problem = container.mounts_problem()
    if problem:
        block.fail(block.key("mounts"), problem)
    return container.made_absolute(block.path.parent)
