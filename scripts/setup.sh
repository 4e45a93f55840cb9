#!/usr/bin/env bash
# hvdbench set-up: MPI, a virtual environment, PyTorch, TensorFlow, Horovod built from its source
# release, mpi4py, and hvdbench itself, every package at the version constraints.txt (the lock) pins.
# Idempotent: a second run finds everything in place and takes seconds.
#
#   scripts/setup.sh            set up, or find the environment current
#   scripts/setup.sh --stamp    print the settings that enter the build and their stamp; change nothing
#   scripts/setup.sh --venv-only   make (or find) the virtual environment and say how pip reaches it; no installs
#
# Settings (environment variables), all optional. Each enters the build (changing it makes the next run
# redo the installs, and Horovod's build where it enters that) unless marked "not in the build":
#   HVDBENCH_VENV        virtual environment to create or reuse           (default: <repo>/.venv;
#                        not in the build: each environment keeps its own stamp)
#   HVDBENCH_CACHE       cache for built Horovod (and mpi4py) wheels and set-up's logs, outside the repo
#                        (default: ~/.cache/hvdbench; not in the build)
#   HVDBENCH_PYTHON      interpreter the environment is made from         (default: python3)
#   HVDBENCH_LOCK        pip constraints for everything set-up installs   (default: <repo>/constraints.txt;
#                        FILE: your own, e.g. an edited copy; none: whatever is newest)
#   HVDBENCH_TORCH_SPEC  pip requirement for PyTorch                      (default: the lock's torch line)
#   HVDBENCH_TF_SPEC     pip requirement for TensorFlow; "none" skips TF  (default: the lock's TensorFlow
#                        line without a GPU, none with one: see below)
#   HVDBENCH_SYSTEM_SITE=1  let the environment see the interpreter's packages (a cluster's torch module,
#                        or an existing virtual environment's python given as HVDBENCH_PYTHON)
#   HVDBENCH_MPI=none    no MPI on this node: Horovod with Gloo alone, no mpi4py (horovodrun's Gloo path)
#   HVDBENCH_WHEELS=DIR  a node without network: pip takes everything from DIR (scripts/bundle.sh fills it;
#                        not in the build)
#   HVDBENCH_MPI4PY_SOURCE=1  build mpi4py against the MPI on PATH instead of its binary wheel
#   HOROVOD_VERSION      Horovod source release to build                  (default: the lock's horovod line)
#   HVDBENCH_HOROVOD_WHEEL=FILE  install this Horovod wheel instead of building one (set-up's own, for an image
#                        whose Python and libraries match the machine that built it)
#   HVDBENCH_REBUILD_HOROVOD=1  build Horovod (and install mpi4py) even where the environment already has one
#                        whose --check-build shows what the node needs (an image's; default: use that one)
#   HOROVOD_GPU_OPERATIONS, HOROVOD_NCCL_HOME, HOROVOD_CUDA_HOME  passed to Horovod's build; with CUDA
#                        and NCCL present, NCCL is chosen for GPU operations unless set otherwise.
#   HOROVOD_DEBUG=1      Horovod's own debug build (its release build is made here without debug info)
#   HOROVOD_WITHOUT_GLOO=1  Horovod without its Gloo controller, MPI alone (horovodrun --gloo cannot run on it): a
#                        third less to build (PyTorch only, 2 cores: 101 s, with Gloo 156 s); what make test's
#                        MPICH and Intel MPI environments take
#   HOROVOD_BUILD_CUDA_CC_LIST  GPU architectures for Horovod's CUDA kernels, e.g. 80,90 (default: the
#                        node's GPUs as nvidia-smi reports them; without one, every one nvcc knows)
# The MPI on PATH (its version line) enters the build too. Every failure is one line naming what failed
# and where its log is.
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${HVDBENCH_VENV:-$ROOT/.venv}
CACHE=${HVDBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvdbench}
PYTHON=${HVDBENCH_PYTHON:-python3}
REPO_LOCK=$ROOT/constraints.txt
LOG=  # set-up's log, from the moment the environment exists

log() { printf '[setup %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
# (inside a command substitution the message is said there, and 97 tells the caller it was)
die() { printf 'setup: error: %s\n' "$*" >&2; ((BASH_SUBSHELL)) && exit 97; exit 1; }
# ENTRY COMMAND...: COMMAND run with a fresh folder beside ENTRY as its last argument, which then becomes ENTRY in
# one rename: a copy or build killed half way leaves no half an entry in the cache that a later set-up would take.
# Such a killed one's folder is swept once it is PART_STALE_MIN minutes untouched (a build takes minutes; one that
# is running now is kept)
PART_STALE_MIN=1440
cache_entry() {
    local entry=$1 part; shift
    mkdir -p "${entry%/*}" || return 1
    find "${entry%/*}" -maxdepth 1 -type d -name "${entry##*/}.part-*" -mmin +"$PART_STALE_MIN" \
        -exec rm -rf {} + 2>/dev/null || true
    part=$(mktemp -d "$entry.part-XXXXXX") || return 1
    "$@" "$part" || { rm -rf "$part"; return 1; }
    if [[ -d "$entry" ]]; then rmdir "$entry" 2>/dev/null || true; fi  # an empty one a set-up before this one left
    mv -T "$part" "$entry" 2>/dev/null && return 0
    rm -rf "$part"
    [[ -n "$(ls -A "$entry" 2>/dev/null)" ]]  # another set-up made the same entry meanwhile: it is taken
}
# Anything that fails without its own message: one line naming the command, its line and the log.
on_error() {
    ((BASH_SUBSHELL)) && exit "$1"
    [[ "$1" == 97 ]] && exit 1
    die "'$3' failed (exit $1, scripts/setup.sh line $2)${LOG:+; log: $LOG}"
}
trap 'on_error $? $LINENO "$BASH_COMMAND"' ERR
started=$(date +%s)
mode=${1:-}
case "$mode" in ""|--stamp|--venv-only) ;; *) die "unknown argument $mode (valid: --stamp, --venv-only)" ;; esac

