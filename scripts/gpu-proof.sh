#!/usr/bin/env bash
# The proof that hvdbench works on a GPU node without network, in five parts run back to back, each one command
# planned to end 90 s or more inside a 10-minute limit even on a machine that starts bare:
#
#   scripts/gpu-proof.sh PART OUTDIR [--return-to DIR] [--bundle DIR] [--horovod-script FILE]
#                        [--nccl-tests TARBALL] [--dry-run]
#
#   part 0: preflight, under 30 s and without set-up (scripts/gpu_preflight.py): the interpreter (venv, ensurepip,
#           pip), compilers, CMake, make or ninja, nvcc, the packages set-up needs against the node's and the
#           bundle's, PyTorch's CUDA and NCCL, nvidia-smi's facts: what will fail, before it does
#   part 1: set-up (Horovod built with NCCL for the node's GPUs, Gloo, no MPI, no TensorFlow), pytest -m gpu,
#           hvdbench topo, suite/p2p.py, NVML telemetry on a ~60 s ResNet-50 amp run, the node's facts
#   part 2: ResNet-50 batch 256 in fp32 (TF32), amp, amp + channels-last, amp + torch.compile; GPT-2 small amp
#           (launchers/sweeps/gpu-proof.yaml)
#   part 3: Horovod allreduce through NCCL on CUDA buffers, 1 KiB - 1 GiB; nccl-tests' all_reduce_perf on the same
#           GPU (--nccl-tests: its source release, built here and never kept); telemetry on vs off
#   part 4: the harness against Horovod's examples/pytorch/pytorch_synthetic_benchmark.py (--horovod-script; not
#           shipped), ResNet-50 batch 256, 5 alternated rounds
#
# Parts 1-4 start with set-up, planned as on a bare machine (the whole set-up, Horovod's build included: SETUP_S);
# where the machine still holds the last part's environment it takes seconds. Each part writes its log, summary
# (each step, its status and seconds), run folders and files into OUTDIR/part-N, and Horovod's wheel into
# OUTDIR/cache. OUTDIR inside the checkout must be ignored by git (proof/ is), or it would travel with the tree.
# --return-to DIR: for a machine whose results come back through one folder with limits, DIR receives
# part-N.tar.gz (OUTDIR/part-N packed: no wheels or caches, at most 16 MiB, the largest files left out and named
# where it would be more) and part-N-summary.md, checked against the limits: at most 8 files of at most 16 MiB, at
# most 2 folders down (scripts/proof_pack.py). The report of every part is made where the archives land:
# hvdbench report part-1/runs part-2/runs part-3/runs.
# --bundle DIR is what scripts/bundle.sh made on a machine with network for this node: Horovod's source release and
# the wheels the node lacks (part 0 names them). The node's own PyTorch and packages are used
# (HVDBENCH_SYSTEM_SITE=1: the lock pins only what set-up installs itself).
# --dry-run prints every step with its planned seconds, checks the bundle and the plan against the limit, and with
# --return-to packs what OUTDIR/part-N already holds (a rehearsal: nothing runs).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LIMIT_S=510      # a command may run 600 s: every part is planned to end 90 s inside it
PREFLIGHT_S=30   # part 0
# Set-up on a bare machine: a virtual environment, the bundle's wheels, Horovod 0.28.1 built with NCCL and CUDA
# kernels for sm_90 (229 s in all on the 2-core build machine, Horovod's compile 202 s; a 16-core node only
# faster, not yet measured there).
SETUP_S=240
BUNDLE_LIMIT_MB=20
die() { printf 'gpu-proof: error: %s\n' "$*" >&2; exit 2; }

part=${1:-}
out=${2:-}
[[ "$part" =~ ^[0-4]$ && -n "$out" && "$out" != -* ]] \
    || die "usage: scripts/gpu-proof.sh 0|1|2|3|4 OUTDIR [--return-to DIR] [--bundle DIR] [--horovod-script FILE] [--nccl-tests TARBALL] [--dry-run]"
shift 2
bundle= horovod_script= nccl_tests= return_to= dry=0
while (($#)); do
    case "$1" in
        --bundle) bundle=${2:?--bundle needs a folder}; shift 2 ;;
        --return-to) return_to=${2:?--return-to needs a folder}; shift 2 ;;
        --horovod-script) horovod_script=${2:?--horovod-script needs a file}; shift 2 ;;
        --nccl-tests) nccl_tests=${2:?--nccl-tests needs nccl-tests source release (.tar.gz)}; shift 2 ;;
        --dry-run) dry=1; shift ;;
        *) die "unknown argument $1 (valid: --return-to, --bundle, --horovod-script, --nccl-tests, --dry-run)" ;;
    esac
