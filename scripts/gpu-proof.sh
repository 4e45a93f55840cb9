#!/usr/bin/env bash
# The proof that hvdbench works on a GPU node, in parts of at most 9 minutes each (8 planned), without network:
#
#   scripts/gpu-proof.sh PART OUTDIR [--bundle DIR] [--cache DIR] [--horovod-script FILE] [--dry-run]
#
#   part 1: set-up (Horovod built with NCCL for the node's GPUs, Gloo, no MPI, no TensorFlow, offline from
#           --bundle), pytest -m gpu, hvdbench topo, suite/p2p.py, NVML telemetry on a 60 s ResNet-50 run,
#           the node's facts (driver, CUDA, NCCL, cuDNN, clocks, topology)
#   part 2: ResNet-50 batch 256 in fp32 (TF32), amp, amp + channels-last, amp + torch.compile and GPT-2
#           small in amp (launchers/sweeps/gpu-proof.yaml); Horovod allreduce through NCCL on CUDA buffers,
#           1 KiB to 1 GiB; telemetry on vs off on ResNet-50 amp
#   part 3: the harness against Horovod's examples/pytorch/pytorch_synthetic_benchmark.py (--horovod-script;
#           not shipped) at batch 64 and 256, alternated rounds; the report of every part's runs
#
# Three parts, not two: on one H100 the comparison with Horovod's script alone needs ~20 processes of
# ResNet-50 (two variants, two batches, five rounds), which with the training runs would not fit 9 minutes.
# Every part sets up first: part 1 builds Horovod into the cache (--cache, default OUTDIR/cache), later
# parts install that wheel in seconds, on the same node or on a fresh one given the same cache folder.
# Each part writes OUTDIR/part-N.log, its run directories under OUTDIR/runs, a summary table
# OUTDIR/part-N-summary.md (each step, its status and seconds), and packs them into OUTDIR/part-N.tar.gz.
#
# --bundle DIR is what scripts/bundle.sh made on a machine with network for this node: Horovod's source
# release and the wheels the node lacks (e.g. scripts/bundle.sh DIR --python 3.12 --only "msgspec submitit
# pytest-timeout cffi"), under 20 MB. The node's own PyTorch and packages are used (HVDBENCH_SYSTEM_SITE=1:
# the lock pins only what set-up installs itself).
# --dry-run prints every command, checks the bundle (its size and Horovod's source) and estimates each
# part's minutes from the planning figures below; it runs nothing.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LIMIT_S=480  # planned at most 8 minutes, so a part fits a 9-minute command with room for misplanning
BUNDLE_LIMIT_MB=20
die() { printf 'gpu-proof: error: %s\n' "$*" >&2; exit 2; }

part=${1:-}
out=${2:-}
[[ "$part" =~ ^[123]$ && -n "$out" && "$out" != -* ]] \
    || die "usage: scripts/gpu-proof.sh 1|2|3 OUTDIR [--bundle DIR] [--cache DIR] [--horovod-script FILE] [--dry-run]"
shift 2
bundle= cache= horovod_script= dry=0
while (($#)); do
    case "$1" in
        --bundle) bundle=${2:?--bundle needs a folder}; shift 2 ;;
        --cache) cache=${2:?--cache needs a folder}; shift 2 ;;
        --horovod-script) horovod_script=${2:?--horovod-script needs a file}; shift 2 ;;
        --dry-run) dry=1; shift ;;
        *) die "unknown argument $1 (valid: --bundle, --cache, --horovod-script, --dry-run)" ;;
    esac
done
mkdir_abs() { mkdir -p "$1" && (cd "$1" && pwd); }
if ((dry)); then out_abs=$out; else out_abs=$(mkdir_abs "$out"); fi
cache=${cache:-$out_abs/cache}
if [[ -n "$bundle" ]]; then
    [[ -d "$bundle" ]] || die "--bundle $bundle is not a folder (scripts/bundle.sh makes one)"
    bundle=$(cd "$bundle" && pwd)
fi
if [[ "$part" == 3 ]]; then
    [[ -n "$horovod_script" ]] || die "part 3 needs --horovod-script: Horovod's examples/pytorch/pytorch_synthetic_benchmark.py"
    [[ -f "$horovod_script" ]] || die "--horovod-script $horovod_script is not a file"
    horovod_script=$(cd "$(dirname "$horovod_script")" && pwd)/$(basename "$horovod_script")
fi

VENV=${HVDBENCH_VENV:-$ROOT/.venv}
BIN=$VENV/bin
RUNS=$out_abs/runs
export HVDBENCH_VENV=$VENV HVDBENCH_CACHE=$cache HVDBENCH_SYSTEM_SITE=1 HVDBENCH_MPI=none HVDBENCH_TF_SPEC=none
export HVDBENCH_PYTHON=${HVDBENCH_PYTHON:-$(command -v python3 || echo python3)}
[[ -n "$bundle" ]] && export HVDBENCH_WHEELS=$bundle
# Horovod's script builds its model with torchvision: the node's, else a torchvision wheel in the bundle
# (installed without its dependencies, so the node's torch stays), else benchmarks/vs_horovod.py's stand-in
# (the suite's own models of the same architectures), which it says it used.
TORCHVISION="$BIN/python -c 'import torchvision' 2>/dev/null || $BIN/python -m pip install -q --no-deps --no-index --find-links ${bundle:-/nonexistent} torchvision || echo 'no torchvision: vs_horovod.py uses its stand-in'"

