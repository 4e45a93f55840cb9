#!/usr/bin/env bash
# Fills a folder with what scripts/setup.sh fetches from the network, for a node without network:
#
#   scripts/bundle.sh DIR [--python 3.12] [--glibc 2.28] [--only "NAME ..."]
#   scripts/bundle.sh --list            # the requirements it would fetch, one per line
#
# Horovod's source release (HOROVOD_VERSION, default 0.28.1), what its build and wheel need
# (scripts/horovod-requirements.txt) and hvdbench's own requirements (setup.cfg, with the extras set-up
# installs), as x86-64 Linux wheels for that Python with everything they need. PyTorch and TensorFlow are
# not fetched: the node's own are used (HVDBENCH_SYSTEM_SITE=1), or name them in --only. --only NAMES
# fetches just those requirements (with what they need) beside Horovod's source, for a node that has
# the rest. On the node: HVDBENCH_WHEELS=DIR bash scripts/setup.sh (or make setup).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HOROVOD_VERSION=${HOROVOD_VERSION:-0.28.1}
die() { printf 'bundle: error: %s\n' "$*" >&2; exit 2; }

requirements() {
    python3 - "$ROOT/setup.cfg" "$ROOT/scripts/horovod-requirements.txt" <<'PYEOF'
import configparser, re, sys
cfg = configparser.ConfigParser()
cfg.read(sys.argv[1])
lines = cfg["options"]["install_requires"].splitlines()
for extra in ("mpi", "slurm", "gpu", "report", "test"):
    lines += cfg["options.extras_require"][extra].splitlines()
lines += open(sys.argv[2]).read().splitlines()
frameworks = {"torch", "tensorflow", "horovod"}
seen = set()
for line in lines:
    req = line.split("#")[0].strip()
    name = re.split(r"[<>=!~ \[;]", req)[0].lower()
    if req and name not in frameworks and name not in seen:
        seen.add(name)
        print(req)
PYEOF
}

[[ "${1:-}" == --list ]] && { requirements; exit 0; }
[[ $# -ge 1 && "$1" != -* ]] || die "usage: scripts/bundle.sh DIR [--python X.Y] [--glibc 2.N] [--only \"NAME ...\"] | --list"
dir=$1; shift
python=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
glibc=2.28
only=
while (($#)); do
    case "$1" in
        --python) python=${2:?--python needs a version such as 3.12}; shift 2 ;;
        --glibc) glibc=${2:?--glibc needs a version such as 2.28}; shift 2 ;;
        --only) only=${2:?--only needs names}; shift 2 ;;
        *) die "unknown argument $1 (valid: --python, --glibc, --only)" ;;
    esac
done
[[ "$python" =~ ^3\.[0-9]+$ ]] || die "--python $python: give major.minor, such as 3.12"
[[ "$glibc" =~ ^2\.([0-9]+)$ ]] || die "--glibc $glibc: give 2.N, such as 2.28"
max_minor=${BASH_REMATCH[1]}

if [[ -n "$only" ]]; then read -ra reqs <<<"$only"; else mapfile -t reqs < <(requirements); fi
platforms=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for ((m = 5; m <= max_minor; m++)); do platforms+=(--platform "manylinux_2_${m}_x86_64"); done
mkdir -p "$dir"
python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$dir"
python3 -m pip download -q --disable-pip-version-check --only-binary :all: --implementation cp \
    --python-version "$python" "${platforms[@]}" -d "$dir" "${reqs[@]}"
printf 'bundle: %s files (%s) in %s: Python %s, nodes with glibc %s or newer\n' "$(ls "$dir" | wc -l)" "$(du -sh "$dir" | cut -f1)" "$dir" "$python" "$glibc"
