#!/usr/bin/env bash
# make test: the system tools the tests use (scripts/test-tools.sh), then every test, while what only a few tests
# need is built beside them at the lowest CPU priority, taking the cores while tests wait on processes:
#   mpich, impi   the MPICH and Intel MPI environments (scripts/mpi-env.sh; cold, two Horovod builds without Gloo,
#                 HOROVOD_WITHOUT_GLOO=1, 10-20 min): their tests (marker other_mpi) run last
#   image         the CPU image from the recipe (scripts/container-image.sh; cold, Debian and pip downloads)
# Each test that needs one waits for it (tests/builds.py), raising what is still being built to the tests' own
# priority meanwhile (beside a busy neighbour a niced build would get no CPU): HVDBENCH_TEST_BUILDS names the folder
# where each build's output, log, process id and exit status land; a build that failed skips its tests with the
# build's own last line.
#
# The tests run two at a time (pytest-xdist): most wait on the processes they start (ranks, SLURM's daemons), so one
# alone left the cores idle (15-18% of the CPU time over a cold run; two at a time, 1%); the tests that start this
# machine's shared services (munged, SLURM, sshd, network namespaces) all run in one worker, each file's others
# together in one (tests/conftest.py: groups; tests/worker_groups.py: the scheduler), in the order collected.
#
#   scripts/test.sh [PYTEST ARGS]       (make test PYTEST_ARGS=...)
#   HVDBENCH_TEST_BUILDS=none           build nothing beside: each test builds (or finds) what it needs itself
#   HVDBENCH_TEST_WORKERS=N             N tests at a time (default 2); 1: one at a time, in pytest's own process
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${HVDBENCH_VENV:-$ROOT/.venv}
NAMES=(mpich impi image)
WORKERS=${HVDBENCH_TEST_WORKERS:-2}
[[ "$WORKERS" =~ ^[1-9][0-9]*$ ]] \
    || { echo "test: error: HVDBENCH_TEST_WORKERS must be a whole number of workers, 1 or more (got '$WORKERS')" >&2
         exit 2; }
workers=()
((WORKERS > 1)) && workers=(-n "$WORKERS")  # how they are shared out: setup.cfg's addopts
bash "$ROOT/scripts/test-tools.sh"

# NAME COMMAND...: run COMMAND at the lowest priority, its stdout to NAME.out, stderr to NAME.log, its process id to
# NAME.pid (a test waiting for it raises it to the tests' priority: tests/builds.py), status to NAME.rc
beside() {
    local name=$1; shift
    # -j2: a build that waits its turn holds little memory; the tests keep the cores when they need them
    MAKEFLAGS=-j2 nice -n 19 "$@" > "$pending/$name.out" 2> "$pending/$name.log" &
    echo $! > "$pending/$name.pid"
    wait $!
    echo $? > "$pending/$name.rc"
}
builders=()
if [[ "${HVDBENCH_TEST_BUILDS:-}" != none ]]; then
    pending=$(mktemp -d "${TMPDIR:-/tmp}/hvdbench-test-builds.XXXXXX")
    # their Horovod without Gloo (their tests start ranks with MPI alone): a third less to build beside the tests
    { beside mpich env HOROVOD_WITHOUT_GLOO=1 bash "$ROOT/scripts/mpi-env.sh" mpich
      beside impi env HOROVOD_WITHOUT_GLOO=1 bash "$ROOT/scripts/mpi-env.sh" impi; } &
    builders+=($!)
    beside image bash "$ROOT/scripts/container-image.sh" &
    builders+=($!)
    trap 'for b in "${builders[@]}"; do pkill -P "$b" 2>/dev/null; kill "$b" 2>/dev/null; done' EXIT
    export HVDBENCH_TEST_BUILDS=$pending
fi
# the machine's CPU time so far in jiffies (/proc/stat's cpu line): at nice 0 or below, niced (what is built beside
# at nice 19), idle, and stolen (a virtual machine's host running others); "0 0 0 0" where there is no /proc/stat
cpu_ticks() {
    local _cpu user nice system idle iowait irq softirq steal _rest
    read -r _cpu user nice system idle iowait irq softirq steal _rest < /proc/stat 2>/dev/null \
        || { echo "0 0 0 0"; return; }
    echo "$((user + system + irq + softirq)) $nice $((idle + iowait)) ${steal:-0}"
}
read -r busy0 niced0 idle0 stolen0 <<<"$(cpu_ticks)"
"$VENV/bin/python" -m pytest -ra --durations=60 "${workers[@]}" "$@"  # the slowest tests listed: where time goes
status=$?
# how much of the machine the tests (and what was built beside them) kept busy: the room there is for running
# tests that mostly wait side by side
read -r busy1 niced1 idle1 stolen1 <<<"$(cpu_ticks)"
all=$(( busy1 - busy0 + niced1 - niced0 + idle1 - idle0 + stolen1 - stolen0 ))
if (( all > 0 )); then
    awk -v b=$((busy1 - busy0)) -v n=$((niced1 - niced0)) -v i=$((idle1 - idle0)) -v s=$((stolen1 - stolen0)) \
        -v a=$all -v c="$(grep -c '^cpu[0-9]' /proc/stat)" 'BEGIN { printf "=== test: CPU time over the tests " \
        "(%d CPUs): tests %.0f%%, built beside %.0f%%, idle %.0f%%, stolen by the host %.0f%%\n",
        c, 100 * b / a, 100 * n / a, 100 * i / a, 100 * s / a }'
fi
if ((${#builders[@]})); then
    wait "${builders[@]}" 2>/dev/null
    builders=()
    for name in "${NAMES[@]}"; do
        printf '=== test: built beside the tests: %s, exit %s\n' "$name" "$(cat "$pending/$name.rc" 2>/dev/null || echo none)"
        cat "$pending/$name.out" "$pending/$name.log" 2>/dev/null | tail -n 30
    done
    rm -rf "$pending"
fi
exit "$status"
