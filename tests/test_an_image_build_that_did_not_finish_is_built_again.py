"""scripts/container-image.sh takes an image from its cache only where a stamp says its build finished and its python
imported hvdbench: ch-image builds (and imports) in the image's own folder, so a build killed half way leaves a folder
that looks like the image and is none (a rank then found no hvdbench in it). The script runs for real here, with
stand-ins for the builders (mmdebstrap, ch-image, ch-run) that make folders as the real ones do and die where told."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
MPI_LINE = "mpirun (Open MPI) 4.1.4"

# ch-image as the script runs it (Debian's python3): folders in its storage as the real one makes them, and the
# build or import killed (with the script that ran it) or finished without hvdbench where STANDIN_FAIL says
CH_IMAGE = r'''
import json, os, shutil, signal, sys
from pathlib import Path
args = sys.argv[1:]
Path(os.environ["STANDIN_CALLS"]).open("a").write(json.dumps(args[:1] + args[-1:]) + "\n")
img = Path(os.environ["CH_IMAGE_STORAGE"]) / "img"
fail = os.environ.get("STANDIN_FAIL", "")
if args[0] == "--version":
    print("0.38")
elif args[0] == "import":
    (img / args[2]).mkdir(parents=True)
    if fail == "import":
        os.killpg(os.getpgrp(), signal.SIGKILL)
elif args[0] == "delete":
    shutil.rmtree(img / args[1].replace(":", "+"))
elif args[0] == "build":
    folder = img / args[args.index("-t") + 1].replace(":", "+")
    (folder / "opt").mkdir(parents=True)
    if fail == "build":
        os.killpg(os.getpgrp(), signal.SIGKILL)
    if fail != "hvdbench":
        python = folder / "opt/hvdbench/venv/bin/python"
        python.parent.mkdir(parents=True)
        python.write_text("")
'''
CH_RUN = """#!/bin/sh
case "$1" in "${CH_IMAGE_STORAGE:-none}"/*) echo "ch-run[1]: error: can't run directory images from storage" >&2
                                          exit 1;; esac
[ -e "$1/opt/hvdbench/venv/bin/python" ] && exit 0
echo "ModuleNotFoundError: No module named 'hvdbench'" >&2; exit 1
"""


@pytest.fixture
def builder(tmp_path: Path) -> dict[str, str]:
    """The script's environment: stand-in builders first on PATH, a cache of its own holding set-up's wheel."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, text in {"ch-image": "#!/usr/bin/python3\n" + CH_IMAGE, "ch-run": CH_RUN,
                       "mmdebstrap": '#!/bin/sh\nfor last; do :; done\ntouch "$last"\n',
                       "mpirun": f"#!/bin/sh\necho '{MPI_LINE}'\n"}.items():
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    cache = tmp_path / "cache"
    mpi_key = hashlib.sha256(f"{MPI_LINE}\n".encode()).hexdigest()[:8]
    wheels = cache / "wheels" / f"horovod-0.28.1_torch-2_tf-none_py311_gpu-none_mpi-{mpi_key}"
    wheels.mkdir(parents=True)
    (wheels / "horovod-0.28.1-cp311-cp311-linux_x86_64.whl").write_text("a wheel")
    (tmp_path / "tmp").mkdir()
    return {"PATH": f"{tools}:{os.environ['PATH']}", "HOME": str(tmp_path), "TMPDIR": str(tmp_path / "tmp"),
            "HVDBENCH_CACHE": str(cache), "PIP_CACHE_DIR": str(tmp_path / "pip"), "USER": "someone",
            "STANDIN_CALLS": str(tmp_path / "calls.jsonl")}


def _image(env: dict[str, str], fail: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / "scripts" / "container-image.sh")], env={**env, "STANDIN_FAIL": fail},
                          capture_output=True, text=True, timeout=120, start_new_session=True)


def _calls(env: dict[str, str]) -> list[str]:
    path = Path(env["STANDIN_CALLS"])
    return [json.loads(line)[0] for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("killed_in", ["import", "build"])
def test_a_build_killed_half_way_is_not_taken_for_the_image_and_is_made_again(builder: dict[str, str],
                                                                             killed_in: str) -> None:
    killed = _image(builder, fail=killed_in)
    assert killed.returncode == -9, killed.stderr
    storage = Path(builder["HVDBENCH_CACHE"]) / "ch" / "img"
    assert any(storage.iterdir()), "the stand-in left no folder: nothing was proven"

    again = _image(builder)
    assert again.returncode == 0, again.stderr
    folder = Path(again.stdout.strip().splitlines()[-1])
    assert (folder / "opt/hvdbench/venv/bin/python").exists()
    assert "a build that did not finish left" in again.stderr
    assert _calls(builder).count("delete") == 1  # the half-made folder went before anything was made on it
    builds = _calls(builder).count("build")
    assert (builds, _calls(builder).count("import")) == ((1, 2) if killed_in == "import" else (2, 1))

    found = _image(builder)
    assert (found.returncode, found.stdout.strip()) == (0, str(folder)), found.stderr
    assert _calls(builder).count("build") == builds and found.stderr == ""  # found, not built again


def test_an_image_whose_python_cannot_import_hvdbench_fails_in_one_line_and_is_not_kept(builder: dict[str, str]) \
        -> None:
    broken = _image(builder, fail="hvdbench")
    assert broken.returncode == 1 and broken.stdout == ""
    lines = broken.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot import hvdbench" in lines[0], broken.stderr

    fixed = _image(builder)
    assert fixed.returncode == 0, fixed.stderr
    assert _calls(builder).count("build") == 2
    assert "did not finish" in fixed.stderr
