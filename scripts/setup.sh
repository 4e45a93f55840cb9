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
#                        without a GPU, tensorflow==2.21.0 with one)
#   HVDBENCH_SYSTEM_SITE=1  let the environment see the interpreter's packages (a cluster's torch module)
#   HVDBENCH_MPI4PY_SOURCE=1  build mpi4py against the MPI on PATH instead of its binary wheel
#   HOROVOD_VERSION      Horovod source release to build                  (default: 0.28.1)
#   HOROVOD_GPU_OPERATIONS, HOROVOD_NCCL_HOME, HOROVOD_CUDA_HOME  passed to Horovod's build; with CUDA
#                        and NCCL present, NCCL is chosen for GPU operations unless set otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${HVDBENCH_VENV:-$ROOT/.venv}
CACHE=${HVDBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvdbench}
PYTHON=${HVDBENCH_PYTHON:-python3}
TORCH_SPEC=${HVDBENCH_TORCH_SPEC:-torch==2.13.0}
HOROVOD_VERSION=${HOROVOD_VERSION:-0.28.1}
if [[ -z "${HVDBENCH_TF_SPEC:-}" ]]; then
    if command -v nvidia-smi >/dev/null 2>&1; then HVDBENCH_TF_SPEC=tensorflow==2.21.0
    else HVDBENCH_TF_SPEC=tensorflow-cpu==2.21.0; fi
fi
TF_SPEC=$HVDBENCH_TF_SPEC

log() { printf '[setup %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }
started=$(date +%s)

# --- 1. MPI and a compiler: the cluster's own where present, Debian's packages where root and missing.
need_pkgs=()
command -v mpirun >/dev/null 2>&1 || need_pkgs+=(openmpi-bin)
command -v mpicxx >/dev/null 2>&1 || command -v mpic++ >/dev/null 2>&1 || need_pkgs+=(libopenmpi-dev)
command -v g++ >/dev/null 2>&1 || need_pkgs+=(g++)
command -v make >/dev/null 2>&1 || need_pkgs+=(make)
if ((${#need_pkgs[@]})); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        log "installing ${need_pkgs[*]} with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
    else
        die "missing ${need_pkgs[*]}: load your MPI and compiler (e.g. 'module load openmpi gcc') or install them, then run again"
    fi
fi
log "MPI: $(command -v mpirun) ($(mpirun --version 2>/dev/null | head -n 1))"

# --- 2. The virtual environment.
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating virtual environment $VENV"
    venv_flags=()
    [[ "${HVDBENCH_SYSTEM_SITE:-0}" == 1 ]] && venv_flags+=(--system-site-packages)
    "$PYTHON" -m venv "${venv_flags[@]}" "$VENV"
fi
PY=$VENV/bin/python
# Everything below is skipped when this exact set-up already completed in this environment.
stamp_file=$VENV/.hvdbench-setup
stamp=$(cat "$ROOT/setup.cfg" "$ROOT/scripts/setup.sh" <(echo "$TORCH_SPEC $TF_SPEC $HOROVOD_VERSION $ROOT") \
    | sha256sum | cut -c1-16)
if [[ -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]] && "$PY" -c 'import hvdbench.suite, horovod.torch' 2>/dev/null; then
    log "environment $VENV is current"
    skip_install=1
fi
pip_install() { "$PY" -m pip install --disable-pip-version-check -q "$@"; }
install_all() {
    pip_install packaging setuptools wheel 'cmake>=3.18'

    # --- 3. Frameworks.
    have_module() { "$PY" -c "import $1" >/dev/null 2>&1; }
    if [[ "${HVDBENCH_SYSTEM_SITE:-0}" == 1 ]] && have_module torch; then
        log "using the PyTorch the environment already sees"
    else
        pip_install "$TORCH_SPEC"
    fi
    if [[ "$TF_SPEC" == none ]]; then
        log "TensorFlow skipped (HVDBENCH_TF_SPEC=none)"
    elif [[ "${HVDBENCH_SYSTEM_SITE:-0}" == 1 ]] && have_module tensorflow; then
        log "using the TensorFlow the environment already sees"
    else
        pip_install "$TF_SPEC"
    fi
    torch_ver=$("$PY" -c 'import torch; print(torch.__version__)')
    cuda_ver=$("$PY" -c 'import torch; print(torch.version.cuda or "cpu")')
    tf_ver=none
    [[ "$TF_SPEC" != none ]] && tf_ver=$("$PY" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)
    py_ver=$("$PY" -c 'import sys; print("py%d%d" % sys.version_info[:2])')
    log "torch $torch_ver (CUDA: $cuda_ver), TensorFlow $tf_ver, $py_ver"

    # --- 4. Horovod, built from its source release once per (Horovod, torch, TensorFlow, Python, GPU ops).
    gpu_ops=${HOROVOD_GPU_OPERATIONS:-}
    if [[ -z "$gpu_ops" && "$cuda_ver" != cpu ]]; then
        nccl_home=${HOROVOD_NCCL_HOME:-$("$PY" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)}
        if [[ -n "$nccl_home" && -d "$nccl_home/include" ]] || ldconfig -p 2>/dev/null | grep -q libnccl.so; then
            gpu_ops=NCCL
            [[ -n "$nccl_home" ]] && export HOROVOD_NCCL_HOME=$nccl_home
        fi
    fi
    key="horovod-${HOROVOD_VERSION}_torch-${torch_ver}_tf-${tf_ver}_${py_ver}_gpu-${gpu_ops:-none}"
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
            # The XLA op file includes TensorFlow headers that newer releases moved; the rest builds.
            sed -i '/xla_mpi_ops.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
            export CMAKE_POLICY_VERSION_MINIMUM=3.5 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 \
                HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_MXNET=1
            if [[ "$tf_ver" != none ]]; then export HOROVOD_WITH_TENSORFLOW=1; else export HOROVOD_WITHOUT_TENSORFLOW=1; fi
            [[ -n "$gpu_ops" ]] && export HOROVOD_GPU_OPERATIONS=$gpu_ops
            export PATH=$VENV/bin:$PATH
            (cd "$src" && "$PY" -m pip wheel -q --no-build-isolation --no-deps -w "$work/dist" .) \
                > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2; die "Horovod build failed (log above)"; }
            mkdir -p "$wheel_dir"
            cp "$work"/dist/horovod-*.whl "$wheel_dir/"
            log "Horovod built in $(( $(date +%s) - build_started )) s"
        else
            log "Horovod wheel found in cache: $wheel_dir"
        fi
        pip_install --no-deps --force-reinstall "$wheel_dir"/horovod-*.whl
        # Horovod's own Python dependencies (its wheel was installed without them).
        pip_install cffi cloudpickle psutil pyyaml packaging
        echo "$key" > "$marker"
    fi

    # --- 5. mpi4py, then hvdbench itself.
    install_mpi4py
    pip_install -e "$ROOT[slurm,gpu,report,test]"
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
print(version.splitlines()[0].strip())
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
expect=("PyTorch" "MPI" "Gloo")
[[ "$built_key" != *_tf-none_* ]] && expect+=("TensorFlow")
[[ "$built_key" == *_gpu-NCCL ]] && expect+=("NCCL")
for item in "${expect[@]}"; do
    grep -Eq "\[X\] $item\b" <<<"$check" || die "Horovod was built without $item (see 'horovodrun --check-build' above)"
done
echo "$stamp" > "$stamp_file"
log "ready in $(( $(date +%s) - started )) s: activate with 'source $VENV/bin/activate'"
