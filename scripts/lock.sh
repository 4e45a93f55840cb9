#!/usr/bin/env bash
# Refreshes constraints.txt, the lock (`make lock`): scripts/setup.sh in a scratch environment without a
# lock (HVDBENCH_LOCK=none: pip takes the newest versions that fit), then scripts/lock.py pins what it
# installed. The frameworks stay at the lock's versions unless named: HVDBENCH_TORCH_SPEC=torch==X,
# HVDBENCH_TF_SPEC=tensorflow-cpu==Y, HOROVOD_VERSION=Z make lock. Run it where CI runs (no GPU, Python
# 3.11): the lock pins what that machine resolves. Horovod's build is cached, so a refresh takes minutes.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
tf_pin=$(sed -n '/^# \[frameworks\]/,/^# \[/p' "$ROOT/constraints.txt" | grep -E '^tensorflow(-cpu)?==' | head -n 1)
HVDBENCH_LOCK=none HVDBENCH_VENV=$scratch/venv HVDBENCH_TF_SPEC=${HVDBENCH_TF_SPEC:-$tf_pin} \
    bash "$ROOT/scripts/setup.sh"
"$scratch/venv/bin/python" "$ROOT/scripts/lock.py" > "$scratch/constraints.txt"
mv "$scratch/constraints.txt" "$ROOT/constraints.txt"
printf 'lock: constraints.txt written (%s pins); git diff constraints.txt shows what moved\n' \
    "$(grep -c '==' "$ROOT/constraints.txt")"
