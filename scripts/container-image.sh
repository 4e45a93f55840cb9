#!/usr/bin/env bash
# A CPU image from the repository's recipe (container/Containerfile) without a registry: a Debian root file system
# from Debian's own packages (mmdebstrap), imported into Charliecloud's unprivileged builder (ch-image), then the
# recipe built on it with the Horovod wheel set-up already built (same Debian, Python and Open MPI: nothing is
# compiled again). Both are cached outside the repository, keyed by their inputs, like the Horovod wheel; a second
# run finds the image and prints its name at once; a build that failed or was killed is found as such and built again.
#
#   scripts/container-image.sh        prints the image's folder in ch-image's storage (CH_IMAGE_STORAGE, below),
#                                     which ch-run takes as the image on any host that sees the folder
#
# Needs mmdebstrap, ch-image (charliecloud-builders, python3-lark), ch-run and a finished `make setup` (its wheel).
# Every failure is one line naming what failed and where its log is.
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${HVDBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvdbench}
export CH_IMAGE_STORAGE=${CH_IMAGE_STORAGE:-$CACHE/ch}
export USER=${USER:-$(id -un)}
SUITE=bookworm  # Debian's release: its python3 (3.11) and Open MPI (4.1) are the ones set-up's wheel was built for
PACKAGES=python3,python3-venv,python3-pip,openmpi-bin,libopenmpi-dev,g++,make,ca-certificates
die() { printf 'container-image: error: %s\n' "$*" >&2; exit 1; }
for tool in mmdebstrap ch-image ch-run flock; do command -v "$tool" >/dev/null 2>&1 || die "$tool is not on PATH"; done
# ch-image is a Python program of Debian's python3 (its lark is Debian's): run it with that interpreter
CH_IMAGE=(/usr/bin/python3 "$(command -v ch-image)")
"${CH_IMAGE[@]}" --version >/dev/null 2>&1 || die "ch-image does not run (python3-lark missing?)"

# set-up's wheel for Python 3.11 linked against this machine's Open MPI, whose version line (set-up's key) is
# Debian's Open MPI's: the image's
mpi_line=$(mpirun --version 2>/dev/null | grep -m 1 -E 'Open MPI.*[0-9]+\.[0-9]+' || true)
[[ -n "$mpi_line" ]] || die "mpirun on PATH is not Open MPI: the image's Open MPI would not match set-up's wheel"
mpi_key=$(echo "$mpi_line" | sha256sum | cut -c1-8)
wheel=$(ls "$CACHE"/wheels/horovod-*_py311_gpu-none_mpi-"$mpi_key"/horovod-*.whl 2>/dev/null | head -n 1 || true)
[[ -n "$wheel" ]] || die "no Horovod wheel for Python 3.11 and $mpi_line in $CACHE/wheels: run make setup first"
mkdir -p "$CACHE/images" "$CACHE/logs"
log=$CACHE/logs/container-image-$(date +%Y%m%d-%H%M%S).log

