#!/usr/bin/env bash
# System tools the tests use beyond the set-up, installed with apt-get where root and missing:
#   chromium                      the HTML report rendered in a real browser
#   slurm-wlm, munge, libpmix-dev a single-host SLURM cluster (slurmctld + slurmd, srun --mpi=pmix)
#   openssh-server/-client        a second "host" on loopback for multi-node runs
#   iproute2, util-linux          hosts and SLURM nodes with their own name and address (network, UTS,
#                                 mount namespaces) for MPI and the two-node GPU cluster
# Elsewhere the tests that need them say so and skip.
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1 || [[ -x "/usr/sbin/$1" ]]; }
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
if ((${#need[@]})); then
    mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        printf '[test-tools] installing %s with apt-get\n' "${need[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    else
        printf '[test-tools] %s missing and not root: the tests that need them will skip\n' "${need[*]}" >&2
    fi
fi
