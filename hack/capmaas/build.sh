#!/usr/bin/env bash
# Builds spectrocloud's CAPMAAS v0.9.0 manager from the sources beside this script (README.md)
# into the test control plane's cache, and renders its clusterctl components as its release
# does (`kustomize build config/default`, the release image set), with its metadata.yaml and its
# default cluster template, laid out as a clusterctl local repository:
#   <cache>/capmaas-components/infrastructure-maas/v0.9.0/{infrastructure-components.yaml,
#     metadata.yaml,cluster-template.yaml}
# which hack/clusterctl-repo.sh copies beside ours. Called by hack/testenv/build.sh; does
# nothing when the cache matches these sources.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${CAPMAAS_TESTENV_DIR:-$repo/.cache/testenv}"
VERSION=v0.9.0
# The image `make release-manifests` names (RELEASE_CONTROLLER_IMG); the e2e harness runs
# capmaas-manager for it.
IMAGE="us-east1-docker.pkg.dev/spectro-public/release/cluster-api-provider-maas/cluster-api-provider-maas-controller:$VERSION"
kubectl="$cache/bin/kubectl"
out="$cache/capmaas-components/infrastructure-maas/$VERSION"

stamp="$( (cat "$0"; cd "$here" && find cluster-api-provider-maas maas-client-go -type f | LC_ALL=C sort | xargs cat) | sha256sum | cut -c1-16)"
if [[ -f "$cache/capmaas-stamp" && "$(cat "$cache/capmaas-stamp")" == "$stamp" \
      && -x "$cache/bin/capmaas-manager" && -f "$out/infrastructure-components.yaml" ]]; then
  echo "capmaas: CAPMAAS $VERSION manager and components up to date in $cache"
  exit 0
fi
[[ -x "$kubectl" ]] || { echo "capmaas: $kubectl is missing (hack/testenv/build.sh builds it first)" >&2; exit 1; }
rm -f "$cache/capmaas-stamp"
start=$(date +%s)

echo "capmaas: building the CAPMAAS $VERSION manager (spectrocloud/cluster-api-provider-maas)"
# -mod=readonly: CAPMAAS's own go.mod and go.sum, plus the replace of the client (README.md).
(cd "$here/cluster-api-provider-maas" \
  && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" \
     go build -trimpath -ldflags "-s -w" -o "$cache/bin/capmaas-manager.tmp" .)
mv "$cache/bin/capmaas-manager.tmp" "$cache/bin/capmaas-manager"

echo "capmaas: rendering the CAPMAAS $VERSION clusterctl components"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$here/cluster-api-provider-maas/config" "$work/"
sed -i -e "s@image: .*@image: $IMAGE@" "$work/config/default/manager_image_patch.yaml"
sed -i -e 's@imagePullPolicy: .*@imagePullPolicy: IfNotPresent@' "$work/config/default/manager_pull_policy.yaml"
rm -rf "$out" && mkdir -p "$out"
# kustomize warns about CAPMAAS's deprecated fields (vars, bases, commonLabels); it renders them.
"$kubectl" kustomize "$work/config/default" 2>/dev/null > "$out/infrastructure-components.yaml"
cp "$here/cluster-api-provider-maas/metadata.yaml" "$out/metadata.yaml"
cp "$here/cluster-api-provider-maas/templates/cluster-template.yaml" "$out/cluster-template.yaml"

echo "$stamp" > "$cache/capmaas-stamp"
echo "capmaas: built in $(( $(date +%s) - start ))s: $cache/bin/capmaas-manager, $out"
