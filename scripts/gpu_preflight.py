"""What a GPU node has, read in seconds before set-up, so that the first minute tells what will fail:

    python3 scripts/gpu_preflight.py [--bundle DIR] [--facts DIR]

Run with the interpreter set-up will use (HVDBENCH_PYTHON). It checks that interpreter (virtual environments,
ensurepip, pip and its --python option, the fallback set-up takes without ensurepip), the compilers, CMake,
make or ninja, nvcc and the CUDA headers Horovod's build needs, the packages set-up needs against what the
interpreter has and what the bundle brings, PyTorch's CUDA and NCCL, the GPUs (nvidia-smi), CPUs, memory and
disk. It prints a Markdown summary, one row per check marked ok, note or FAIL, and ends with what will fail;
--facts DIR keeps nvidia-smi -q and the package list there. Standard library only; exit status 0 unless a check
fails (1).
"""

from __future__ import annotations

import argparse
import configparser
import importlib.metadata as metadata
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
Row = tuple[str, str, str]  # check, what was found, verdict


def first_line(argv: list[str], last: bool = False) -> str | None:
    """A command's first (or last) line of output, or None where it is missing or fails."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    return (lines[-1] if last else lines[0]) if lines and out.returncode == 0 else None


def interpreter() -> list[Row]:
    """The interpreter set-up makes its environment from, and how it will get pip into it."""
    venv_ok = importlib.util.find_spec("venv") is not None
    ensurepip = importlib.util.find_spec("ensurepip") is not None
    try:
        pip = metadata.version("pip")
    except metadata.PackageNotFoundError:
        pip = None
    pip_python = pip is not None and tuple(int(x) for x in re.findall(r"\d+", pip)[:2]) >= (22, 3)
    rows = [("python", f"{sys.executable} {platform.python_version()}"
             + (" (itself a virtual environment)" if sys.prefix != sys.base_prefix else ""),
             "ok" if venv_ok else "FAIL")]
    if ensurepip:
        rows.append(("ensurepip", "present: set-up's environment gets its own pip", "ok"))
    elif pip_python:
        rows.append(("ensurepip", f"missing: set-up makes the environment --without-pip and installs with this "
                                  f"interpreter's pip {pip} (--python)", "note"))
    else:
        rows.append(("ensurepip", f"missing, and pip {pip or 'absent'} has no --python (22.3 or newer): install the "
                                  "interpreter's venv package (python3-venv) or give HVDBENCH_PYTHON another", "FAIL"))
    rows.append(("pip", pip or "absent", "ok" if pip else "note"))
    return rows


def toolchain() -> list[Row]:
    """Compilers, CMake, a build tool, nvcc and the CUDA headers Horovod's build needs."""
    rows = []
    for name, argv in (("gcc", ["gcc", "--version"]), ("g++", ["g++", "--version"]), ("cmake", ["cmake", "--version"])):
        found = first_line(argv)
        rows.append((name, found or "not found", "ok" if found else "FAIL"))
    make, ninja = first_line(["make", "--version"]), first_line(["ninja", "--version"])
    rows.append(("make or ninja", make or (f"ninja {ninja}" if ninja else "neither"),
                 "ok" if make or ninja else "FAIL"))
    nvcc = first_line(["nvcc", "--version"], last=True)
    rows.append(("nvcc", nvcc or "not found: Horovod gets no NCCL operations", "ok" if nvcc else "FAIL"))
    roots = [os.environ.get(v) for v in ("HOROVOD_CUDA_HOME", "CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    if shutil.which("nvcc"):
        roots.append(str(Path(shutil.which("nvcc") or "").resolve().parent.parent))
    headers = next((r for r in roots if r and Path(r, "include", "cuda_runtime.h").is_file()), None)
    rows.append(("CUDA headers", f"{headers}/include" if headers else "cuda_runtime.h not found (set-up asks nvcc "
                 "--dryrun too)", "ok" if headers else "note"))
    return rows


def requirements() -> list[str]:
    """What set-up installs besides the frameworks: hvdbench's requirements with the extras it asks for, and
    what Horovod's build and wheel need (setup.cfg, scripts/horovod-requirements.txt)."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = cfg["options"]["install_requires"].splitlines()
    for extra in ("slurm", "gpu", "report", "test"):
        lines += cfg["options.extras_require"][extra].splitlines()
    lines += (ROOT / "scripts" / "horovod-requirements.txt").read_text().splitlines()
    names = [re.split(r"[<>=!~ \[;#]", line.strip())[0] for line in lines]
    return sorted({n.lower() for n in names if n and n.lower() not in ("torch", "horovod", "tensorflow")})


def packages(bundle: Path | None) -> list[Row]:
    """Each package set-up needs: the interpreter's own version, else whether the bundle brings it."""
    wheels = {re.sub(r"[-_.]+", "-", p.name.split("-")[0]).lower() for p in bundle.glob("*.whl")} if bundle else set()
    rows, missing = [], []
    for name in requirements():
        try:
            rows.append((f"package {name}", metadata.version(name), "ok"))
        except metadata.PackageNotFoundError:
            key = re.sub(r"[-_.]+", "-", name)
            (rows.append((f"package {name}", "in the bundle", "ok")) if key in wheels else missing.append(name))
    if missing:
        rows.append(("packages missing", " ".join(missing) + ": set-up fetches them, or give a bundle with them "
                     f"(scripts/bundle.sh DIR --only \"{' '.join(missing)}\")", "FAIL" if bundle else "note"))
    return rows


def frameworks() -> list[Row]:
    """PyTorch's build as the interpreter has it (imported: a few seconds), torchvision."""
    try:
        import torch  # noqa: PLC0415 - optional, and only here
    except ImportError:
        return [("torch", "not importable: set-up installs the lock's (a CPU build without network)", "FAIL")]
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "no CUDA device"
    rows = [("torch", f"{torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
             f"NCCL {nccl}, {torch.cuda.device_count()} GPU(s)", "ok" if torch.cuda.is_available() else "FAIL")]
    vision = importlib.util.find_spec("torchvision") is not None
    rows.append(("torchvision", "present" if vision else "absent: vs_horovod.py gives Horovod's script the suite's "
                 "models (benchmarks/standin)", "ok" if vision else "note"))
    return rows


def machine(facts: Path | None, bundle: Path | None) -> list[Row]:
    """The GPUs as nvidia-smi shows them, CPUs, memory, disk, the bundle."""
    query = first_line(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm,"
                        "power.limit,mig.mode.current,persistence_mode", "--format=csv,noheader"])
    rows = [("GPU", query or "nvidia-smi found no GPU", "ok" if query else "FAIL")]
    if facts is not None:
        facts.mkdir(parents=True, exist_ok=True)
        if shutil.which("nvidia-smi"):
            (facts / "nvidia-smi-q.txt").write_text(subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True,
                                                                    timeout=30).stdout)
        (facts / "packages.txt").write_text("".join(f"{d.metadata['Name']}=={d.version}\n"
                                                    for d in metadata.distributions() if d.metadata["Name"]))
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    rows.append(("CPUs, memory", f"{os.cpu_count()} CPUs, {pages:.0f} GiB", "ok"))
    free = shutil.disk_usage(Path.cwd()).free / 2**30
    rows.append(("disk free here", f"{free:.0f} GiB", "ok" if free > 10 else "FAIL"))
    if bundle is not None:
        source = sorted(p.name for p in bundle.glob("horovod-*.tar.gz"))
        size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file()) / 2**20
        rows.append(("bundle", f"{bundle}: {size:.1f} MB, " + (source[0] if source else "no Horovod source release"),
                     "ok" if source else "FAIL"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=None)
    parser.add_argument("--facts", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = interpreter() + toolchain() + packages(args.bundle) + frameworks() + machine(args.facts, args.bundle)
    print("| check | found | verdict |\n|---|---|---|")
    print("\n".join(f"| {c} | {f.replace('|', '/')} | {v} |" for c, f, v in rows))
    failing = [f"{c}: {f}" for c, f, v in rows if v == "FAIL"]
    print("\nWill fail: " + ("; ".join(failing) if failing else "nothing this preflight can see."))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
