#!/usr/bin/env bash
# Fills a folder with what scripts/setup.sh fetches from the network, for a node without network:
#
#   scripts/bundle.sh DIR [--python 3.12] [--glibc 2.28] [--only "NAME ..."]
#   scripts/bundle.sh --list            # the requirements it would fetch, one per line
#   scripts/bundle.sh DIR ... --dry-run # the arguments checked, what it would fetch printed; nothing fetched
#
# Horovod's source release (HOROVOD_VERSION, default: the lock's), what its build and wheel need
# (scripts/horovod-requirements.txt) and hvdbench's own requirements (setup.cfg, with the extras set-up
# installs), as x86-64 Linux wheels for that Python with everything they need, each at the version the
# lock (constraints.txt, or HVDBENCH_LOCK) pins, so that set-up finds them there. PyTorch and TensorFlow
# are not fetched: the node's own are used (HVDBENCH_SYSTEM_SITE=1), or name them in --only. --only NAMES
# fetches just those requirements (with what they need) beside Horovod's source, for a node that has
# the rest. On the node: HVDBENCH_WHEELS=DIR bash scripts/setup.sh (or make setup).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOCK=${HVDBENCH_LOCK:-$ROOT/constraints.txt}
die() { printf 'bundle: error: %s\n' "$*" >&2; exit 2; }
[[ "$LOCK" == none || -r "$LOCK" ]] || die "HVDBENCH_LOCK=$LOCK is not a readable file (or none)"
[[ "$LOCK" == none ]] && LOCK=/dev/null
pinned() { grep -E "^$1==" "$LOCK" "$ROOT/constraints.txt" | head -n 1 | sed 's/^[^:]*://; s/^[^=]*==//'; }
HOROVOD_VERSION=${HOROVOD_VERSION:-$(pinned horovod)}

requirements() {
    python3 - "$ROOT/setup.cfg" "$ROOT/scripts/horovod-requirements.txt" "$LOCK" <<'PYEOF'
import configparser, re, sys
cfg = configparser.ConfigParser()
cfg.read(sys.argv[1])
pins = {}  # the lock's pins by normalised name: each requirement is listed at its pinned version
for line in open(sys.argv[3]):
    if "==" in line and not line.startswith("#"):
        name, version = line.strip().split("==", 1)
        pins[re.sub(r"[-_.]+", "-", name).lower()] = version
lines = cfg["options"]["install_requires"].splitlines()
for extra in ("mpi", "slurm", "gpu", "report", "test", "lint"):
    lines += cfg["options.extras_require"][extra].splitlines()
lines += open(sys.argv[2]).read().splitlines()
frameworks = {"torch", "tensorflow", "horovod"}
seen = set()
for line in lines:
    req = line.split("#")[0].strip()
    name = re.split(r"[<>=!~ \[;]", req)[0].lower()
    if req and name not in frameworks and name not in seen:
        seen.add(name)
        key = re.sub(r"[-_.]+", "-", name)
        print(f"{name}=={pins[key]}" if key in pins else req)
PYEOF
}

[[ "${1:-}" == --list ]] && { requirements; exit 0; }
[[ $# -ge 1 && "$1" != -* ]] || die "usage: scripts/bundle.sh DIR [--python X.Y] [--glibc 2.N] [--only \"NAME ...\"] | --list"
dir=$1; shift
python=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
glibc=2.28
only=
dry=0
while (($#)); do
    case "$1" in
        --dry-run) dry=1; shift ;;
        --python) python=${2:?--python needs a version such as 3.12}; shift 2 ;;
        --glibc) glibc=${2:?--glibc needs a version such as 2.28}; shift 2 ;;
        --only) only=${2:?--only needs names}; shift 2 ;;
        *) die "unknown argument $1 (valid: --python, --glibc, --only, --dry-run)" ;;
    esac
done
[[ "$python" =~ ^3\.[0-9]+$ ]] || die "--python $python: give major.minor, such as 3.12"
[[ "$glibc" =~ ^2\.([0-9]+)$ ]] || die "--glibc $glibc: give 2.N, such as 2.28"
max_minor=${BASH_REMATCH[1]}

if [[ -n "$only" ]]; then read -ra reqs <<<"$only"; else mapfile -t reqs < <(requirements); fi
if ((dry)); then
    printf 'bundle: would fetch into %s, for Python %s and glibc %s: horovod==%s (source) %s\n' "$dir" "$python" \
        "$glibc" "$HOROVOD_VERSION" "${reqs[*]}"
    exit 0
fi
platforms=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for ((m = 5; m <= max_minor; m++)); do platforms+=(--platform "manylinux_2_${m}_x86_64"); done
mkdir -p "$dir"
# what the node pins: the lock less the frameworks' own dependencies (the node brings its own frameworks)
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
awk -v drop="torch=the node's own PyTorch;tensorflow=the node's own TensorFlow" -f "$ROOT/scripts/constraints.awk" \
    "$LOCK" > "$constraints"
python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$dir"
python3 -m pip download -q --disable-pip-version-check --only-binary :all: --implementation cp \
    --python-version "$python" "${platforms[@]}" -c "$constraints" -d "$dir" "${reqs[@]}"
printf 'bundle: %s files (%s) in %s: Python %s, nodes with glibc %s or newer\n' "$(ls "$dir" | wc -l)" "$(du -sh "$dir" | cut -f1)" "$dir" "$python" "$glibc"
