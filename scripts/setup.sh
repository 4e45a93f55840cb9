#!/usr/bin/env bash
# hvdbench set-up: MPI, a virtual environment, PyTorch, TensorFlow, Horovod built from its source
# release, mpi4py, and hvdbench itself. Idempotent: a second run finds everything in place and takes seconds.
#
# Settings (environment variables), all optional:
#   HVDBENCH_VENV        virtual environment to create or reuse           (default: <repo>/.venv)
#   HVDBENCH_CACHE       cache for built Horovod (and mpi4py) wheels, outside the repo (default: ~/.cache/hvdbench)
#   HVDBENCH_PYTHON      interpreter the environment is made from         (default: python3)
#   HVDBENCH_TORCH_SPEC  pip requirement for PyTorch                      (default: torch==2.13.0)
#   HVDBENCH_TF_SPEC     pip requirement for TensorFlow; "none" skips TF  (default: tensorflow-cpu==2.21.0
#                        without a GPU, none with one: see below)
#   HVDBENCH_SYSTEM_SITE=1  let the environment see the interpreter's packages (a cluster's torch module,
#                        or an existing virtual environment's python given as HVDBENCH_PYTHON)
#   HVDBENCH_MPI=none    no MPI on this node: Horovod with Gloo alone, no mpi4py (horovodrun's Gloo path)
#   HVDBENCH_WHEELS=DIR  a node without network: pip takes everything from DIR (scripts/bundle.sh fills it)
#   HVDBENCH_MPI4PY_SOURCE=1  build mpi4py against the MPI on PATH instead of its binary wheel
#   HOROVOD_VERSION      Horovod source release to build                  (default: 0.28.1)
#   HOROVOD_GPU_OPERATIONS, HOROVOD_NCCL_HOME, HOROVOD_CUDA_HOME  passed to Horovod's build; with CUDA
#                        and NCCL present, NCCL is chosen for GPU operations unless set otherwise.
#   HOROVOD_BUILD_CUDA_CC_LIST  GPU architectures for Horovod's CUDA kernels, e.g. 80,90 (default: the
#                        node's GPUs as nvidia-smi reports them; without one, every one nvcc knows)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${HVDBENCH_VENV:-$ROOT/.venv}
CACHE=${HVDBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvdbench}
PYTHON=${HVDBENCH_PYTHON:-python3}
TORCH_SPEC=${HVDBENCH_TORCH_SPEC:-torch==2.13.0}
HOROVOD_VERSION=${HOROVOD_VERSION:-0.28.1}

log() { printf '[setup %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }
started=$(date +%s)
if [[ -z "${HVDBENCH_TF_SPEC:-}" ]]; then
    if command -v nvidia-smi >/dev/null 2>&1; then
        # TensorFlow uses GPUs only with its CUDA 12 packages (tensorflow[and-cuda]), whose NCCL and cuDNN
        # land on the very files of PyTorch's CUDA 13 ones (nvidia/nccl/lib, nvidia/cudnn/lib): one
        # environment cannot hold both, and TensorFlow without them would train on the CPU.
        HVDBENCH_TF_SPEC=none
        log "TensorFlow left out on this GPU node: tensorflow[and-cuda]'s CUDA 12 NCCL and cuDNN would overwrite PyTorch's CUDA 13 ones in one environment. For TensorFlow on GPUs, a second environment with a PyTorch built for CUDA 12: HVDBENCH_VENV=.venv-tf HVDBENCH_TF_SPEC='tensorflow[and-cuda]==2.21.0' HVDBENCH_TORCH_SPEC='torch==<version> --index-url https://download.pytorch.org/whl/cu12<x>' make setup"
    else
        HVDBENCH_TF_SPEC=tensorflow-cpu==2.21.0
    fi
fi
TF_SPEC=$HVDBENCH_TF_SPEC
WITH_MPI=1
case "${HVDBENCH_MPI:-}" in
    ""|auto) ;;
    none) WITH_MPI=0 ;;
    *) die "HVDBENCH_MPI=${HVDBENCH_MPI} is not understood: leave it unset (the MPI on PATH) or set it to none (Gloo alone)" ;;
esac
if [[ -n "${HVDBENCH_WHEELS:-}" ]]; then
    [[ -d "$HVDBENCH_WHEELS" ]] || die "HVDBENCH_WHEELS=$HVDBENCH_WHEELS is not a folder (scripts/bundle.sh makes one)"
    export PIP_NO_INDEX=1 PIP_FIND_LINKS=$(cd "$HVDBENCH_WHEELS" && pwd)
    log "offline: pip takes packages from $PIP_FIND_LINKS only"
