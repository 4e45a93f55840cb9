#!/usr/bin/env bash
# nccl-tests' all_reduce_perf, built from its source release in a scratch folder (never kept) against the NCCL that
# PyTorch loads (the nvidia-nccl package) and the node's CUDA toolkit, for this node's GPU architectures, then run:
#
#   scripts/nccl-tests.sh TARBALL [all_reduce_perf flags]     # default: -b 1K -e 1G -f 2 -g 1 -n 50 -w 10
#
# nccl-tests times -n iterations back to back after -w warm-up ones and divides (its src/common.cu); its algbw and
# busbw are the figures vendors quote, so hvdbench's own curve is read beside it on the same GPU.
set -euo pipefail
die() { printf 'nccl-tests: error: %s\n' "$*" >&2; exit 2; }
tarball=${1:-}
[[ -f "$tarball" && "$tarball" == *.tar.gz ]] || die "usage: scripts/nccl-tests.sh TARBALL [all_reduce_perf flags] (nccl-tests' source release)"
shift
(($#)) || set -- -b 1K -e 1G -f 2 -g 1 -n 50 -w 10
py=${HVDBENCH_VENV:+$HVDBENCH_VENV/bin/}python3
[[ -x "$py" ]] || py=python3
nccl=$("$py" -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null) \
    || die "no NCCL package (nvidia-nccl-*) beside PyTorch: give NCCL_HOME's lib/include by hand"
command -v nvcc >/dev/null || die "no nvcc on PATH (module load cuda)"
cuda=${CUDA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")}
archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | sort -un || true)
gencode=$(for a in $archs; do printf -- '-gencode=arch=compute_%s,code=sm_%s ' "$a" "$a"; done)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work"
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
mkdir -p "$work/nccl/lib"
ln -s "$nccl/include" "$work/nccl/include"
ln -s "$(find "$nccl/lib" -name 'libnccl.so*' | head -n 1)" "$work/nccl/lib/libnccl.so"
started=$(date +%s)
make -C "$src" -j"$(nproc)" MPI=0 NCCL_HOME="$work/nccl" CUDA_HOME="$cuda" ${gencode:+NVCC_GENCODE="$gencode"} \
    > "$work/build.log" 2>&1 || { tail -n 30 "$work/build.log" >&2; die "the build failed (above)"; }
echo "# nccl-tests built in $(( $(date +%s) - started )) s against $nccl, CUDA $cuda, archs ${archs:-the default of nvcc}"
LD_LIBRARY_PATH="$nccl/lib:${LD_LIBRARY_PATH:-}" "$src/build/all_reduce_perf" "$@"