# --- The lock: constraints.txt, or HVDBENCH_LOCK. Its [frameworks] lines are the frameworks' defaults.
LOCK=${HVDBENCH_LOCK:-$REPO_LOCK}
if [[ "$LOCK" != none ]]; then
    [[ -f "$LOCK" && -r "$LOCK" ]] || die "HVDBENCH_LOCK=$LOCK is not a readable file (or none for no lock)"
    LOCK=$(cd "$(dirname "$LOCK")" && pwd)/$(basename "$LOCK")
fi
"$PYTHON" -c 'import venv' >/dev/null 2>&1 || die "HVDBENCH_PYTHON=$PYTHON does not run (or has no venv module)"
# the [frameworks] line of $1 (a name or a pattern) in the lock in use, else in the repository's
framework_pin() {
    local file line
    for file in "$LOCK" "$REPO_LOCK"; do
        [[ -f "$file" ]] || continue
        line=$(sed -n '/^# \[frameworks\]/,/^# \[/p' "$file" | grep -E "^$1==" | head -n 1 || true)
        [[ -n "$line" ]] && { echo "$line"; return; }
    done
    die "$REPO_LOCK has no [frameworks] line for $1 (make lock writes one)"
}
TORCH_DEFAULT=$(framework_pin torch)
TF_DEFAULT=$(framework_pin 'tensorflow(-cpu)?')
TORCH_SPEC=${HVDBENCH_TORCH_SPEC:-$TORCH_DEFAULT}
HOROVOD_VERSION=${HOROVOD_VERSION:-$(framework_pin horovod | sed 's/^horovod==//')}
if [[ -z "${HVDBENCH_TF_SPEC:-}" ]]; then
    if command -v nvidia-smi >/dev/null 2>&1; then
        # TensorFlow uses GPUs only with its CUDA 12 packages (tensorflow[and-cuda]), whose NCCL and cuDNN
        # land on the very files of PyTorch's CUDA 13 ones (nvidia/nccl/lib, nvidia/cudnn/lib): one
        # environment cannot hold both, and TensorFlow without them would train on the CPU.
        HVDBENCH_TF_SPEC=none
        log "TensorFlow left out on this GPU node: tensorflow[and-cuda]'s CUDA 12 NCCL and cuDNN would overwrite PyTorch's CUDA 13 ones in one environment. For TensorFlow on GPUs, a second environment with a PyTorch built for CUDA 12: HVDBENCH_VENV=.venv-tf HVDBENCH_TF_SPEC='tensorflow[and-cuda]==2.21.0' HVDBENCH_TORCH_SPEC='torch==<version> --index-url https://download.pytorch.org/whl/cu12<x>' make setup"
    else
        HVDBENCH_TF_SPEC=$TF_DEFAULT
    fi
fi
TF_SPEC=$HVDBENCH_TF_SPEC
WITH_MPI=1
case "${HVDBENCH_MPI:-}" in
    ""|auto) ;;
    none) WITH_MPI=0 ;;
    *) die "HVDBENCH_MPI=${HVDBENCH_MPI} is not understood: leave it unset (the MPI on PATH) or set it to none (Gloo alone)" ;;
esac
case "${HOROVOD_WITHOUT_GLOO:-0}" in
    0|1) ;;
    *) die "HOROVOD_WITHOUT_GLOO=${HOROVOD_WITHOUT_GLOO} is not understood: 1 builds Horovod without Gloo, 0 (default) with it" ;;
esac
((WITH_MPI)) || [[ "${HOROVOD_WITHOUT_GLOO:-0}" != 1 ]] \
    || die "HVDBENCH_MPI=none with HOROVOD_WITHOUT_GLOO=1 leaves Horovod no controller: give it one of the two"
if [[ -n "${HVDBENCH_WHEELS:-}" ]]; then
    [[ -d "$HVDBENCH_WHEELS" ]] || die "HVDBENCH_WHEELS=$HVDBENCH_WHEELS is not a folder (scripts/bundle.sh makes one)"
    export PIP_NO_INDEX=1 PIP_FIND_LINKS=$(cd "$HVDBENCH_WHEELS" && pwd)
    log "offline: pip takes packages from $PIP_FIND_LINKS only"
fi