# --- The steps of each part: planning figure (seconds on one H100 SXM, 16 cores), what, command.
# The figures are estimates from public H100 training rates and this project's CPU rehearsal, not
# measurements; each part's summary records what every step really took.
declare -a EST WHAT CMD
add() { EST+=("$1"); WHAT+=("$2"); CMD+=("$3"); }
setup_step() {
    add "$1" "set-up: $2" "bash $ROOT/scripts/setup.sh"
}
case "$part" in
    1)
        setup_step 240 "Horovod 0.28.1 built with NCCL for this node's GPUs (cached in $cache)"
        add 90 "the gpu-marked tests" "$BIN/python -m pytest -q -m gpu $ROOT/tests"
        add 15 "hvdbench topo" "$BIN/hvdbench topo | tee $out_abs/topo.txt && $BIN/hvdbench topo --json > $out_abs/topo.json"
        add 30 "peer-to-peer and host copies" "$BIN/python $ROOT/suite/p2p.py --log-dir $RUNS/p2p"
        add 90 "NVML telemetry on a ~60 s ResNet-50 amp run (every 0.5 s)" \
            "$BIN/hvdbench run imagenet --np 1 -o $RUNS --no-report -- --model resnet50 --batch-size 256 --precision amp --steps 450 --warmup-steps 20 --telemetry-interval 0.5"
        add 10 "the node's facts" "bash $ROOT/scripts/node-facts.sh $out_abs/node"
        ;;
    2)
        setup_step 60 "the cached Horovod wheel"
        add 250 "ResNet-50 batch 256: fp32 (TF32), amp, amp + channels-last, amp + torch.compile; GPT-2 small amp" \
            "$BIN/hvdbench sweep $ROOT/launchers/sweeps/gpu-proof.yaml --output $RUNS --no-report"
        add 60 "Horovod allreduce through NCCL on CUDA buffers, 1 KiB - 1 GiB" \
            "$BIN/hvdbench run collectives --np 1 -o $RUNS --no-report -- --backends horovod --ops allreduce --device cuda --min-bytes 1K --max-bytes 1G"
        add 90 "telemetry on vs off, ResNet-50 amp batch 256" \
            "$BIN/python $ROOT/benchmarks/overhead.py --compare telemetry --benchmark imagenet --model resnet50 --batch-size 256 --precision amp --rounds 6 --steps 30 | tee $out_abs/telemetry-cost.md"
        ;;
    3)
        setup_step 60 "the cached Horovod wheel"
        add 10 "torchvision for Horovod's script" "$TORCHVISION"
        add 160 "harness vs Horovod's script, ResNet-50 batch 64, 5 alternated rounds" \
            "$BIN/python $ROOT/benchmarks/vs_horovod.py --horovod-script $horovod_script --model resnet50 --batch-size 64 --rounds 5 --iters 5 | tee $out_abs/vs-horovod-64.md"
        add 230 "harness vs Horovod's script, ResNet-50 batch 256, 5 alternated rounds" \
            "$BIN/python $ROOT/benchmarks/vs_horovod.py --horovod-script $horovod_script --model resnet50 --batch-size 256 --rounds 5 --iters 5 | tee $out_abs/vs-horovod-256.md"
        add 20 "the report of every part's runs" "$BIN/hvdbench report $RUNS -o $out_abs/report"
        ;;
esac

total=0
for est in "${EST[@]}"; do total=$((total + est)); done
if ((dry)); then
    printf 'gpu-proof part %s: %d steps, about %d min %02d s by the planning figures (limit %d s)\n' \
        "$part" "${#EST[@]}" $((total / 60)) $((total % 60)) "$LIMIT_S"
    for i in "${!EST[@]}"; do printf '  [~%3d s] %s\n      %s\n' "${EST[$i]}" "${WHAT[$i]}" "${CMD[$i]}"; done
    if [[ -n "$bundle" ]]; then
        size_kb=$(du -sk "$bundle" | cut -f1)
        printf 'bundle %s: %d files, %.1f MB\n' "$bundle" "$(find "$bundle" -type f | wc -l)" "$(awk -v k="$size_kb" 'BEGIN { print k / 1024 }')"
        ((size_kb <= BUNDLE_LIMIT_MB * 1024)) || die "the bundle is $((size_kb / 1024)) MB, over $BUNDLE_LIMIT_MB MB: --only what the node lacks"
        compgen -G "$bundle/horovod-*.tar.gz" >/dev/null || die "the bundle lacks Horovod's source release (scripts/bundle.sh fetches it)"
    elif [[ "$part" == 1 ]]; then
        printf 'no --bundle: set-up takes what it lacks from the network\n'
    fi
    ((total <= LIMIT_S)) || die "part $part's planning figures add up to $total s, over $LIMIT_S s"
    exit 0
fi

# --- Run: each step logged with its status and seconds; a failed step does not stop the others.
log=$out_abs/part-$part.log
summary=$out_abs/part-$part-summary.md
mkdir -p "$RUNS"
printf '# gpu-proof part %s, %s\n\n| step | status | seconds | planned |\n|---|---|---:|---:|\n' \
    "$part" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$summary"
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
(cd "$out_abs" && tar -czf "part-$part.tar.gz" --exclude=./cache --exclude="./part-*.tar.gz" .)
printf 'gpu-proof part %s: %d of %d steps failed; %s (summary %s)\n' "$part" "$failed" "${#EST[@]}" \
    "$out_abs/part-$part.tar.gz" "$summary"
((failed == 0))