done
absolute() { [[ "$1" == /* ]] && echo "$1" || echo "$PWD/$1"; }
out_abs=$(absolute "$out")
case "$out_abs/" in
    "$ROOT"/*)
        if command -v git >/dev/null 2>&1 && git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
            git -C "$ROOT" check-ignore -q "$out_abs/part-$part" \
                || die "OUTDIR $out is inside the checkout and not ignored by git: use proof/ (ignored) or a folder outside"
        fi ;;
esac
if [[ -n "$bundle" ]]; then
    [[ -d "$bundle" ]] || die "--bundle $bundle is not a folder (scripts/bundle.sh makes one)"
    bundle=$(cd "$bundle" && pwd)
fi
if [[ "$part" == 4 ]]; then
    [[ -n "$horovod_script" ]] || die "part 4 needs --horovod-script: Horovod's examples/pytorch/pytorch_synthetic_benchmark.py"
    [[ -f "$horovod_script" ]] || die "--horovod-script $horovod_script is not a file"
    horovod_script=$(absolute "$horovod_script")
fi
if [[ -n "$nccl_tests" ]]; then
    [[ -f "$nccl_tests" && "$nccl_tests" == *.tar.gz ]] || die "--nccl-tests $nccl_tests is not a .tar.gz file (nccl-tests' source release)"
    nccl_tests=$(absolute "$nccl_tests")
fi

VENV=${HVDBENCH_VENV:-$ROOT/.venv}
BIN=$VENV/bin
HERE=$out_abs/part-$part
RUNS=$HERE/runs
export HVDBENCH_VENV=$VENV HVDBENCH_CACHE=$out_abs/cache HVDBENCH_SYSTEM_SITE=1 HVDBENCH_MPI=none HVDBENCH_TF_SPEC=none
export HVDBENCH_PYTHON=${HVDBENCH_PYTHON:-$(command -v python3 || echo python3)} PYTHONUNBUFFERED=1
[[ -n "$bundle" ]] && export HVDBENCH_WHEELS=$bundle
# --- The steps of each part: planning figure (seconds on one H100 SXM, 16 cores), what, command. The figures
# are estimates from public H100 training rates and this project's CPU rehearsal, not measurements; each part's
# summary records what every step really took.
declare -a EST WHAT CMD
add() { EST+=("$1"); WHAT+=("$2"); CMD+=("$3"); }
setup_step() { add "$SETUP_S" "set-up: Horovod with NCCL for this node's GPUs (cached in $out_abs/cache; seconds where the environment is current)" "bash $ROOT/scripts/setup.sh"; }
case "$part" in
    0)
        add "$PREFLIGHT_S" "preflight: interpreter, toolchain, packages, PyTorch, GPUs (no set-up)" \
            "$HVDBENCH_PYTHON $ROOT/scripts/gpu_preflight.py ${bundle:+--bundle $bundle} --facts $HERE/node | tee $HERE/preflight.md"
        ;;
    1)
        setup_step
        add 90 "the gpu-marked tests" "$BIN/python -m pytest -q -m gpu $ROOT/tests 2>&1 | tee $HERE/pytest-gpu.txt"
        add 15 "hvdbench topo" "$BIN/hvdbench topo | tee $HERE/topo.txt && $BIN/hvdbench topo --json > $HERE/topo.json"
        add 30 "peer-to-peer and host copies" "$BIN/python $ROOT/suite/p2p.py --log-dir $RUNS/p2p"
        add 90 "NVML telemetry on a ~60 s ResNet-50 amp run (every 0.5 s)" \
            "$BIN/hvdbench run imagenet --np 1 -o $RUNS --no-report -- --model resnet50 --batch-size 256 --precision amp --steps 450 --warmup-steps 20 --telemetry-interval 0.5"
        add 10 "the node's facts" "bash $ROOT/scripts/node-facts.sh $HERE/node"
        ;;
    2)
        setup_step
        add 250 "ResNet-50 batch 256: fp32 (TF32), amp, amp + channels-last, amp + torch.compile; GPT-2 small amp" \
            "$BIN/hvdbench sweep $ROOT/launchers/sweeps/gpu-proof.yaml --output $RUNS --no-report"
        ;;
    3)
        setup_step
        add 45 "Horovod allreduce through NCCL on CUDA buffers, 1 KiB - 1 GiB" \
            "$BIN/hvdbench run collectives --np 1 -o $RUNS --no-report -- --backends horovod --ops allreduce --device cuda --min-bytes 1K --max-bytes 1G"
        if [[ -n "$nccl_tests" ]]; then
            add 100 "nccl-tests' all_reduce_perf, 1 KiB - 1 GiB on the same GPU (built here, not kept)" \
                "bash $ROOT/scripts/nccl-tests.sh $nccl_tests | tee $HERE/nccl-tests-all-reduce.txt"
        fi
        add 90 "telemetry on vs off, ResNet-50 amp batch 256, 6 alternated rounds" \
            "$BIN/python $ROOT/benchmarks/overhead.py --compare telemetry --benchmark imagenet --model resnet50 --batch-size 256 --precision amp --rounds 6 --steps 30 | tee $HERE/telemetry-cost.md"
        ;;
    4)
        setup_step
        add 230 "the harness against Horovod's script, ResNet-50 batch 256, 5 alternated rounds" \
            "$BIN/python $ROOT/benchmarks/vs_horovod.py --horovod-script $horovod_script --model resnet50 --batch-size 256 --rounds 5 --iters 5 | tee $HERE/vs-horovod-256.md"
        ;;
esac

total=0
for est in "${EST[@]}"; do total=$((total + est)); done
limit=$LIMIT_S
((part == 0)) && limit=$PREFLIGHT_S
plan() {
    printf 'gpu-proof part %s: %d steps, about %d min %02d s by the planning figures (limit %d s)%s\n' \
        "$part" "${#EST[@]}" $((total / 60)) $((total % 60)) "$limit" "$( ((part > 0)) && echo ', set-up on a bare machine included')"
    for i in "${!EST[@]}"; do printf '  [~%3d s] %s\n      %s\n' "${EST[$i]}" "${WHAT[$i]}" "${CMD[$i]}"; done
}
pack() {
    [[ -n "$return_to" ]] || return 0
    python3 "$ROOT/scripts/proof_pack.py" "$HERE" "$return_to"
}
if ((dry)); then
    plan
    if [[ -n "$bundle" ]]; then
        size_kb=$(du -sk "$bundle" | cut -f1)
        printf 'bundle %s: %d files, %.1f MB\n' "$bundle" "$(find "$bundle" -type f | wc -l)" "$(awk -v k="$size_kb" 'BEGIN { print k / 1024 }')"
        ((size_kb <= BUNDLE_LIMIT_MB * 1024)) || die "the bundle is $((size_kb / 1024)) MB, over $BUNDLE_LIMIT_MB MB: --only what the node lacks"
        compgen -G "$bundle/horovod-*.tar.gz" >/dev/null || die "the bundle lacks Horovod's source release (scripts/bundle.sh fetches it)"
    elif ((part == 1)); then
        printf 'no --bundle: set-up takes what it lacks from the network\n'
    fi
    ((total <= limit)) || die "part $part's planning figures add up to $total s, over $limit s"
    if [[ -n "$return_to" ]]; then  # the rehearsal: the plan as the summary, and whatever the part folder holds
        mkdir -p "$HERE"
        { printf '# gpu-proof part %s: dry run, nothing ran\n\n```\n' "$part"; plan; printf '```\n'; } > "$HERE/part-$part-summary.md"
        pack
    fi
    exit 0
fi

# --- Run: each step logged with its status and seconds; a failed step does not stop the others.
mkdir -p "$RUNS"
log=$HERE/part-$part.log
summary=$HERE/part-$part-summary.md
printf '# gpu-proof part %s, %s, %s\n\n| step | status | seconds | planned |\n|---|---|---:|---:|\n' \
    "$part" "$(hostname)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$summary"
failed=0
for i in "${!EST[@]}"; do
    printf '\n=== [%s] %s\n$ %s\n' "$(date +%H:%M:%S)" "${WHAT[$i]}" "${CMD[$i]}" | tee -a "$log"
    started=$(date +%s)
    status=ok
    (cd "$ROOT" && bash -o pipefail -c "${CMD[$i]}") >> "$log" 2>&1 || { status="failed ($?)"; failed=$((failed + 1)); }
    took=$(( $(date +%s) - started ))
    printf '| %s | %s | %d | %d |\n' "${WHAT[$i]}" "$status" "$took" "${EST[$i]}" >> "$summary"
    printf '    %s in %d s\n' "$status" "$took" | tee -a "$log"
done
[[ -f "$HERE/preflight.md" ]] && { printf '\n## Preflight\n\n'; cat "$HERE/preflight.md"; } >> "$summary"
printf 'gpu-proof part %s: %d of %d steps failed (summary %s)\n' "$part" "$failed" "${#EST[@]}" "$summary"
pack
((failed == 0))
