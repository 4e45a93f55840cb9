#!/usr/bin/env bash
# System tools the tests use beyond the set-up, installed with apt-get where root, online and missing;
# whatever stays missing (no root, no network, no apt-get) is said with the tests that will skip for it,
# and the tests run all the same:
#   chromium                      the HTML report rendered in a real browser
#   slurm-wlm, munge, libpmix-dev a single-host SLURM cluster (slurmctld + slurmd, srun --mpi=pmix)
#   openssh-server/-client        a second "host" on loopback for multi-node runs
#   iproute2, util-linux          hosts and SLURM nodes with their own name and address (network, UTS,
#                                 mount namespaces) for MPI and the two-node GPU cluster
#   mpich, libmpich-dev           Debian's MPICH for the MPICH environment (scripts/mpi-env.sh mpich), installed
#                                 here, before the tests, since scripts/test.sh builds that environment beside them
#   mmdebstrap, charliecloud-*, python3-lark  a real image from container/Containerfile (scripts/container-image.sh)
#                                 and ranks inside it under ch-run
#   postgresql                    a real PostgreSQL server (an unprivileged cluster in a temporary folder) for the
#                                 history store's tests on a team's database
#   python3-simgrid               SimGrid's Python module: the projection's second opinion on a tapered fabric
#                                 (analysis/projection/simulated.py loads Debian's extension for this Python)
#   dataset-fashion-mnist         the full Fashion-MNIST (60,000 + 10,000 images) read and checked as shipped; runs
#                                 to a quality target train on examples/fashion-mnist-sample, which needs nothing
set -uo pipefail
have() { command -v "$1" >/dev/null 2>&1 || [[ -x "/usr/sbin/$1" ]]; }
# package -> the tests that skip without it
declare -A skips=(
    [chromium]="the report rendered in a browser (test_report_tables_and_html.py)"
    [slurm-wlm]="the SLURM clusters (test_slurm_cluster_runs_sweeps.py, test_two_node_slurm_with_gpus.py)"
    [munge]="the SLURM clusters (test_slurm_cluster_runs_sweeps.py, test_two_node_slurm_with_gpus.py)"
    [libpmix-dev]="srun --mpi=pmix in the SLURM cluster (test_slurm_cluster_runs_sweeps.py)"
    [openssh-server]="second hosts (test_two_hosts_over_ssh.py, test_projection_shaped_link.py)"
    [openssh-client]="second hosts (test_two_hosts_over_ssh.py, test_projection_shaped_link.py)"
    [iproute2]="namespace hosts and the two-node cluster (test_two_hosts_over_ssh.py, test_projection_shaped_link.py, test_two_node_slurm_with_gpus.py)"
    [util-linux]="namespace hosts and the two-node cluster (test_two_hosts_over_ssh.py, test_two_node_slurm_with_gpus.py)"
    [mpich]="the MPICH environment's tests (test_mpich_and_intel_mpi_for_real.py)"
    [libmpich-dev]="the MPICH environment's tests (test_mpich_and_intel_mpi_for_real.py)"
    [mmdebstrap]="the image built from the recipe (test_container_image_runs_ranks.py)"
    [charliecloud-builders]="the image built from the recipe (test_container_image_runs_ranks.py)"
    [python3-lark]="the image built from the recipe (test_container_image_runs_ranks.py)"
    [charliecloud-runtime]="ranks inside the image (test_container_image_runs_ranks.py)"
    [postgresql]="the history store on PostgreSQL (test_history_store_keeps_every_run_once.py)"
    [dataset-fashion-mnist]="the full Fashion-MNIST read as shipped (test_idx_datasets_are_read_as_shipped_and_checked.py)"
    [python3-simgrid]="the SimGrid second opinion (test_a_tapered_fabric_is_simulated_beside_the_formula.py)"
)
need=()
have chromium || need+=(chromium)
have slurmctld || need+=(slurm-wlm)
have slurmd || need+=(slurm-wlm)
have sbatch || need+=(slurm-wlm)
have munged || need+=(munge)
[[ -e /usr/lib/x86_64-linux-gnu/libpmix.so || -n "$(compgen -G '/usr/lib/*/libpmix.so' || true)" ]] || need+=(libpmix-dev)
have sshd || need+=(openssh-server)
have ssh || need+=(openssh-client)
have ssh-keygen || need+=(openssh-client)
have ip || need+=(iproute2)
have nsenter || need+=(util-linux)
have unshare || need+=(util-linux)
have mpicc.mpich || need+=(mpich libmpich-dev)
have mpiexec.mpich || need+=(mpich)
have mmdebstrap || need+=(mmdebstrap)
have ch-image || need+=(charliecloud-builders)
have ch-run || need+=(charliecloud-runtime)
/usr/bin/python3 -c 'import lark' 2>/dev/null || need+=(python3-lark)
[[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]] || need+=(dataset-fashion-mnist)
[[ -n "$(compgen -G '/usr/lib/postgresql/*/bin/initdb' || true)" ]] || need+=(postgresql)
[[ -n "$(compgen -G '/usr/lib/python3/dist-packages/simgrid.cpython-*.so' || true)" ]] || need+=(python3-simgrid)
((${#need[@]})) || exit 0
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
why="not root or no apt-get"
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    printf '[test-tools] installing %s with apt-get\n' "${need[*]}"
    log=$(mktemp /tmp/hvdbench-test-tools.XXXXXX.log)
    if { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
            && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"; } >"$log" 2>&1; then
        rm -f "$log"
        exit 0
    fi
    why="apt-get could not install them (no network? log: $log)"
fi
for pkg in "${need[@]}"; do
    printf '[test-tools] %s missing (%s): %s will skip\n' "$pkg" "$why" "${skips[$pkg]}" >&2
done
exit 0
