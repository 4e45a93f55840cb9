#!/usr/bin/env bash
# make lint: ruff over every Python file of the project (style, unused and undefined names; pyproject.toml), then
# mypy over the packages named (default: every one) as installed, hvdbench.*: the repository's folders are linked
# under one hvdbench/ in a scratch folder, as setup.cfg's package_dir maps them.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${HVDBENCH_VENV:-$ROOT/.venv}/bin
FOLDERS=(core readers suite launchers analysis workflows cli)
packages=${LINT_PACKAGES:-${FOLDERS[*]/#/hvdbench.}}
"$BIN/ruff" check "${FOLDERS[@]/#/$ROOT/}" "$ROOT/tests" "$ROOT/benchmarks" "$ROOT/scripts"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/hvdbench"
for folder in "${FOLDERS[@]}"; do ln -s "$ROOT/$folder" "$scratch/hvdbench/$folder"; done
args=()
for package in $packages; do args+=(-p "$package"); done
cd "$ROOT" && MYPYPATH="$scratch" "$BIN/mypy" --config-file "$ROOT/pyproject.toml" --cache-dir "$scratch/.mypy" \
    "${args[@]}"
