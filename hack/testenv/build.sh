#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-controller-manager) and the
# Cluster API managers (core, kubeadm bootstrap, kubeadm control plane) from the Go wrapper
# modules beside this script (and, through hack/capmaas/build.sh, the peer provider CAPMAAS), copies the Cluster API CRDs out of the CAPI module and renders
# the three CAPI providers' clusterctl components (as CAPI's `make release-manifests` does)
# into a git-ignored cache folder. Does nothing when the cache already matches the pinned
# versions. Prints what it built.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${CAPMAAS_TESTENV_DIR:-$repo/.cache/testenv}"

KUBE_VERSION="v1.36.3"
ETCD_VERSION="v3.6.16"
CAPI_VERSION="v1.14.2"

# The stamp changes whenever a pin, a wrapper module or this script changes.
stamp="$(cat "$0" "$here"/{kube,etcd,capi,kubelet}/go.{mod,sum} "$here/kubelet/main.go" | sha256sum | cut -c1-16)"

if [[ -f "$cache/stamp" && "$(cat "$cache/stamp")" == "$stamp" \
      && -x "$cache/bin/kube-apiserver" && -x "$cache/bin/kube-controller-manager" && -x "$cache/bin/kubectl" \
      && -x "$cache/bin/etcd" && -x "$cache/bin/kubelet-portforward" && -x "$cache/bin/capi-manager" && -x "$cache/bin/capi-kubeadm-bootstrap-manager" \
      && -x "$cache/bin/capi-kubeadm-control-plane-manager" && -d "$cache/capi-crds" && -d "$cache/capi-components" ]]; then
  echo "testenv: cache up to date in $cache (kube-apiserver $KUBE_VERSION, etcd $ETCD_VERSION, CAPI CRDs $CAPI_VERSION)"
  # The peer provider CAPMAAS, for the switch-over scenario (its own stamp).
  exec bash "$repo/hack/capmaas/build.sh"
fi

command -v go >/dev/null || { echo "testenv: Go is required to build the test control plane" >&2; exit 1; }
mkdir -p "$cache/bin"
rm -f "$cache/stamp"
# -mod=readonly: the committed go.mod/go.sum are complete; a build never edits them.
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
start=$(date +%s)

minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor \
  -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean \
  -X $pkg.buildDate=2026-01-01T00:00:00Z"

