#!/usr/bin/env bash
# A GPU node's facts, one file each, beside a result that was measured on it:
#   scripts/node-facts.sh DIR
# nvidia-smi's full query, topology matrix and clocks; the driver, CUDA, NCCL and cuDNN versions PyTorch
# sees and the NCCL Horovod was built with; HCA ports, OFED, UCX, HPC-X and loaded modules; CPUs and memory. Where a tool is missing its file says so; nothing here fails.
set -uo pipefail
dir=${1:?usage: scripts/node-facts.sh DIR}
mkdir -p "$dir"
py=${HVDBENCH_VENV:+$HVDBENCH_VENV/bin/}python3
[[ -x "$py" ]] || py=python3
run() {  # FILE COMMAND...: the command's output, or why there is none
    local file=$1; shift
    { "$@" 2>&1 || echo "(exit $?: $*)"; } > "$dir/$file"
}
if command -v nvidia-smi >/dev/null 2>&1; then
    run nvidia-smi.txt nvidia-smi
    run nvidia-smi-q.txt nvidia-smi -q
    run topo.txt nvidia-smi topo -m
    run clocks.csv nvidia-smi --format=csv --query-gpu=index,name,pci.bus_id,driver_version,compute_cap,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,temperature.gpu,persistence_mode,mig.mode.current
else
    echo "nvidia-smi not on PATH" > "$dir/nvidia-smi.txt"
fi
run versions.txt "$py" -c '
import platform, torch
print("python", platform.python_version())
print("torch", torch.__version__, "cuda", torch.version.cuda)
print("cudnn", torch.backends.cudnn.version())
print("nccl", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "no CUDA device")
try:
    import horovod, horovod.torch as hvd
    code = hvd.nccl_built()
    print("horovod", horovod.__version__, "nccl", f"{code // 10000}.{code % 10000 // 100}.{code % 100}" if code else "none")
except ImportError as exc:
    print("horovod: not importable", exc)
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"gpu {i}", p.name, f"capability {p.major}.{p.minor}", f"{p.total_memory / 2**30:.1f} GiB", f"{p.multi_processor_count} SMs")
'
# the network between nodes: HCA ports (state, rate, link layer), OFED, UCX, the loaded modules
if command -v ibstat >/dev/null 2>&1; then run ibstat.txt ibstat
elif command -v ibv_devinfo >/dev/null 2>&1; then run ibv_devinfo.txt ibv_devinfo
else echo "neither ibstat nor ibv_devinfo on PATH" > "$dir/ibstat.txt"; fi
{ echo "ofed: $(ofed_info -s 2>/dev/null || echo none)"
  echo "ucx: $(ucx_info -v 2>/dev/null | head -n 2 | tr '\n' ' ' || echo none)"
  echo "hpcx: ${HPCX_DIR:-none}"
  echo "modules: ${LOADEDMODULES:-none}"; } > "$dir/fabric-software.txt"
run cpu.txt lscpu
run memory.txt free -g
run os.txt uname -a
echo "node facts in $dir"
