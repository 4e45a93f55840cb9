#!/usr/bin/env bash
# System tools the tests use beyond the set-up: Chromium (the HTML report rendered in a real browser).
# Installed with apt-get where root and missing; elsewhere the tests that need them say so and skip.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if ((${#need[@]})); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        printf '[test-tools] installing %s with apt-get\n' "${need[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    else
        printf '[test-tools] %s missing and not root: the tests that need them will skip\n' "${need[*]}" >&2
    fi
fi
