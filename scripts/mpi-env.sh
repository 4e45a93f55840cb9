#!/usr/bin/env bash
# A second environment on another MPI, beside the first and leaving it as it is: Horovod (with PyTorch) built
# against that MPI, cached like the first environment's under a key of the MPI's version line; mpi4py's binary
# wheel, PyTorch and everything else seen from the first environment (no second download or build).
#
#   scripts/mpi-env.sh mpich          .venv-mpich, on MPICH
#   scripts/mpi-env.sh impi           .venv-impi, on Intel MPI (its PyPI packages, impi-rt and impi-devel)
#
# Where the MPI comes from:
#   MPI_BIN=DIR   a directory holding that MPI's mpicc, mpicxx and mpiexec (a cluster's module, e.g.
#                 "$(dirname "$(which mpicc)")" after 'module load mpich' or 'module load intel-mpi')
#   (default)     mpich: Debian's side-by-side MPICH (packages mpich, libmpich-dev: mpicc.mpich, ...),
#                 installed with apt-get where root and missing; impi: impi-rt and impi-devel
#                 IMPI_VERSION (default 2021.15.0, the last release that carries its own libfabric)
#                 installed into the environment with pip
# The environment's bin/ holds mpicc, mpicxx, mpirun and mpiexec of that MPI (and hydra's helpers), so
# 'source .venv-NAME/bin/activate' (or its bin/ first on PATH) runs hvdbench, Horovod and mpiexec on it
# alone. Its Horovod is built with PyTorch only (HVDBENCH_TF_SPEC=none; give another to build TensorFlow's
# part too). Settings of scripts/setup.sh apply (HVDBENCH_CACHE, HVDBENCH_LOCK, ...); HVDBENCH_VENV names the
# first environment, as for set-up (default <repo>/.venv), and HVDBENCH_MPI_VENV this one (default
# <repo>/.venv-NAME).
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { printf 'mpi-env: error: %s\n' "$*" >&2; exit 1; }
name=${1:-}
case "$name" in
    mpich|impi) ;;
    *) die "which MPI? scripts/mpi-env.sh mpich|impi (got '${name}')" ;;
esac
# HVDBENCH_VENV names the first environment here, as for scripts/setup.sh (and make exports it)
BASE=${HVDBENCH_VENV:-$ROOT/.venv}
VENV=${HVDBENCH_MPI_VENV:-$ROOT/.venv-$name}
[[ -x "$BASE/bin/python" ]] || die "$BASE is not set up: run 'make setup' (scripts/setup.sh) first"
# Checked before anything is touched: a folder that holds files and is no environment hvdbench made (an MPI's own
# prefix, another project's environment) would get its mpicc, mpicxx, mpirun and mpiexec replaced below.
if [[ -e "$VENV" || -L "$VENV" ]]; then
    [[ -d "$VENV" && ! -L "$VENV" ]] || die "HVDBENCH_MPI_VENV=$VENV is not a folder: give a new or empty one"
    [[ "$(cd "$BASE" && pwd -P)" != "$(cd "$VENV" && pwd -P)" ]] \
        || die "HVDBENCH_MPI_VENV=$VENV is the first environment itself: give the $name environment its own folder"
    if [[ -n "$(ls -A "$VENV")" && ! -f "$VENV/.hvdbench-venv" && ! -f "$VENV/.hvdbench-mpi-env" ]]; then
        die "HVDBENCH_MPI_VENV=$VENV holds files and is no environment hvdbench made (an MPI's own prefix?): give a new or empty folder; nothing in it was changed"
    fi
fi
tools=(mpicc mpicxx mpirun mpiexec)
# set-up makes the environment again where it was made from another interpreter, which would take the MPI
# put into it below with it: that is done first, here
made_from="$("$BASE/bin/python" -c 'import sys; print(sys.executable)') system-site=1"
if [[ -f "$VENV/.hvdbench-venv" && "$(cat "$VENV/.hvdbench-venv")" != "$made_from" ]]; then
    printf '[mpi-env] making %s again: it was made from %s\n' "$VENV" "$(cat "$VENV/.hvdbench-venv")"
    rm -rf "$VENV"
fi
mkdir -p "$VENV" && : > "$VENV/.hvdbench-mpi-env"  # this folder is hvdbench's from now on