fi

# --- 1. MPI and a compiler: the cluster's own where present, Debian's packages where root and missing.
# A build tool: make, or ninja where make is missing (CMake then generates for ninja).
need_pkgs=()
if ((WITH_MPI)); then
    command -v mpirun >/dev/null 2>&1 || need_pkgs+=(openmpi-bin)
    command -v mpicxx >/dev/null 2>&1 || command -v mpic++ >/dev/null 2>&1 || need_pkgs+=(libopenmpi-dev)
fi
command -v g++ >/dev/null 2>&1 || need_pkgs+=(g++)
command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1 || need_pkgs+=(make)
if ((${#need_pkgs[@]})); then
    hint="load your MPI and compiler (e.g. 'module load openmpi gcc') or install them, then run again"
    ((WITH_MPI)) && hint="$hint; or set HVDBENCH_MPI=none for Horovod with Gloo alone"
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1 && [[ -z "${HVDBENCH_WHEELS:-}" ]]; then
        log "installing ${need_pkgs[*]} with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null; } \
            || die "apt-get could not install ${need_pkgs[*]}: $hint"
    else
        die "missing ${need_pkgs[*]}: $hint"
    fi
fi
if ((WITH_MPI)); then
    log "MPI: $(command -v mpirun) ($(mpirun --version 2>/dev/null | head -n 1))"
else
    log "MPI: none (HVDBENCH_MPI=none): Horovod with Gloo alone, no mpi4py"
fi

# --- 2. The virtual environment.
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating virtual environment $VENV"
    venv_flags=()
    [[ "${HVDBENCH_SYSTEM_SITE:-0}" == 1 ]] && venv_flags+=(--system-site-packages)
    "$PYTHON" -m venv "${venv_flags[@]}" "$VENV"
    if [[ "${HVDBENCH_SYSTEM_SITE:-0}" == 1 ]]; then
        # --system-site-packages sees the base interpreter's packages only: where HVDBENCH_PYTHON is itself a
        # virtual environment's (an image's or a module's torch lives there), a .pth file adds its packages.
        "$PYTHON" - "$VENV" <<'PYEOF' || die "could not make $VENV see the packages of $PYTHON"
import pathlib, site, sys, sysconfig
if sys.prefix != sys.base_prefix:
    venv = pathlib.Path(sys.argv[1])
    inner = venv / pathlib.Path(sysconfig.get_path("purelib")).relative_to(sys.prefix)
    inner.mkdir(parents=True, exist_ok=True)
    # addsitedir, as for the base interpreter's packages, so that their own .pth files count too
    lines = [f"import site; site.addsitedir({p!r})\n" for p in site.getsitepackages()]
    (inner / "_hvdbench_outer_env.pth").write_text("".join(lines))
    print(f"[setup] {venv} also sees the packages of {sys.prefix}")
PYEOF
    fi
fi
PY=$VENV/bin/python
# Everything below is skipped when this exact set-up already completed in this environment.
stamp_file=$VENV/.hvdbench-setup
stamp=$(cat "$ROOT/setup.cfg" "$ROOT/scripts/setup.sh" <(echo "$TORCH_SPEC $TF_SPEC $HOROVOD_VERSION $ROOT $WITH_MPI") \
    | sha256sum | cut -c1-16)
if [[ -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]] && "$PY" -c 'import hvdbench.suite, horovod.torch' 2>/dev/null; then
    log "environment $VENV is current"
    skip_install=1
fi
pip_install() { "$PY" -m pip install --disable-pip-version-check -q "$@"; }
# The CUDA toolkit's root (nvcc and its headers) as nvcc itself reports it, since nvcc on PATH may be a
# wrapper script; else CUDA_HOME, CUDA_PATH or /usr/local/cuda; nothing where none holds a toolkit.
cuda_toolkit_root() {
    local root=${CUDA_HOME:-${CUDA_PATH:-}} here
    if [[ -z "$root" ]] && command -v nvcc >/dev/null 2>&1; then
        : > "$1/probe.cu"
        here=$(cd "$1" && nvcc --dryrun -c probe.cu 2>&1 | sed -n 's/^#\$ _HERE_=//p' | head -n 1 || true)
        [[ -n "$here" ]] && root=$(dirname "$here")
    fi
    [[ -z "$root" ]] && root=/usr/local/cuda
    if [[ -x "$root/bin/nvcc" && -f "$root/include/cuda_runtime.h" ]]; then echo "$root"; fi
}
# Horovod's build against the NCCL in $1; where it has only libnccl.so.N (PyTorch's NCCL package),
# a libnccl.so link in $2 for Horovod's FindNCCL, which looks for libnccl.so or libnccl_static.a.
use_nccl() {
    export HOROVOD_NCCL_HOME=$1
    local versioned; versioned=$(compgen -G "$1/lib/libnccl.so.*" | head -n 1 || true)
    if [[ ! -e "$1/lib/libnccl.so" && ! -e "$1/lib/libnccl_static.a" && -n "$versioned" ]]; then
        mkdir -p "$2/nccl-lib"
        ln -s "$versioned" "$2/nccl-lib/libnccl.so"
        export HOROVOD_NCCL_INCLUDE=$1/include HOROVOD_NCCL_LIB=$2/nccl-lib HOROVOD_NCCL_LINK=SHARED
    fi
}
install_all() {
    pip_install -r "$ROOT/scripts/horovod-requirements.txt"

    # --- 3. Frameworks.
    have_module() { "$PY" -c "import $1" >/dev/null 2>&1; }
    if [[ "${HVDBENCH_SYSTEM_SITE:-0}" == 1 ]] && have_module torch; then
        log "using the PyTorch the environment already sees"
    else
        read -ra words <<<"$TORCH_SPEC"  # a requirement and pip options, e.g. --index-url
        pip_install "${words[@]}"
    fi
    if [[ "$TF_SPEC" == none ]]; then
        log "TensorFlow skipped (HVDBENCH_TF_SPEC=none)"
    elif [[ "${HVDBENCH_SYSTEM_SITE:-0}" == 1 ]] && have_module tensorflow; then
        log "using the TensorFlow the environment already sees"
    else
        read -ra words <<<"$TF_SPEC"
        pip_install "${words[@]}"
    fi
    torch_ver=$("$PY" -c 'import torch; print(torch.__version__)')
    cuda_ver=$("$PY" -c 'import torch; print(torch.version.cuda or "cpu")')
    tf_ver=none
    [[ "$TF_SPEC" != none ]] && tf_ver=$("$PY" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)
    py_ver=$("$PY" -c 'import sys; print("py%d%d" % sys.version_info[:2])')
    log "torch $torch_ver (CUDA: $cuda_ver), TensorFlow $tf_ver, $py_ver"

    # --- 4. Horovod, built from its source release once per (Horovod, torch, TensorFlow, Python, GPU ops,
    # MPI or not, GPU architectures).
    gpu_ops=${HOROVOD_GPU_OPERATIONS:-}
    nccl_home=
    if [[ "$cuda_ver" != cpu && ( -z "$gpu_ops" || "$gpu_ops" == NCCL ) ]]; then
        # PyTorch's CUDA wheels bring NCCL as a package (nvidia/nccl: include/nccl.h, lib/libnccl.so.2).
        nccl_home=${HOROVOD_NCCL_HOME:-$("$PY" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)}
        if [[ -n "$nccl_home" && -f "$nccl_home/include/nccl.h" ]] || ldconfig -p 2>/dev/null | grep -q libnccl.so; then
            gpu_ops=NCCL
        else
            nccl_home=
        fi
    fi
    cc_list=${HOROVOD_BUILD_CUDA_CC_LIST:-}
    if [[ -n "$gpu_ops" && -z "$cc_list" ]] && command -v nvidia-smi >/dev/null 2>&1; then
        cc_list=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | grep -E '^[0-9]+$' | sort -un | paste -sd, || true)
        [[ -n "$cc_list" ]] && log "Horovod's CUDA kernels for this node's GPU architectures: $cc_list (HOROVOD_BUILD_CUDA_CC_LIST overrides)"
    fi
    key="horovod-${HOROVOD_VERSION}_torch-${torch_ver}_tf-${tf_ver}_${py_ver}_gpu-${gpu_ops:-none}"
    [[ -n "$gpu_ops" && -n "$cc_list" ]] && key="${key}_cc-${cc_list//,/-}"
    ((WITH_MPI)) || key="${key}_mpi-none"
    key=${key//+/-}
    marker=$VENV/.hvdbench-horovod
    if [[ -f "$marker" && "$(cat "$marker")" == "$key" ]] && have_module horovod.torch; then
        log "Horovod already installed ($key)"
    else
        wheel_dir=$CACHE/wheels/$key
        if ! compgen -G "$wheel_dir/horovod-*.whl" >/dev/null; then
            log "building Horovod $HOROVOD_VERSION from source (several minutes on 2 cores); cache: $wheel_dir"
            build_started=$(date +%s)
            work=$(mktemp -d)
            trap 'rm -rf "$work"' EXIT
            "$PY" -m pip download -q --no-deps --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$work"
            tar -xzf "$work"/horovod-"$HOROVOD_VERSION".tar.gz -C "$work"
            src=$work/horovod-$HOROVOD_VERSION
            # torch >= 2.1 headers need C++17; 0.28.1 asks for C++14.
            sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' \
                "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
            grep -q 'CMAKE_CXX_STANDARD 14' "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt" \
                && die "could not switch Horovod's build to C++17"
            # Python 3.12 has no distutils: the PyTorch part asks sysconfig for Python's headers instead.
            sed -i 's/from distutils.sysconfig import get_python_inc; print(get_python_inc())/import sysconfig; print(sysconfig.get_paths()[\x27include\x27])/' \
                "$src/horovod/torch/CMakeLists.txt"
            grep -q distutils "$src/horovod/torch/CMakeLists.txt" && die "could not take distutils out of Horovod's PyTorch build"
            # The XLA op file includes TensorFlow headers that newer releases moved; the rest builds.
            sed -i '/xla_mpi_ops.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
            export CMAKE_POLICY_VERSION_MINIMUM=3.5 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MXNET=1
            if ((WITH_MPI)); then export HOROVOD_WITH_MPI=1; else export HOROVOD_WITHOUT_MPI=1; fi
            if [[ "$tf_ver" != none ]]; then export HOROVOD_WITH_TENSORFLOW=1; else export HOROVOD_WITHOUT_TENSORFLOW=1; fi
            if [[ -n "$gpu_ops" ]]; then
                export HOROVOD_GPU_OPERATIONS=$gpu_ops
                export HOROVOD_CUDA_HOME=${HOROVOD_CUDA_HOME:-$(cuda_toolkit_root "$work")}
                [[ -n "$HOROVOD_CUDA_HOME" ]] \
                    || die "Horovod's $gpu_ops build needs the CUDA toolkit (nvcc and its headers), not found: 'module load cuda' or set HOROVOD_CUDA_HOME"
                # PyTorch's extension helper (which Horovod's build asks for libraries) reads CUDA_HOME.
                export CUDA_HOME=${CUDA_HOME:-$HOROVOD_CUDA_HOME}
                log "CUDA toolkit: $HOROVOD_CUDA_HOME ($("$HOROVOD_CUDA_HOME/bin/nvcc" --version | tail -n 1))"
                [[ -n "$cc_list" ]] && export HOROVOD_BUILD_CUDA_CC_LIST=$cc_list
                # CUDA 12.8+ headers need C++17 in device code too; 0.28.1 asks for C++11.
                sed -i 's/set(CMAKE_CUDA_STANDARD 11)/set(CMAKE_CUDA_STANDARD 17)/' "$src/horovod/common/ops/cuda/CMakeLists.txt"
            fi
            [[ -n "$nccl_home" ]] && use_nccl "$nccl_home" "$work"
            if ! command -v make >/dev/null 2>&1; then
                # ninja instead; Horovod's setup.py would hand it make's VERBOSE=1 as a target
                export CMAKE_GENERATOR=Ninja
                sed -i "s/make_args.append('VERBOSE=1')/pass/" "$src/setup.py"
            fi
            export MAKEFLAGS=${MAKEFLAGS:--j$(( $(nproc) > 8 ? $(nproc) : 8 ))}  # Horovod alone asks for -j8
            export PATH=$VENV/bin:$PATH
            (cd "$src" && "$PY" -m pip wheel -q --no-build-isolation --no-deps -w "$work/dist" .) \
                > "$work/build.log" 2>&1 || {
                    mkdir -p "$CACHE" && cp "$work/build.log" "$CACHE/horovod-build-$key.log"
                    # the first errors say why; pip's traceback at the end does not
                    grep -n -m 12 -A 6 -E 'CMake Error|: (fatal )?error:|Could NOT find|FATAL' "$work/build.log" >&2 || tail -n 40 "$work/build.log" >&2
                    die "Horovod build failed (first errors above; whole log: $CACHE/horovod-build-$key.log)"; }
            mkdir -p "$wheel_dir"
            cp "$work"/dist/horovod-*.whl "$wheel_dir/"
            log "Horovod built in $(( $(date +%s) - build_started )) s"
        else
            log "Horovod wheel found in cache: $wheel_dir"
        fi
        # (its own Python dependencies came from scripts/horovod-requirements.txt above)
        pip_install --no-deps --force-reinstall "$wheel_dir"/horovod-*.whl
        echo "$key" > "$marker"
    fi

    # --- 5. mpi4py (with MPI), then hvdbench itself.
    extras=slurm,gpu,report,test
    if ((WITH_MPI)); then install_mpi4py; extras+=,mpi; fi
    # offline, hvdbench is built with the environment's setuptools (scripts/horovod-requirements.txt)
    isolation=(); [[ -n "${HVDBENCH_WHEELS:-}" ]] && isolation=(--no-build-isolation)
    pip_install "${isolation[@]}" -e "$ROOT[$extras]"
}

# mpi4py's binary wheel loads the MPI on PATH at run time (Open MPI, MPICH, Intel MPI, MVAPICH, Cray
# MPICH); where it cannot use that MPI (or HVDBENCH_MPI4PY_SOURCE=1), a wheel built against it, cached
# beside Horovod's under a key of the MPI's version line, so the build happens once per MPI.
mpi_version_line() { mpirun --version 2>/dev/null | head -n 1; }
mpi4py_matches_mpi() {
    local want; want=$(mpi_version_line | grep -oE '[0-9]+(\.[0-9]+)+' | head -n 1)
    "$PY" - "$want" <<'PYEOF' 2>/dev/null
import sys
from mpi4py import MPI
version = MPI.Get_library_version()
print(version.replace("\0", "").splitlines()[0].strip())  # Open MPI's string ends in a NUL
sys.exit(0 if sys.argv[1] and sys.argv[1] in version else 1)
PYEOF
}
install_mpi4py() {
    if [[ "${HVDBENCH_MPI4PY_SOURCE:-0}" != 1 ]]; then
        if pip_install --only-binary mpi4py 'mpi4py>=4.1' \
                && line=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpi4py_matches_mpi); then
            log "mpi4py: binary wheel, using $line"
            return
        fi
        log "no mpi4py binary wheel uses the MPI on PATH ($(mpi_version_line)); building it from source"
    fi
    local key wheels
    key=$(mpi_version_line | sha256sum | cut -c1-12)
    wheels=$CACHE/wheels/mpi4py_${py_ver}_mpi-$key
    if ! compgen -G "$wheels/mpi4py-*.whl" >/dev/null; then
        local started; started=$(date +%s)
        "$PY" -m pip wheel -q --no-deps --no-binary mpi4py 'mpi4py>=3.1' -w "$wheels" \
            || die "mpi4py could not be built against $(command -v mpicc || echo 'the MPI on PATH')"
        log "mpi4py built against $(mpi_version_line) in $(( $(date +%s) - started )) s; cache: $wheels"
    fi
    pip_install --no-deps --force-reinstall "$wheels"/mpi4py-*.whl
}
[[ -n "${skip_install:-}" ]] || install_all

# --- 6. Check the build: every framework and controller we asked for must be there.
# (the check imports each framework; TensorFlow's start-up chatter goes to a file, shown on failure)
check=$("$VENV/bin/horovodrun" --check-build 2>"$VENV/.check-build.err") || { cat "$VENV/.check-build.err" >&2; die "horovodrun --check-build failed"; }
echo "$check"
built_key=$(cat "$VENV/.hvdbench-horovod")
expect=("PyTorch" "Gloo")
[[ "$built_key" != *_mpi-none ]] && expect+=("MPI")
[[ "$built_key" != *_tf-none_* ]] && expect+=("TensorFlow")
[[ "$built_key" == *_gpu-NCCL* ]] && expect+=("NCCL")
for item in "${expect[@]}"; do
    grep -Eq "\[X\] $item\b" <<<"$check" || die "Horovod was built without $item (see 'horovodrun --check-build' above)"
done
echo "$stamp" > "$stamp_file"
log "ready in $(( $(date +%s) - started )) s: activate with 'source $VENV/bin/activate'"