# --- The constraints this set-up applies: the lock, less what a framework of another version (or the
# node's own) brings with it, and less [frameworks], which set-up installs through the settings above.
system_site=${HVDBENCH_SYSTEM_SITE:-0}
sees() { [[ "$system_site" == 1 ]] && "$PYTHON" -c "import $1" >/dev/null 2>&1; }
drop=()
if [[ "$TORCH_SPEC" != "$TORCH_DEFAULT" ]]; then drop+=("torch=HVDBENCH_TORCH_SPEC=$TORCH_SPEC brings its own")
elif sees torch; then drop+=("torch=the PyTorch the environment already sees brings its own"); fi
if [[ "$TF_SPEC" == none ]]; then drop+=("tensorflow=HVDBENCH_TF_SPEC=none")
elif [[ "$TF_SPEC" != "$TF_DEFAULT" ]]; then drop+=("tensorflow=HVDBENCH_TF_SPEC=$TF_SPEC brings its own")
elif sees tensorflow; then drop+=("tensorflow=the TensorFlow the environment already sees brings its own"); fi
frameworks="# torch: $TORCH_SPEC"$'\n'"# tensorflow: $TF_SPEC"$'\n'"# horovod: $HOROVOD_VERSION"
# With HVDBENCH_SYSTEM_SITE=1 the node's own packages stay as they are (an image's numpy goes with its
# torch): the lock pins what set-up installs itself.
have=
if [[ "$system_site" == 1 ]]; then
    have=$("$PYTHON" -c 'import importlib.metadata as m; print(" ".join(sorted({d.metadata["Name"] for d in m.distributions() if d.metadata["Name"]})))' 2>/dev/null || true)
fi
if [[ "$LOCK" == none ]]; then
    constraints="# HVDBENCH_LOCK=none: no constraints"$'\n'"$frameworks"
else
    constraints="# constraints scripts/setup.sh applied, from $LOCK"$'\n'"$frameworks"$'\n'$(IFS=';'
        awk -v drop="${drop[*]//;/,}" -v have="$have" -f "$ROOT/scripts/constraints.awk" "$LOCK")
fi

