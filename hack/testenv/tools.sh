#!/usr/bin/env bash
# Builds the packaging tests' tools into the test control plane's cache: clusterctl from the
# same Cluster API release as the test control plane, argocd-health (Argo CD's Lua health
# script runner, tools/argocd-health) and actionlint (actionlint/, for the release workflow);
# copies Argo CD's CRDs (Application, ApplicationSet,
# AppProject) out of its Go module, and the kubeadm bootstrap and control-plane CRDs out of the
# Cluster API module, so tests can server-side dry-run deploy/argocd and the cluster templates
# clusterctl generates. Does
# nothing when the cache matches the pins. A separate script from build.sh so that changing
# these tools never rebuilds the control plane.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${CAPMAAS_TESTENV_DIR:-$repo/.cache/testenv}"
# The newest Argo CD release the machine's Go (1.26) can download; v3.6 needs Go 1.27.
ARGOCD_VERSION="v3.5.7"
CLUSTERCTL_VERSION="v1.14.2"

stamp="$(cat "$0" "$here"/tools/go.{mod,sum} "$here"/tools/argocd-health/*.go "$here"/actionlint/go.{mod,sum} | sha256sum | cut -c1-16)"
if [[ -f "$cache/tools-stamp" && "$(cat "$cache/tools-stamp")" == "$stamp" \
      && -x "$cache/bin/clusterctl" && -x "$cache/bin/argocd-health" && -d "$cache/argocd-crds" \
      && -x "$cache/bin/actionlint" \
      && -d "$cache/kubeadm-crds" ]]; then
  echo "testenv: clusterctl $CLUSTERCTL_VERSION, argocd-health and Argo CD $ARGOCD_VERSION CRDs up to date in $cache"
  exit 0
fi
command -v go >/dev/null || { echo "testenv: Go is required to build clusterctl and argocd-health" >&2; exit 1; }
mkdir -p "$cache/bin"
rm -f "$cache/tools-stamp"
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"

echo "testenv: building clusterctl $CLUSTERCTL_VERSION"
pkg=sigs.k8s.io/cluster-api/version
ldflags="-s -w -X $pkg.gitVersion=$CLUSTERCTL_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=14 \
  -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean \
  -X $pkg.buildDate=2026-01-01T00:00:00Z"
(cd "$here/tools" && go build -trimpath -ldflags "$ldflags" -o "$cache/bin/clusterctl.tmp" sigs.k8s.io/cluster-api/cmd/clusterctl)
mv "$cache/bin/clusterctl.tmp" "$cache/bin/clusterctl"

echo "testenv: building argocd-health"
(cd "$here/tools" && go build -trimpath -ldflags "-s -w" -o "$cache/bin/argocd-health.tmp" ./argocd-health)
mv "$cache/bin/argocd-health.tmp" "$cache/bin/argocd-health"

echo "testenv: building actionlint"
(cd "$here/actionlint" && go build -trimpath -ldflags "-s -w" -o "$cache/bin/actionlint.tmp" github.com/rhysd/actionlint/cmd/actionlint)
mv "$cache/bin/actionlint.tmp" "$cache/bin/actionlint"

echo "testenv: fetching Argo CD $ARGOCD_VERSION CRDs"
# Downloaded outside any module so no go.mod or go.sum is touched.
dir="$(cd "$cache" && GOFLAGS= go mod download -json "github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "$dir/manifests/crds" ]] || { echo "testenv: the Argo CD module has no manifests/crds" >&2; exit 1; }
rm -rf "$cache/argocd-crds" && mkdir -p "$cache/argocd-crds"
cp "$dir"/manifests/crds/{application,applicationset,appproject}-crd.yaml "$cache/argocd-crds/"
chmod u+w "$cache"/argocd-crds/*.yaml

echo "testenv: copying the kubeadm CRDs of Cluster API $CLUSTERCTL_VERSION"
capi_dir="$(cd "$cache" && GOFLAGS= go mod download -json "sigs.k8s.io/cluster-api@$CLUSTERCTL_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
rm -rf "$cache/kubeadm-crds" && mkdir -p "$cache/kubeadm-crds"
cp "$capi_dir"/bootstrap/kubeadm/config/crd/bases/*.yaml "$capi_dir"/controlplane/kubeadm/config/crd/bases/*.yaml "$cache/kubeadm-crds/"
chmod u+w "$cache"/kubeadm-crds/*.yaml

echo "$stamp" > "$cache/tools-stamp"
echo "testenv: clusterctl $CLUSTERCTL_VERSION, argocd-health, actionlint, Argo CD $ARGOCD_VERSION CRDs in $cache"
