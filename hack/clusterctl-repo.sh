#!/usr/bin/env bash
# Renders a clusterctl repository for this provider:
#   <out>/infrastructure-maas/<version>/{metadata.yaml,infrastructure-components.yaml,
#     cluster-template.yaml,cluster-template-{ipam,remediation,clusterclass}.yaml,
#     clusterclass-maas-default.yaml}
#   <out>/clusterctl.yaml   a clusterctl configuration naming it (`--config`)
# from deploy/clusterctl with kustomize. Publish the version folder as release assets, or point
# clusterctl at it: `clusterctl init --infrastructure maas --config <out>/clusterctl.yaml`.
# When hack/testenv/build.sh has rendered the Cluster API providers' components (core
# cluster-api, kubeadm bootstrap, kubeadm control plane; release images, no download), they are
# copied beside it, <out>/{cluster-api,bootstrap-kubeadm,control-plane-kubeadm}/<capi version>/,
# and clusterctl.yaml names them too, so that
#   clusterctl init --core cluster-api --bootstrap kubeadm --control-plane kubeadm \
#     --infrastructure maas --config <out>/clusterctl.yaml
# reads every provider from <out>; without them clusterctl fetches those three from GitHub.
# Usage: clusterctl-repo.sh [out (target/clusterctl-repo)] [version (v0.10.0)]
# Environment: KUBECTL (kubectl), OTHER_RELEASES (folders, separated by spaces, of other
# releases of infrastructure-maas, each as infrastructure-maas/<version>/, copied beside ours:
# CAPMAAS's, which hack/capmaas/build.sh renders into
# ${CAPMAAS_TESTENV_DIR:-.cache/testenv}/capmaas-components, or an earlier release of ours,
# which hack/previous-release.sh renders into .../previous-release/<label>/repository), CAPI_COMPONENTS (the rendered CAPI components,
# ${CAPMAAS_TESTENV_DIR:-.cache/testenv}/capi-components), CERT_MANAGER_EXTERNALLY_PROVISIONED
# (`true`: clusterctl.yaml says cert-manager is provided outside clusterctl, so clusterctl only
# checks its API, by creating a test Issuer and Certificate, for at most a minute, and never
# downloads it; for test clusters whose cert-manager CRDs are pre-installed).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(mkdir -p "${1:-$repo/target/clusterctl-repo}" && cd "${1:-$repo/target/clusterctl-repo}" && pwd)"
version="${2:-v0.10.0}"
kubectl="${KUBECTL:-kubectl}"
src="$repo/deploy/clusterctl"
capi="${CAPI_COMPONENTS:-${CAPMAAS_TESTENV_DIR:-$repo/.cache/testenv}/capi-components}"
dir="$out/infrastructure-maas/$version"

rm -rf "$dir" && mkdir -p "$dir"
cp "$src/metadata.yaml" "$dir/metadata.yaml"
"$kubectl" kustomize "$src" > "$dir/infrastructure-components.yaml"
"$kubectl" kustomize "$src/templates/default" > "$dir/cluster-template.yaml"
for flavor in ipam remediation clusterclass; do
  "$kubectl" kustomize "$src/templates/$flavor" > "$dir/cluster-template-$flavor.yaml"
done
# ClusterClasses: clusterctl adds clusterclass-<name>.yaml to a generated cluster that uses one.
for class in "$src"/templates/clusterclass-*/; do
  class="$(basename "$class")"
  "$kubectl" kustomize "$src/templates/$class" > "$dir/$class.yaml"
done
cat > "$out/clusterctl.yaml" <<CONFIG
providers:
- name: maas
  type: InfrastructureProvider
  url: file://$dir/infrastructure-components.yaml
CONFIG
echo "clusterctl repository for infrastructure-maas $version in $dir:"
ls "$dir"
# Other releases of infrastructure-maas beside ours (CAPMAAS's, for the switch from CAPMAAS; an
# earlier one of ours, for an upgrade), so that `clusterctl init --infrastructure maas:<theirs>`
# installs one and `clusterctl upgrade apply` moves it to this one. Only when asked.
for releases in ${OTHER_RELEASES:-}; do
  for release in "$releases"/infrastructure-maas/v*; do
    [[ -f "$release/infrastructure-components.yaml" && -f "$release/metadata.yaml" ]] \
      || { echo "clusterctl-repo: $release has no infrastructure-components.yaml and metadata.yaml" >&2; exit 1; }
    [[ "$(basename "$release")" != "$version" ]] \
      || { echo "clusterctl-repo: the other release $version would replace this one" >&2; exit 1; }
    rm -rf "$out/infrastructure-maas/$(basename "$release")"
    cp -r "$release" "$out/infrastructure-maas/"
    echo "infrastructure-maas $(basename "$release") (from $releases) in $out/infrastructure-maas/$(basename "$release")"
  done
done

# The Cluster API providers: name, type, provider label (the folder clusterctl requires),
# components file.
capi_version=""
if [[ -d "$capi/cluster-api" ]]; then
  capi_version="$(ls "$capi/cluster-api" | grep '^v' | sort -V | tail -1 || true)"
fi
if [[ -n "$capi_version" ]]; then
  for provider in cluster-api:CoreProvider:cluster-api:core-components.yaml \
      kubeadm:BootstrapProvider:bootstrap-kubeadm:bootstrap-components.yaml \
      kubeadm:ControlPlaneProvider:control-plane-kubeadm:control-plane-components.yaml; do
    IFS=: read -r name type label file <<<"$provider"
    from="$capi/$label/$capi_version"
    [[ -f "$from/$file" && -f "$from/metadata.yaml" ]] \
      || { echo "clusterctl-repo: $from has no $file and metadata.yaml (run hack/testenv/build.sh)" >&2; exit 1; }
    rm -rf "${out:?}/$label/$capi_version" && mkdir -p "$out/$label/$capi_version"
    cp "$from/$file" "$from/metadata.yaml" "$out/$label/$capi_version/"
    printf -- '- name: %s\n  type: %s\n  url: file://%s\n' "$name" "$type" "$out/$label/$capi_version/$file" >> "$out/clusterctl.yaml"
    echo "$type $name $capi_version in $out/$label/$capi_version"
  done
else
  echo "clusterctl-repo: no Cluster API components in $capi (hack/testenv/build.sh renders them);" \
    "clusterctl.yaml names infrastructure-maas only" >&2
fi
if [[ "${CERT_MANAGER_EXTERNALLY_PROVISIONED:-}" == true ]]; then
  printf 'cert-manager:\n  externallyProvisioned: true\n  timeout: 1m\n' >> "$out/clusterctl.yaml"
  echo "cert-manager: externally provisioned (clusterctl checks its API, never installs it)"
fi