# Debian's MPICH, installed where root and missing; its tools are named *.mpich.
debian_mpich() {
    if ! command -v mpicc.mpich >/dev/null 2>&1 || ! command -v mpiexec.mpich >/dev/null 2>&1; then
        [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1 \
            || die "MPICH is not installed (Debian: apt-get install mpich libmpich-dev), or give MPI_BIN=DIR"
        printf '[mpi-env] installing mpich libmpich-dev with apt-get\n'
        local log; log=$(mktemp /tmp/hvdbench-mpi-env.XXXXXX.log)
        { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
            && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mpich libmpich-dev; } \
            > "$log" 2>&1 || die "apt-get could not install mpich libmpich-dev (log: $log)"
        rm -f "$log"
    fi
}
# Intel MPI's PyPI packages into the environment's own prefix (bin/, lib/, include/), once per version.
pypi_impi() {
    local version=${IMPI_VERSION:-2021.15.0}
    if [[ "$(cat "$VENV/.hvdbench-impi" 2>/dev/null)" != "$version" ]]; then
        printf '[mpi-env] installing Intel MPI %s (impi-rt, impi-devel) into %s\n' "$version" "$VENV"
        local log; log=$(mktemp /tmp/hvdbench-mpi-env.XXXXXX.log)
        "$BASE/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-warn-script-location \
            --prefix "$VENV" "impi-rt==$version" "impi-devel==$version" > "$log" 2>&1 \
            || die "pip could not install Intel MPI $version (log: $log)"
        rm -f "$log"
        echo "$version" > "$VENV/.hvdbench-impi"
    fi
}

declare -A source_of=()
mkdir -p "$VENV/bin"
if [[ -n "${MPI_BIN:-}" ]]; then
    for tool in "${tools[@]}"; do
        [[ -x "$MPI_BIN/$tool" ]] || die "MPI_BIN=$MPI_BIN has no $tool"
        source_of[$tool]=$MPI_BIN/$tool
    done
elif [[ "$name" == mpich ]]; then
    debian_mpich
    for tool in "${tools[@]}"; do source_of[$tool]=$(command -v "$tool.mpich"); done
else
    pypi_impi  # its tools are in the environment's bin/ already
    export I_MPI_ROOT=$VENV  # its compiler wrappers find their headers and libraries through it
fi
for tool in "${!source_of[@]}"; do ln -sfn "${source_of[$tool]}" "$VENV/bin/$tool"; done
if [[ -n "${source_of[mpiexec]:-}" ]]; then
    # hydra starts hydra_pmi_proxy from the folder its mpiexec was started from: its helpers go beside it
    for helper in "$(dirname "$(readlink -f "${source_of[mpiexec]}")")"/hydra_*; do
        [[ -x "$helper" ]] && ln -sfn "$helper" "$VENV/bin/$(basename "$helper")"
    done
fi
says=$("$VENV/bin/mpiexec" --version 2>&1 || true)
case "$name" in
    mpich) [[ "$says" == *HYDRA* ]] || die "$VENV/bin/mpiexec is not MPICH's hydra: it says '${says%%$'\n'*}'" ;;
    impi) [[ "$says" == *"Intel(R) MPI"* ]] || die "$VENV/bin/mpiexec is not Intel MPI's: it says '${says%%$'\n'*}'" ;;
esac

# mpi4py's binary wheel (the first environment's) loads the MPICH ABI's libmpi.so.12 from this environment's lib/
# and its MPICH module asks for a library of that name. Where the MPI names its library otherwise (Debian's MPICH:
# libmpich.so.12), a stub of that name which needs the MPI's own library is linked there, so that wheel runs on this
# MPI and set-up builds no mpi4py from source (about 6 minutes of a core; Intel MPI has its libmpi.so.12 already).
mpich_abi_library() {
    local word dir lib
    for word in $("$VENV/bin/mpicc" -show 2>/dev/null); do
        [[ "$word" == -L* ]] || continue
        dir=${word#-L}
        dir=${dir//\"/}
        for lib in "$dir/libmpi.so.12" "$dir/libmpich.so.12"; do
            [[ -e "$lib" ]] && { echo "$lib"; return 0; }
        done
    done
    return 1
}
if [[ ! -e "$VENV/lib/libmpi.so.12" ]] && abi_lib=$(mpich_abi_library); then
    mkdir -p "$VENV/lib"
    : | cc -shared -o "$VENV/lib/libmpi.so.12" -Wl,-soname,libmpi.so.12 -Wl,--no-as-needed \
        -Wl,-rpath,"$(dirname "$abi_lib")" -x c - -x none "$abi_lib" \
        || die "could not link $VENV/lib/libmpi.so.12 to $abi_lib (a C compiler, cc, is needed)"
    printf '[mpi-env] %s/lib/libmpi.so.12: the MPICH ABI'"'"'s name for %s (mpi4py'"'"'s binary wheel loads it)\n' \
        "$VENV" "$abi_lib"
fi

PATH=$VENV/bin:$PATH HVDBENCH_VENV=$VENV HVDBENCH_PYTHON=$BASE/bin/python HVDBENCH_SYSTEM_SITE=1 \
    HVDBENCH_TF_SPEC=${HVDBENCH_TF_SPEC:-none} bash "$ROOT/scripts/setup.sh"
