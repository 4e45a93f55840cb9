#!/usr/bin/env bash
# A second environment on another MPI, beside the first and leaving it as it is: Horovod and mpi4py built
# against that MPI (cached like the first environment's Horovod, under a key of the MPI's version line),
# PyTorch, TensorFlow and everything else seen from the first environment (no second download).
#
#   scripts/mpi-env.sh mpich          .venv-mpich, on MPICH
#
# Where the MPI's compiler wrappers and launchers are:
#   MPI_BIN=DIR   a directory holding that MPI's mpicc, mpicxx and mpiexec (a cluster's module, e.g.
#                 "$(dirname "$(which mpicc)")" after 'module load mpich')
#   (default)     Debian's side-by-side MPICH (packages mpich, libmpich-dev: mpicc.mpich, mpiexec.mpich, ...),
#                 installed with apt-get where root and missing
# The environment's bin/ holds mpicc, mpicxx, mpirun and mpiexec of that MPI (and hydra's helpers), so 'source
# .venv-mpich/bin/activate' (or its bin/ first on PATH) runs hvdbench, Horovod and mpiexec on it alone.
# Settings of scripts/setup.sh apply (HVDBENCH_CACHE, HVDBENCH_LOCK, ...); HVDBENCH_VENV names this
# environment (default <repo>/.venv-NAME) and HVDBENCH_BASE_VENV the first one (default <repo>/.venv).
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { printf 'mpi-env: error: %s\n' "$*" >&2; exit 1; }
name=${1:-}
case "$name" in
    mpich) ;;
    *) die "which MPI? scripts/mpi-env.sh mpich (got '${name}')" ;;
esac
VENV=${HVDBENCH_VENV:-$ROOT/.venv-$name}
BASE=${HVDBENCH_BASE_VENV:-$ROOT/.venv}
[[ -x "$BASE/bin/python" ]] || die "$BASE is not set up: run 'make setup' (scripts/setup.sh) first"

# The MPI's tools under their plain names: MPI_BIN's, else Debian's *.mpich.
tools=(mpicc mpicxx mpirun mpiexec)
declare -A source_of=()
if [[ -n "${MPI_BIN:-}" ]]; then
    for tool in "${tools[@]}"; do
        [[ -x "$MPI_BIN/$tool" ]] || die "MPI_BIN=$MPI_BIN has no $tool"
        source_of[$tool]=$MPI_BIN/$tool
    done
else
    if ! command -v mpicc.mpich >/dev/null 2>&1 || ! command -v mpiexec.mpich >/dev/null 2>&1; then
        [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1 \
            || die "MPICH is not installed (Debian: apt-get install mpich libmpich-dev), or give MPI_BIN=DIR"
        printf '[mpi-env] installing mpich libmpich-dev with apt-get\n'
        log=$(mktemp /tmp/hvdbench-mpi-env.XXXXXX.log)
        { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
            && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mpich libmpich-dev; } \
            > "$log" 2>&1 || die "apt-get could not install mpich libmpich-dev (log: $log)"
        rm -f "$log"
    fi
    for tool in "${tools[@]}"; do source_of[$tool]=$(command -v "$tool.mpich"); done
fi
mkdir -p "$VENV/bin"
for tool in "${tools[@]}"; do ln -sfn "${source_of[$tool]}" "$VENV/bin/$tool"; done
# hydra starts hydra_pmi_proxy from the folder its mpiexec was started from: its helpers go beside it
for helper in "$(dirname "$(readlink -f "${source_of[mpiexec]}")")"/hydra_*; do
    [[ -x "$helper" ]] && ln -sfn "$helper" "$VENV/bin/$(basename "$helper")"
done
[[ "$("$VENV/bin/mpiexec" --version 2>&1 || true)" == *HYDRA* ]] \
    || die "${source_of[mpiexec]} is not MPICH's hydra mpiexec"

PATH=$VENV/bin:$PATH HVDBENCH_VENV=$VENV HVDBENCH_PYTHON=$BASE/bin/python HVDBENCH_SYSTEM_SITE=1 \
    bash "$ROOT/scripts/setup.sh"
