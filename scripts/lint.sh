#!/usr/bin/env bash
# make lint: ruff over every Python file of the project (style, unused and undefined names; pyproject.toml), then
# mypy over the packages named (default: the core vocabulary and the analysis) as installed, hvdbench.*: the
# repository's folders are linked under one hvdbench/ in a scratch folder, as setup.cfg's package_dir maps them.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${HVDBENCH_VENV:-$ROOT/.venv}/bin
packages=${LINT_PACKAGES:-hvdbench.suite.core hvdbench.analysis}
"$BIN/ruff" check "$ROOT/suite" "$ROOT/launchers" "$ROOT/analysis" "$ROOT/cli" "$ROOT/tests" "$ROOT/benchmarks" \
    "$ROOT/scripts"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/hvdbench"
for folder in suite launchers analysis cli; do ln -s "$ROOT/$folder" "$scratch/hvdbench/$folder"; done
args=()
for package in $packages; do args+=(-p "$package"); done
cd "$ROOT" && MYPYPATH="$scratch" "$BIN/mypy" --config-file "$ROOT/pyproject.toml" --cache-dir "$scratch/.mypy" \
    "${args[@]}"
