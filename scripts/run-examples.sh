#!/usr/bin/env bash
# Runs every example in examples/ (built first with `cargo build --workspace --examples`)
# and fails if any of them fails or takes longer than 30 seconds.
# Usage: scripts/run-examples.sh [PROFILE]   (PROFILE: debug (default) or release)
set -uo pipefail
cd "$(dirname "$0")/.."

profile="${1:-debug}"
bin_dir="target/$profile/examples"
failed=()
for source in examples/*.rs; do
    name="$(basename "$source" .rs)"
    bin="$bin_dir/$name"
    echo "=== $name"
    if [[ ! -x "$bin" ]]; then
        echo "missing $bin: run \`cargo build --examples\` first" >&2
        failed+=("$name")
        continue
    fi
    start=$(date +%s%N)
    timeout 30 "$bin"
    status=$?
    elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    if [[ $status -ne 0 ]]; then
        echo "--- $name FAILED (exit $status, ${elapsed_ms} ms)" >&2
        failed+=("$name")
    else
        echo "--- $name ok (${elapsed_ms} ms)"
    fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "failed examples: ${failed[*]}" >&2
    exit 1
fi
echo "all examples passed"