for cmd in kube-apiserver kube-controller-manager kubectl; do
  echo "testenv: building $cmd $KUBE_VERSION"
  (cd "$here/kube" && go build -trimpath -ldflags "$ldflags" -o "$cache/bin/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
  mv "$cache/bin/$cmd.tmp" "$cache/bin/$cmd"
done

echo "testenv: building etcd $ETCD_VERSION"
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$cache/bin/etcd.tmp" go.etcd.io/etcd/server/v3)
mv "$cache/bin/etcd.tmp" "$cache/bin/etcd"

echo "testenv: building kubelet-portforward (the kubelet's port-forward streaming, k8s.io/cri-streaming $KUBE_VERSION)"
(cd "$here/kubelet" && go build -trimpath -ldflags "-s -w" -o "$cache/bin/kubelet-portforward.tmp" .)
mv "$cache/bin/kubelet-portforward.tmp" "$cache/bin/kubelet-portforward"

capi_pkg=sigs.k8s.io/cluster-api/version
capi_ldflags="-s -w -X $capi_pkg.gitVersion=$CAPI_VERSION -X $capi_pkg.gitMajor=1 -X $capi_pkg.gitMinor=14 \
  -X $capi_pkg.gitCommit=0000000000000000000000000000000000000000 -X $capi_pkg.gitTreeState=clean \
  -X $capi_pkg.buildDate=2026-01-01T00:00:00Z"
# binary name, package (all three are `tool`s of the wrapper module, which keeps go.sum complete).
for manager in capi-manager:core capi-kubeadm-bootstrap-manager:bootstrap/kubeadm \
               capi-kubeadm-control-plane-manager:controlplane/kubeadm; do
  name="${manager%%:*}"; pkg="sigs.k8s.io/cluster-api/${manager#*:}"
  echo "testenv: building $name ($pkg $CAPI_VERSION)"
  (cd "$here/capi" && go build -trimpath -ldflags "$capi_ldflags" -o "$cache/bin/$name.tmp" "$pkg")
  mv "$cache/bin/$name.tmp" "$cache/bin/$name"
done

echo "testenv: fetching Cluster API $CAPI_VERSION CRDs"
# Downloaded outside any module so no go.mod or go.sum is touched.
capi_dir="$(cd "$cache" && GOFLAGS= go mod download -json "sigs.k8s.io/cluster-api@$CAPI_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "$capi_dir/core/config/crd/bases" ]] || { echo "testenv: CAPI module has no core/config/crd/bases" >&2; exit 1; }
rm -rf "$cache/capi-crds" && mkdir -p "$cache/capi-crds"
# All core CRDs: the core manager watches MachineDrainRules, ClusterResourceSets and the
# rest even when the tests only use Clusters, Machines and the IPAM kinds.
cp "$capi_dir"/core/config/crd/bases/*.yaml "$cache/capi-crds/"
chmod u+w "$cache"/capi-crds/*.yaml
rm -rf "$cache/capi-webhooks" && mkdir -p "$cache/capi-webhooks"
cp "$capi_dir/core/config/webhook/manifests.yaml" "$cache/capi-webhooks/core.yaml"

echo "testenv: rendering the Cluster API $CAPI_VERSION clusterctl components"
# As CAPI's `make release-manifests` (after `manifest-modification`): each provider's
# config/default built with kustomize, its image set to the release image
# (registry.k8s.io/cluster-api/<name>:<tag>, pull policy IfNotPresent), and the module's
# metadata.yaml beside it. Laid out as a clusterctl local repository,
# capi-components/<provider-label>/<version>/<components file>, which hack/clusterctl-repo.sh
# copies into the repository it renders.
grep -A2 -E '^[[:space:]]*- major: 1$' "$capi_dir/metadata.yaml" | tr -d ' \n' | grep -q 'minor:14contract:v1beta2' \
  || { echo "testenv: CAPI $CAPI_VERSION metadata.yaml does not map v1.14 to contract v1beta2" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
rm -rf "$cache/capi-components"
# label, config folder, components file, image name
for provider in cluster-api:core:core-components.yaml:cluster-api-controller \
    bootstrap-kubeadm:bootstrap/kubeadm:bootstrap-components.yaml:kubeadm-bootstrap-controller \
    control-plane-kubeadm:controlplane/kubeadm:control-plane-components.yaml:kubeadm-control-plane-controller; do
  IFS=: read -r label src file image <<<"$provider"
  [[ -f "$capi_dir/$src/config/default/kustomization.yaml" ]] || { echo "testenv: CAPI module has no $src/config/default" >&2; exit 1; }
  mkdir -p "$work/$src" && cp -r "$capi_dir/$src/config" "$work/$src/" && chmod -R u+w "$work/$src"
  sed -i -e "s@image: .*@image: registry.k8s.io/cluster-api/$image:$CAPI_VERSION@" "$work/$src/config/default/manager_image_patch.yaml"
  sed -i -e 's@imagePullPolicy: .*@imagePullPolicy: IfNotPresent@' "$work/$src/config/default/manager_pull_policy.yaml"
  out="$cache/capi-components/$label/$CAPI_VERSION"
  mkdir -p "$out"
  "$cache/bin/kubectl" kustomize "$work/$src/config/default" > "$out/$file"
  cp "$capi_dir/metadata.yaml" "$out/metadata.yaml" && chmod u+w "$out/metadata.yaml"
done

echo "$stamp" > "$cache/stamp"
echo "testenv: built in $(( $(date +%s) - start ))s into $cache:"
"$cache/bin/kube-apiserver" --version
"$cache/bin/kube-controller-manager" --version
echo "kubectl $("$cache/bin/kubectl" version --client -o json | sed -n 's/.*"gitVersion": "\(.*\)",/\1/p' | sed -n 1p)"
"$cache/bin/etcd" --version | sed -n 1p
echo "capi-manager, capi-kubeadm-bootstrap-manager, capi-kubeadm-control-plane-manager (sigs.k8s.io/cluster-api) $CAPI_VERSION"
echo "  CAPI $CAPI_VERSION CRDs: $(ls "$cache/capi-crds" | tr '\n' ' ')"
echo "  CAPI $CAPI_VERSION clusterctl components: $(cd "$cache/capi-components" && ls -d */*/* | tr '\n' ' ')"
bash "$repo/hack/capmaas/build.sh"