# Which MPI mpirun is, in one line: its first line naming a version (Open MPI's and Intel MPI's first line;
# for MPICH's hydra, which starts with "HYDRA build details:", its Version line).
mpi_version_line() {
    mpirun --version 2>/dev/null | tr -d '\0' | grep -m 1 -E '[0-9]+\.[0-9]+' \
        | sed -E 's/^[[:space:]]*Version:[[:space:]]+/MPICH (hydra) /' || true
}
# --- What enters the build; a change to any of it makes set-up redo its installs (the stamp).
build_settings() {
    local mpi=none interpreter
    ((WITH_MPI)) && mpi=$(mpi_version_line)
    interpreter=$("$PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])' 2>/dev/null || echo "$PYTHON")
    printf '%s\n' "checkout: $ROOT" "interpreter: $interpreter" "system site packages: $system_site" \
        "torch: $TORCH_SPEC" "tensorflow: $TF_SPEC" "horovod: $HOROVOD_VERSION" "mpi: ${mpi:-not on PATH}" \
        "mpi4py from source: ${HVDBENCH_MPI4PY_SOURCE:-0}" "gpu operations: ${HOROVOD_GPU_OPERATIONS:-auto}" \
        "cuda architectures: ${HOROVOD_BUILD_CUDA_CC_LIST:-auto}" "nccl home: ${HOROVOD_NCCL_HOME:-auto}" \
        "cuda home: ${HOROVOD_CUDA_HOME:-auto}" "lock: $LOCK" "rebuild horovod: ${HVDBENCH_REBUILD_HOROVOD:-0}" \
        "horovod wheel: ${HVDBENCH_HOROVOD_WHEEL:-build}" "horovod debug build: ${HOROVOD_DEBUG:-0}" \
        "horovod without gloo: ${HOROVOD_WITHOUT_GLOO:-0}"
}
compute_stamp() {
    { cat "$ROOT/setup.cfg" "$ROOT/scripts/setup.sh" "$ROOT/scripts/horovod-requirements.txt" \
          "$ROOT/scripts/test-peers.txt"; echo "$constraints"
      build_settings; } | sha256sum | cut -c1-16
}
if [[ "$mode" == --stamp ]]; then
    build_settings
    echo "stamp: $(compute_stamp)"
    exit 0
fi
mkdir -p "$CACHE/logs" 2>/dev/null || die "HVDBENCH_CACHE=$CACHE: cannot make $CACHE/logs (choose a writable folder)"
LOG=$CACHE/logs/setup-$(date +%Y%m%d-%H%M%S)-$$.log
: > "$LOG"
ls -1t "$CACHE"/logs/setup-*.log | tail -n +21 | xargs -r rm -f  # the newest 20 kept

# --- 1. MPI and a compiler: the cluster's own where present, Debian's packages where root and missing.
# A build tool: make, or ninja where make is missing (CMake then generates for ninja).
need_pkgs=()
if ((WITH_MPI)) && [[ "$mode" != --venv-only ]]; then
    command -v mpirun >/dev/null 2>&1 || need_pkgs+=(openmpi-bin)
    command -v mpicxx >/dev/null 2>&1 || command -v mpic++ >/dev/null 2>&1 || need_pkgs+=(libopenmpi-dev)
fi
if [[ "$mode" != --venv-only ]]; then
    command -v g++ >/dev/null 2>&1 || need_pkgs+=(g++)
    command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1 || need_pkgs+=(make)
fi
if ((${#need_pkgs[@]})); then
    hint="load your MPI and compiler (e.g. 'module load openmpi gcc') or install them, then run again"
    ((WITH_MPI)) && hint="$hint; or set HVDBENCH_MPI=none for Horovod with Gloo alone"
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1 && [[ -z "${HVDBENCH_WHEELS:-}" ]]; then
        log "installing ${need_pkgs[*]} with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}"; } >> "$LOG" 2>&1 \
            || die "apt-get could not install ${need_pkgs[*]} (log: $LOG): $hint"
    else
        die "missing ${need_pkgs[*]}: $hint"
    fi
fi
if [[ "$mode" == --venv-only ]]; then
    :
elif ((WITH_MPI)); then
    log "MPI: $(command -v mpirun) ($(mpi_version_line))"
else
    log "MPI: none (HVDBENCH_MPI=none): Horovod with Gloo alone, no mpi4py"
fi

# --- 2. The virtual environment, made from HVDBENCH_PYTHON (made again where set-up made it from another
# interpreter or with other system-site settings).
venv_from="$("$PYTHON" -c 'import sys; print(sys.executable)') system-site=$system_site"
if [[ -x "$VENV/bin/python" && -f "$VENV/.hvdbench-venv" && "$(cat "$VENV/.hvdbench-venv")" != "$venv_from" ]]; then
    log "making $VENV again: it was made from $(cat "$VENV/.hvdbench-venv"), now asked from $venv_from"
    rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating virtual environment $VENV"
    venv_flags=()
    [[ "$system_site" == 1 ]] && venv_flags+=(--system-site-packages)
    if ! "$PYTHON" -m venv "${venv_flags[@]}" "$VENV" >> "$LOG" 2>&1; then
        # no ensurepip (Debian's and Ubuntu's python3 without its python3-venv package): the environment without
        # pip, and this interpreter's own pip installs into it (pip --python, pip 22.3 and newer)
        rm -rf "$VENV"
        "$PYTHON" -m pip --python "$PYTHON" --version >> "$LOG" 2>&1 \
            || die "HVDBENCH_PYTHON=$PYTHON cannot make a virtual environment with pip: it has no ensurepip, and no pip of 22.3 or newer to install into one (install its venv package, e.g. python3-venv, or give another interpreter); log: $LOG"
        "$PYTHON" -m venv --without-pip "${venv_flags[@]}" "$VENV"
        "$PYTHON" -c 'import sys; print(sys.executable)' > "$VENV/.hvdbench-outer-pip"
        log "$PYTHON has no ensurepip: $VENV made without pip; set-up installs into it with $PYTHON's own pip"
    fi
    echo "$venv_from" > "$VENV/.hvdbench-venv"
    if [[ "$system_site" == 1 ]]; then
        # --system-site-packages sees the base interpreter's packages only: where HVDBENCH_PYTHON is itself a
        # virtual environment's (an image's or a module's torch lives there), a .pth file adds its packages.
        "$PYTHON" - "$VENV" <<'PYEOF' || die "could not make $VENV see the packages of $PYTHON"
import pathlib, site, sys, sysconfig
if sys.prefix != sys.base_prefix:
    venv = pathlib.Path(sys.argv[1])
    inner = venv / pathlib.Path(sysconfig.get_path("purelib")).relative_to(sys.prefix)
    inner.mkdir(parents=True, exist_ok=True)
    # addsitedir, as for the base interpreter's packages, so that their own .pth files count too
    lines = [f"import site; site.addsitedir({p!r})\n" for p in site.getsitepackages()]
    (inner / "_hvdbench_outer_env.pth").write_text("".join(lines))
    print(f"[setup] {venv} also sees the packages of {sys.prefix}")
PYEOF
    fi
fi
PY=$VENV/bin/python
# How pip reaches the environment: its own, or (made without ensurepip) the interpreter's pip aimed at it
PIP=("$PY" -m pip)
[[ -s "$VENV/.hvdbench-outer-pip" ]] && PIP=("$(cat "$VENV/.hvdbench-outer-pip")" -m pip --python "$PY")
if [[ "$mode" == --venv-only ]]; then
    log "environment $VENV; pip: $("${PIP[@]}" --version 2>&1 | head -n 1)"
    log "installs with: ${PIP[*]} install"
    exit 0
fi
# What pip is held to: written beside the environment (the tests compare the installs with it).
echo "$constraints" > "$VENV/.hvdbench-constraints.txt"
if [[ "$LOCK" != none ]]; then
    export PIP_CONSTRAINT=$VENV/.hvdbench-constraints.txt
    log "versions pinned by $LOCK${drop[*]:+ (not applied: ${drop[*]})}"
else
    unset PIP_CONSTRAINT
    log "HVDBENCH_LOCK=none: pip takes the newest versions that fit"
fi
# Everything below is skipped when this exact set-up already completed in this environment.
stamp_file=$VENV/.hvdbench-setup
stamp=$(compute_stamp)
if [[ -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]] && "$PY" -c 'import hvdbench.suite, horovod.torch' 2>/dev/null; then
    log "environment $VENV is current"
    skip_install=1
fi
# pip's output goes to the log; pip_install's failure is one line with pip's own first error
pip_try() {
    echo "+ pip install $*" >> "$LOG"
    "${PIP[@]}" install --disable-pip-version-check -q "$@" >> "$LOG" 2>&1
}
pip_install() {
    local before why; before=$(wc -l < "$LOG")
    pip_try "$@" && return
    why=$(tail -n +$((before + 2)) "$LOG" | grep -m 1 -E '^(ERROR|error):' | cut -c1-300 || true)
    die "pip could not install $*${why:+: $why} (log: $LOG)"
}
# The CUDA toolkit's root (nvcc and its headers) as nvcc itself reports it, since nvcc on PATH may be a
# wrapper script; else CUDA_HOME, CUDA_PATH or /usr/local/cuda; nothing where none holds a toolkit.
cuda_toolkit_root() {
    local root=${CUDA_HOME:-${CUDA_PATH:-}} here
    if [[ -z "$root" ]] && command -v nvcc >/dev/null 2>&1; then
        : > "$1/probe.cu"
        here=$(cd "$1" && nvcc --dryrun -c probe.cu 2>&1 | sed -n 's/^#\$ _HERE_=//p' | head -n 1 || true)
        [[ -n "$here" ]] && root=$(dirname "$here")
    fi
    [[ -z "$root" ]] && root=/usr/local/cuda
    if [[ -x "$root/bin/nvcc" && -f "$root/include/cuda_runtime.h" ]]; then echo "$root"; fi
}
# Horovod's build against the NCCL in $1; where it has only libnccl.so.N (PyTorch's NCCL package),
# a libnccl.so link in $2 for Horovod's FindNCCL, which looks for libnccl.so or libnccl_static.a.
use_nccl() {
    export HOROVOD_NCCL_HOME=$1
    local versioned; versioned=$(compgen -G "$1/lib/libnccl.so.*" | head -n 1 || true)
    if [[ ! -e "$1/lib/libnccl.so" && ! -e "$1/lib/libnccl_static.a" && -n "$versioned" ]]; then
        mkdir -p "$2/nccl-lib"
        ln -s "$versioned" "$2/nccl-lib/libnccl.so"
        export HOROVOD_NCCL_INCLUDE=$1/include HOROVOD_NCCL_LIB=$2/nccl-lib HOROVOD_NCCL_LINK=SHARED
    fi
}
# The version of module $1 as the environment imports it; a module that does not import stops set-up in one
# line ($2: what it is, $3: the setting that chooses it).
version_of() {
    local before; before=$(wc -l < "$LOG")
    "$PY" -c "import $1; print($1.__version__)" 2>> "$LOG" && return
    die "$2 is installed but does not import: $(tail -n +$((before + 1)) "$LOG" | grep -E 'Error|error' | tail -n 1 | cut -c1-200) (log: $LOG; $3 chooses another)"
}
# Horovod's source, patched with sed: a patch whose old text is still there afterwards stops set-up.
patch_source() {  # FILE SED-SCRIPT OLD-TEXT-REGEX WHAT
    sed -i "$2" "$1"
    if grep -qE "$3" "$1"; then die "could not $4 (${1#"$work/"} still has '$3')"; fi
}
FOUND="(found in the environment)"  # the marker's mark of a Horovod set-up found rather than built
# What Horovod's --check-build must show for a build key: PyTorch always, Gloo, MPI, TensorFlow and NCCL where the
# key has them.
build_needs() {
    echo PyTorch
    [[ "$1" != *_gloo-none* ]] && echo Gloo
    [[ "$1" != *_mpi-none ]] && echo MPI
    [[ "$1" != *_tf-none_* ]] && echo TensorFlow
    [[ "$1" == *_gpu-NCCL* ]] && echo NCCL
    return 0
}
# Horovod's own --check-build, asked through the environment's interpreter (an image's Horovod may have no
# horovodrun in this environment's bin), with the frameworks loaded first (scripts/check_build.py).
check_build() {
    "$PY" "$ROOT/scripts/check_build.py"
}
# Whether the environment's Horovod loads the MPI on PATH: the MPI library its PyTorch extension loaded (found in
# the process's maps) asked for its version, which must name the version mpirun reports (a Horovod built against
# another MPI, as one environment seen from another MPI's, fails).
horovod_matches_mpi() {
    local want; want=$(mpi_version_line | grep -oE '[0-9]+(\.[0-9]+)+' | head -n 1)
    "$PY" - "$want" <<'PYEOF' 2>/dev/null
import ctypes, re, sys
import horovod.torch  # noqa: F401  (its extension links the MPI it was built against)
maps = open("/proc/self/maps").read()
found = re.search(r"(/\S*/lib(?:mpi|mpich)[^/\s]*\.so[^/\s]*)", maps)
if not found:
    sys.exit(1)
buffer, length = ctypes.create_string_buffer(8192), ctypes.c_int()
ctypes.CDLL(found.group(1)).MPI_Get_library_version(buffer, ctypes.byref(length))
version = buffer.value.decode(errors="replace")
print(version.splitlines()[0].strip() if version.strip() else found.group(1))
sys.exit(0 if sys.argv[1] and sys.argv[1] in version else 1)
PYEOF
}
# A Horovod the environment already has (an image's, a module's) whose --check-build shows everything key needs and,
# with MPI, that loads the MPI on PATH: its version printed; else nothing and a failure.
usable_horovod() {
    local check item
    check=$(check_build 2>/dev/null) || return 1
    for item in $(build_needs "$1"); do grep -Eq "\[X\] $item\b" <<<"$check" || return 1; done
    if ((WITH_MPI)); then horovod_matches_mpi >/dev/null || return 1; fi
    "$PY" -c 'import horovod; print(horovod.__version__)'
}
install_all() {
    pip_install -r "$ROOT/scripts/horovod-requirements.txt"

    # --- 3. Frameworks.
    have_module() { "$PY" -c "import $1" >/dev/null 2>&1; }
    if [[ "${HVDBENCH_SYSTEM_SITE:-0}" == 1 ]] && have_module torch; then
        log "using the PyTorch the environment already sees"
    else
        read -ra words <<<"$TORCH_SPEC"  # a requirement and pip options, e.g. --index-url
        pip_install "${words[@]}"
    fi
    if [[ "$TF_SPEC" == none ]]; then
        log "TensorFlow skipped (HVDBENCH_TF_SPEC=none)"
    elif [[ "${HVDBENCH_SYSTEM_SITE:-0}" == 1 ]] && have_module tensorflow; then
        log "using the TensorFlow the environment already sees"
    else
        read -ra words <<<"$TF_SPEC"
        pip_install "${words[@]}"
    fi
    torch_ver=$(version_of torch "PyTorch ($TORCH_SPEC)" HVDBENCH_TORCH_SPEC)
    cuda_ver=$("$PY" -c 'import torch; print(torch.version.cuda or "cpu")')
    tf_ver=none
    if [[ "$TF_SPEC" != none ]]; then
        tf_ver=$(version_of tensorflow "TensorFlow ($TF_SPEC)" "HVDBENCH_TF_SPEC (none leaves it out)")
    fi
    py_ver=$("$PY" -c 'import sys; print("py%d%d" % sys.version_info[:2])')
    log "torch $torch_ver (CUDA: $cuda_ver), TensorFlow $tf_ver, $py_ver"

    # --- 4. Horovod, built from its source release once per (Horovod, torch, TensorFlow, Python, GPU ops,
    # MPI or not, GPU architectures).
    gpu_ops=${HOROVOD_GPU_OPERATIONS:-}
    nccl_home=
    if [[ "$cuda_ver" != cpu && ( -z "$gpu_ops" || "$gpu_ops" == NCCL ) ]]; then
        # PyTorch's CUDA wheels bring NCCL as a package (nvidia/nccl: include/nccl.h, lib/libnccl.so.2).
        nccl_home=${HOROVOD_NCCL_HOME:-$("$PY" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)}
        if [[ -n "$nccl_home" && -f "$nccl_home/include/nccl.h" ]] || ldconfig -p 2>/dev/null | grep -q libnccl.so; then
            gpu_ops=NCCL
        else
            nccl_home=
        fi
    fi
    cc_list=${HOROVOD_BUILD_CUDA_CC_LIST:-}
    if [[ -n "$gpu_ops" && -z "$cc_list" ]] && command -v nvidia-smi >/dev/null 2>&1; then
        cc_list=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | grep -E '^[0-9]+$' | sort -un | paste -sd, || true)
        [[ -n "$cc_list" ]] && log "Horovod's CUDA kernels for this node's GPU architectures: $cc_list (HOROVOD_BUILD_CUDA_CC_LIST overrides)"
    fi
    key="horovod-${HOROVOD_VERSION}_torch-${torch_ver}_tf-${tf_ver}_${py_ver}_gpu-${gpu_ops:-none}"
    [[ -n "$gpu_ops" ]] && key="${key}_cuda-${cuda_ver}"
    [[ -n "$gpu_ops" && -n "$cc_list" ]] && key="${key}_cc-${cc_list//,/-}"
    # which MPI it links (Open MPI, MPICH, Intel MPI, their versions): the MPI's version line, hashed
    if ((WITH_MPI)); then key="${key}_mpi-$(mpi_version_line | sha256sum | cut -c1-8)"; else key="${key}_mpi-none"; fi
    [[ "${HOROVOD_DEBUG:-0}" == 1 ]] && key="${key}_debug"  # Horovod's debug build, cached apart
    [[ "${HOROVOD_WITHOUT_GLOO:-0}" == 1 ]] && key="${key}_gloo-none"  # MPI alone, cached apart
    key=${key//+/-}
    marker=$VENV/.hvdbench-horovod
    if [[ -f "$marker" && "$(cat "$marker")" == "$key" ]] && have_module horovod.torch; then
        log "Horovod already installed ($key)"
    elif [[ ! -f "$marker" || "$(cat "$marker")" == "$key $FOUND" ]] && [[ "${HVDBENCH_REBUILD_HOROVOD:-0}" != 1 ]] \
            && found=$(usable_horovod "$key"); then
        # a Horovod set-up did not install (an image's, a module's): kept where its --check-build has what is needed
        log "Horovod $found already in the environment has what this node needs ($(build_needs "$key" | paste -sd, | sed 's/,/, /g')): used as it is, nothing built (HVDBENCH_REBUILD_HOROVOD=1 builds $HOROVOD_VERSION instead)"
        echo "$key $FOUND" > "$marker"
    elif [[ -n "${HVDBENCH_HOROVOD_WHEEL:-}" ]]; then
        [[ -f "$HVDBENCH_HOROVOD_WHEEL" ]] || die "HVDBENCH_HOROVOD_WHEEL=$HVDBENCH_HOROVOD_WHEEL is not a file"
        log "Horovod from the wheel given, not built: $HVDBENCH_HOROVOD_WHEEL (checked by --check-build below)"
        pip_install --no-deps --force-reinstall "$HVDBENCH_HOROVOD_WHEEL"
        echo "$key (wheel given: ${HVDBENCH_HOROVOD_WHEEL##*/})" > "$marker"
    else
        wheel_dir=$CACHE/wheels/$key
        if ! compgen -G "$wheel_dir/horovod-*.whl" >/dev/null; then
            log "building Horovod $HOROVOD_VERSION from source (several minutes on 2 cores); cache: $wheel_dir"
            build_started=$(date +%s)
            work=$(mktemp -d)
            trap 'rm -rf "$work"' EXIT
            "${PIP[@]}" download -q --no-deps --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$work" >> "$LOG" 2>&1 \
                || die "could not fetch Horovod $HOROVOD_VERSION's source release (log: $LOG; a node without network: HVDBENCH_WHEELS, scripts/bundle.sh)"
            tar -xzf "$work"/horovod-"$HOROVOD_VERSION".tar.gz -C "$work"
            src=$work/horovod-$HOROVOD_VERSION
            # torch >= 2.1 headers need C++17; 0.28.1 asks for C++14.
            for f in "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"; do
                patch_source "$f" 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' \
                    'CMAKE_CXX_STANDARD 14' "switch Horovod's build to C++17"
            done
            # Python 3.12 has no distutils: the PyTorch part asks sysconfig for Python's headers instead.
            patch_source "$src/horovod/torch/CMakeLists.txt" \
                's/from distutils.sysconfig import get_python_inc; print(get_python_inc())/import sysconfig; print(sysconfig.get_paths()[\x27include\x27])/' \
                distutils "take distutils out of Horovod's PyTorch build"
            # The XLA op file includes TensorFlow headers that newer releases moved; the rest builds.
            patch_source "$src/horovod/tensorflow/CMakeLists.txt" '/xla_mpi_ops.cc/d' xla_mpi_ops.cc \
                "leave the XLA op file out of Horovod's TensorFlow build"
            # Its release build is -O3 with debug info; without it the same code, a wheel of 1.9 MB, not 35.6 MB
            # (set-up's Horovod step, cold on 2 cores: 330 s, was 355 s). HOROVOD_DEBUG=1 still gives its debug build.
            patch_source "$src/CMakeLists.txt" 's/string(REPLACE "-O2" "-O3" /string(REPLACE "-O2 -g" "-O3" /' \
                'REPLACE "-O2" "-O3"' "build Horovod without debug info"
            export CMAKE_POLICY_VERSION_MINIMUM=3.5 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
            if [[ "${HOROVOD_WITHOUT_GLOO:-0}" == 1 ]]; then unset HOROVOD_WITH_GLOO; else export HOROVOD_WITH_GLOO=1; fi
            if ((WITH_MPI)); then export HOROVOD_WITH_MPI=1; else export HOROVOD_WITHOUT_MPI=1; fi
            if [[ "$tf_ver" != none ]]; then export HOROVOD_WITH_TENSORFLOW=1; else export HOROVOD_WITHOUT_TENSORFLOW=1; fi
            if [[ -n "$gpu_ops" ]]; then
                export HOROVOD_GPU_OPERATIONS=$gpu_ops
                export HOROVOD_CUDA_HOME=${HOROVOD_CUDA_HOME:-$(cuda_toolkit_root "$work")}
                [[ -n "$HOROVOD_CUDA_HOME" ]] \
                    || die "Horovod's $gpu_ops build needs the CUDA toolkit (nvcc and its headers), not found: 'module load cuda' or set HOROVOD_CUDA_HOME"
                # PyTorch's extension helper (which Horovod's build asks for libraries) reads CUDA_HOME.
                export CUDA_HOME=${CUDA_HOME:-$HOROVOD_CUDA_HOME}
                log "CUDA toolkit: $HOROVOD_CUDA_HOME ($("$HOROVOD_CUDA_HOME/bin/nvcc" --version | tail -n 1))"
                [[ -n "$cc_list" ]] && export HOROVOD_BUILD_CUDA_CC_LIST=$cc_list
                # CUDA 12.8+ headers need C++17 in device code too; 0.28.1 asks for C++11.
                patch_source "$src/horovod/common/ops/cuda/CMakeLists.txt" \
                    's/set(CMAKE_CUDA_STANDARD 11)/set(CMAKE_CUDA_STANDARD 17)/' 'CMAKE_CUDA_STANDARD 11' \
                    "switch Horovod's CUDA kernels to C++17"
            fi
            [[ -n "$nccl_home" ]] && use_nccl "$nccl_home" "$work"
            if ! command -v make >/dev/null 2>&1; then
                # ninja instead; Horovod's setup.py would hand it make's VERBOSE=1 as a target
                export CMAKE_GENERATOR=Ninja
                patch_source "$src/setup.py" "s/make_args.append('VERBOSE=1')/pass/" "make_args.append\\('VERBOSE=1'\\)" \
                    "keep make's VERBOSE=1 from ninja"
            fi
            export MAKEFLAGS=${MAKEFLAGS:--j$(( $(nproc) > 8 ? $(nproc) : 8 ))}  # Horovod alone asks for -j8
            export PATH=$VENV/bin:$PATH
            (cd "$src" && "${PIP[@]}" wheel -q --no-build-isolation --no-deps -w "$work/dist" .) \
                > "$work/build.log" 2>&1 || {
                    mkdir -p "$CACHE" && cp "$work/build.log" "$CACHE/horovod-build-$key.log"
                    # the first errors say why; pip's traceback at the end does not
                    grep -n -m 12 -A 6 -E 'CMake Error|: (fatal )?error:|Could NOT find|FATAL' "$work/build.log" >&2 || tail -n 40 "$work/build.log" >&2
                    die "Horovod build failed (first errors above; whole log: $CACHE/horovod-build-$key.log)"; }
            cache_entry "$wheel_dir" cp "$work"/dist/horovod-*.whl || die "could not put Horovod's wheel in $wheel_dir"
            log "Horovod built in $(( $(date +%s) - build_started )) s"
        else
            log "Horovod wheel found in cache: $wheel_dir"
        fi
        # (its own Python dependencies came from scripts/horovod-requirements.txt above)
        pip_install --no-deps --force-reinstall "$wheel_dir"/horovod-*.whl
        echo "$key" > "$marker"
    fi

    # --- 5. mpi4py (with MPI), then hvdbench itself.
    extras=train,slurm,gpu,report,store,test,lint
    if ((WITH_MPI)); then install_mpi4py; extras+=,mpi; fi
    # offline, hvdbench is built with the environment's setuptools (scripts/horovod-requirements.txt)
    isolation=(); [[ -n "${HVDBENCH_WHEELS:-}" ]] && isolation=(--no-build-isolation)
    pip_install "${isolation[@]}" -e "$ROOT[$extras]"
    # --- 6. the peers the tests hold hvdbench to that cannot be an extra (their pins conflict with the lock's)
    if [[ -z "${HVDBENCH_WHEELS:-}" ]]; then
        pip_install --no-deps -r "$ROOT/scripts/test-peers.txt"
    else
        log "test peers (scripts/test-peers.txt) not installed offline: the tests that use them skip"
    fi
}

# mpi4py's binary wheel loads the MPI on PATH at run time (Open MPI, MPICH, Intel MPI, MVAPICH, Cray
# MPICH); where it cannot use that MPI (or HVDBENCH_MPI4PY_SOURCE=1), a wheel built against it, cached
# beside Horovod's under a key of the MPI's version line, so the build happens once per MPI.
mpi4py_matches_mpi() {
    local want; want=$(mpi_version_line | grep -oE '[0-9]+(\.[0-9]+)+' | head -n 1)
    "$PY" - "$want" <<'PYEOF' 2>/dev/null
import sys
from mpi4py import MPI
version = MPI.Get_library_version()
print(version.replace("\0", "").splitlines()[0].strip())  # Open MPI's string ends in a NUL
sys.exit(0 if sys.argv[1] and sys.argv[1] in version else 1)
PYEOF
}
install_mpi4py() {
    if [[ "${HVDBENCH_REBUILD_HOROVOD:-0}" != 1 ]] && "$PY" -c 'import mpi4py' 2>/dev/null \
            && line=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpi4py_matches_mpi); then
        log "mpi4py already in the environment uses the MPI on PATH ($line): used as it is"
        return
    fi
    if [[ "${HVDBENCH_MPI4PY_SOURCE:-0}" != 1 ]]; then
        if pip_try --only-binary mpi4py 'mpi4py>=4.1' \
                && line=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpi4py_matches_mpi); then
            log "mpi4py: binary wheel, using $line"
            return
        fi
        log "no mpi4py binary wheel uses the MPI on PATH ($(mpi_version_line)); building it from source"
    fi
    local key wheels
    key=$(mpi_version_line | sha256sum | cut -c1-12)
    wheels=$CACHE/wheels/mpi4py_${py_ver}_mpi-$key
    if ! compgen -G "$wheels/mpi4py-*.whl" >/dev/null; then
        local started; started=$(date +%s)
        cache_entry "$wheels" "${PIP[@]}" wheel -q --no-deps --no-binary mpi4py 'mpi4py>=3.1' -w >> "$LOG" 2>&1 \
            || die "mpi4py could not be built against $(command -v mpicc || echo 'the MPI on PATH') (log: $LOG)"
        log "mpi4py built against $(mpi_version_line) in $(( $(date +%s) - started )) s; cache: $wheels"
    fi
    pip_install --no-deps --force-reinstall "$wheels"/mpi4py-*.whl
}
[[ -n "${skip_install:-}" ]] || install_all

# --- 6. Check the build: every framework and controller we asked for must be there.
# (the check imports each framework; TensorFlow's start-up chatter goes to a file, shown on failure)
check=$(check_build 2>"$VENV/.check-build.err") \
    || die "horovodrun --check-build failed: $(grep -E 'Error|error' "$VENV/.check-build.err" | tail -n 1 | cut -c1-200) (log: $VENV/.check-build.err)"
echo "$check"
built_key=$(cat "$VENV/.hvdbench-horovod")
for item in $(build_needs "$built_key"); do
    grep -Eq "\[X\] $item\b" <<<"$check" || die "Horovod was built without $item (see 'horovodrun --check-build' above)"
done
echo "$stamp" > "$stamp_file"
log "ready in $(( $(date +%s) - started )) s: activate with 'source $VENV/bin/activate'"
