#!/usr/bin/env bash
# Prints the disk, memory and cores a CI run starts with, and warns when the free disk is below
# what a clean run of `.ci/run` needs (builds, test binaries, the test control plane cache).
# It never fails the run: a tight disk may still suffice, and the warning explains a later
# linker "Bus error" or "No space left on device". With `--end` (the run's exit trap) it
# prints the free disk and the size of target/ when the run ends, whatever its outcome.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
needed_gib="${CI_NEEDED_GIB:-15}"
avail_kib="$(df -Pk "$repo" | awk 'NR == 2 { print $4 }')"
avail_gib=$((avail_kib / 1024 / 1024))
if [[ "${1:-}" == "--end" ]]; then
  target="$(du -sh "$repo/target" 2>/dev/null | cut -f1 || true)"
  echo "ci: at the end ${avail_gib} GiB disk free, target/ holds ${target:-nothing}"
  exit 0
fi
mem_gib="$(awk '/^MemAvailable:/ { printf "%d", $2 / 1024 / 1024 }' /proc/meminfo)"
echo "ci: $(nproc) cores, ${mem_gib} GiB memory available, ${avail_gib} GiB disk free under $repo"
if ((avail_gib < needed_gib)); then
  echo "ci: WARNING: a clean run needs about ${needed_gib} GiB of disk; only ${avail_gib} GiB is free, so a build may fail (a linker 'Bus error' or 'No space left on device' is the sign)" >&2
fi
