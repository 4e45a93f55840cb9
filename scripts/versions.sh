#!/usr/bin/env bash
# What an environment holds, one fact a line, so that every CI log (or a bug report) can be compared:
#   scripts/versions.sh [VENV]      (default: $HVDBENCH_VENV or <repo>/.venv)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${1:-${HVDBENCH_VENV:-$ROOT/.venv}}
[[ -x "$VENV/bin/python" ]] || { printf 'versions: error: %s has no python (run make setup)\n' "$VENV" >&2; exit 2; }
"$VENV/bin/python" - <<'PYEOF' 2>/dev/null
import importlib.metadata as md, os, platform, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
print(f"python: {platform.python_version()} ({sys.executable})")
print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}")
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"
try:
    import torch
    print(f"torch: {torch.__version__} (CUDA: {torch.version.cuda or 'none'}, GPUs: {torch.cuda.device_count()})")
except ImportError as exc:
    print(f"torch: does not import ({exc})")
tf = next((n for n in ("tensorflow-cpu", "tensorflow") if version(n) != "not installed"), "tensorflow")
print(f"{tf}: {version(tf)}")
for name in ("horovod", "mpi4py", "numpy", "pandas", "pyarrow", "msgspec", "matplotlib", "pytest"):
    print(f"{name}: {version(name)}")
PYEOF
printf 'mpi: %s\n' "$(mpirun --version 2>/dev/null | head -n 1 || echo none)"
printf 'lock: %s\n' "$(sha256sum "$ROOT/constraints.txt" 2>/dev/null | cut -c1-12) ($(grep -c '==' "$ROOT/constraints.txt") pins)"
printf 'horovodrun --check-build:\n'
"$VENV/bin/python" "$ROOT/scripts/check_build.py" 2>/dev/null | sed -n '/Available/,$p' | grep -v '^$' | sed 's/^/  /'
exit 0
