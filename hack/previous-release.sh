#!/usr/bin/env bash
# An earlier release of this provider, for the upgrade test (e2e/tests/upgrade.rs, `just
# upgrade-test`): the six programs and the clusterctl release of one commit, built once into
#   ${CAPMAAS_TESTENV_DIR:-.cache/testenv}/previous-release/<label>/
#     bin/<component>                              its programs (cargo, dev profile)
#     repository/infrastructure-maas/<label>/...   its clusterctl release, rendered by its own
#                                                  hack/clusterctl-repo.sh, images tagged <label>
# The e2e installation runs an image tagged <label> from bin/ (capmaas_e2e::installed).
#
# No release of ours was published before v0.10.0, so the earlier release is a commit of main
# labelled as a release candidate: PREVIOUS_COMMIT (default below: main before secure metrics,
# the metrics certificate, the writer marks of the admission policies and the data-controller
# lock fix), PREVIOUS_LABEL (v0.10.0-rc.0, which sorts before this tree's v0.10.0). When a
# release exists, its tag goes here.
#
# Usage: previous-release.sh   (nothing to do when the stamp names the same commit and label)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${CAPMAAS_TESTENV_DIR:-$repo/.cache/testenv}"
commit="${PREVIOUS_COMMIT:-ed27d75a4d5e9eef27ed1fc7445eb03ca023a7a6}"
label="${PREVIOUS_LABEL:-v0.10.0-rc.0}"
out="$cache/previous-release/$label"
stamp="$out/.stamp"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$commit" ]]; then
  echo "previous release $label ($commit) in $out"
  exit 0
fi

git -C "$repo" cat-file -e "$commit^{commit}" \
  || { echo "previous-release: commit $commit is not in this clone" >&2; exit 1; }
rm -rf "$out"
src="$out/src"
mkdir -p "$src" "$out/bin"
git -C "$repo" archive "$commit" | tar -x -C "$src"

# Its own target folder: its workspace crates differ from this tree's, and sharing target/
# would swap the programs under target/debug.
echo "previous-release: building $commit's programs (once)"
(cd "$src" && cargo build --locked --workspace --bins --target-dir "$repo/target/previous-release")
for component in maas-client cluster-controller machine-controller data-controller remediation-controller webhook-server; do
  install -m 0755 "$repo/target/previous-release/debug/$component" "$out/bin/$component"
done

# Its clusterctl release, as it rendered it; only the image tags name the label, as a release
# built from that commit would have.
KUBECTL="${KUBECTL:-$cache/bin/kubectl}" CAPI_COMPONENTS="$out/no-capi-components" \
  bash "$src/hack/clusterctl-repo.sh" "$out/repository" "$label" >/dev/null
components="$out/repository/infrastructure-maas/$label/infrastructure-components.yaml"
sed -i -E "s#(ghcr\.io/capmaas-rs/[a-z-]+):v[0-9]+\.[0-9]+\.[0-9]+#\1:$label#g" "$components"
grep -q "ghcr.io/capmaas-rs/maas-client:$label" "$components" \
  || { echo "previous-release: no image tagged $label in $components" >&2; exit 1; }
rm -f "$out/repository/clusterctl.yaml"
rm -rf "$src"
echo "$commit" > "$stamp"
echo "previous release $label ($commit) in $out"