# the build context: what git tracks and does not ignore (no virtual environments, no results)
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
(cd "$ROOT" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$context"
key=$( { echo "$SUITE $PACKAGES"; sha256sum "$wheel" | cut -c1-16
         (cd "$context" && find . -type f -print0 | sort -z | xargs -0 sha256sum); } | sha256sum | cut -c1-12)
image=hvdbench-cpu+$key  # ch-image spells hvdbench-cpu:KEY this way in its storage
folder=$CH_IMAGE_STORAGE/img/$image
owners=$CACHE/images/owners  # per image, every checkout that uses it: only an image no other checkout uses is pruned
# per image, a stamp written once it built whole and its python imported hvdbench and Horovod: ch-image builds in
# the image's own folder, so a build that failed or was killed leaves a folder that is no image
built=$CACHE/images/built
mkdir -p "$owners" "$built"
grep -qxF "$ROOT" "$owners/$key" 2>/dev/null || echo "$ROOT" >>"$owners/$key"
found() { if [[ -d "$folder" && -f "$built/$image" ]]; then echo "$folder"; exit 0; fi; }
found
exec 9>"$CACHE/images/build.lock"  # one build at a time: a second one of the same image waits, then finds it
flock 9 || die "could not lock $CACHE/images/build.lock"
found
# NAME TAG: delete image NAME's folder where no stamp says its build or import finished
unfinished() {
    local name=$1 tag=$2 dir=$CH_IMAGE_STORAGE/img/$1
    [[ -d "$dir" && ! -f "$built/$name" ]] || return 0
    echo "container-image: $dir is what a build that did not finish left (no stamp in $built): made again" >&2
    "${CH_IMAGE[@]}" delete "$tag" >>"$log" 2>&1 || rm -rf "$dir"
    [[ ! -e "$dir" ]] || die "could not delete $dir, left by a build that did not finish (log: $log)"
}
unfinished "$image" "hvdbench-cpu:$key"
base=hvdbench-base-$SUITE-$(echo "$PACKAGES" | sha256sum | cut -c1-8)
unfinished "$base" "$base"
if [[ ! -d "$CH_IMAGE_STORAGE/img/$base" ]]; then
    tarball=$CACHE/images/$base.tar
    if [[ ! -f "$tarball" ]]; then
        # a .tar name makes mmdebstrap write a tarball (another name is a folder); no device nodes in it
        mmdebstrap --variant=apt --skip=output/dev --include="$PACKAGES" "$SUITE" "${tarball%.tar}.part.tar" \
            >>"$log" 2>&1 || die "mmdebstrap could not make Debian $SUITE (log: $log)"
        mv "${tarball%.tar}.part.tar" "$tarball"
    fi
    "${CH_IMAGE[@]}" import "$tarball" "$base" >>"$log" 2>&1 || die "ch-image could not import $tarball (log: $log)"
    touch "$built/$base"
    rm -f "$tarball"  # the imported image is the cache
fi
# pip inside the build sees what pip sees here: the local wheel folders and the CA bundle (a proxy re-signing TLS)
binds=(-b "$(dirname "$wheel"):/mnt/horovod")
args=(--build-arg BASE="$base" --build-arg HVDBENCH_TF_SPEC=none --build-arg HVDBENCH_SYSTEM_SITE=0
      --build-arg HVDBENCH_HOROVOD_WHEEL="/mnt/horovod/${wheel##*/}")
links=
for dir in ${PIP_FIND_LINKS:-}; do
    if [[ -d "$dir" ]]; then binds+=(-b "$dir"); links="${links:+$links }$dir"; fi
done
[[ -n "$links" ]] && args+=(--build-arg PIP_FIND_LINKS="$links")
cache=${PIP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pip}  # the packages set-up just fetched, not fetched again
if mkdir -p "$cache" 2>/dev/null; then
    binds+=(-b "$cache:/mnt/pip-cache")
    args+=(--build-arg PIP_CACHE_DIR=/mnt/pip-cache)
fi
bundle=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
if [[ -f "$bundle" ]]; then
    binds+=(-b "$(dirname "$bundle"):/mnt/certs")
    args+=(--build-arg PIP_CERT="/mnt/certs/${bundle##*/}")
fi
(cd "$context" && "${CH_IMAGE[@]}" build --no-cache -t "hvdbench-cpu:$key" -f container/Containerfile \
    "${args[@]}" "${binds[@]}" .) >>"$log" 2>&1 \
    || die "the image did not build from container/Containerfile (log: $log)"
[[ -d "$folder" ]] || die "ch-image built hvdbench-cpu:$key but $folder is missing"
# the ranks' interpreter, with nothing of this machine's environment, imports what a rank does; the folder run as
# the tests and sweeps run it (ch-run refuses a folder in the storage it is told of: it would take a name there)
env -u CH_IMAGE_STORAGE ch-run "$folder" -- /usr/bin/env -i /opt/hvdbench/venv/bin/python -c 'import hvdbench.suite.mlp, horovod.torch' \
    >>"$log" 2>&1 || die "the image built, but its python cannot import hvdbench and horovod.torch (log: $log)"
touch "$built/$image"
# each image is GBs: this checkout's older ones go, never one another checkout uses, never one in use
bash "$ROOT/scripts/container-image-prune.sh" "$CH_IMAGE_STORAGE" "$owners" "$ROOT" "$image" "${CH_IMAGE[@]}" \
    >>"$log" 2>&1
echo "$folder"
