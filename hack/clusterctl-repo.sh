#!/usr/bin/env bash
# Renders a clusterctl repository for this provider:
#   <out>/infrastructure-maas/<version>/{metadata.yaml,infrastructure-components.yaml,
#     cluster-template.yaml,cluster-template-ipam.yaml,cluster-template-remediation.yaml}
#   <out>/clusterctl.yaml   a clusterctl configuration naming it (`--config`)
# from deploy/clusterctl with kustomize. Publish the version folder as release assets, or point
# clusterctl at it: `clusterctl init --infrastructure maas --config <out>/clusterctl.yaml`.
# Usage: clusterctl-repo.sh [out (target/clusterctl-repo)] [version (v0.10.0)]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(mkdir -p "${1:-$repo/target/clusterctl-repo}" && cd "${1:-$repo/target/clusterctl-repo}" && pwd)"
version="${2:-v0.10.0}"
kubectl="${KUBECTL:-kubectl}"
src="$repo/deploy/clusterctl"
dir="$out/infrastructure-maas/$version"

rm -rf "$dir" && mkdir -p "$dir"
cp "$src/metadata.yaml" "$dir/metadata.yaml"
"$kubectl" kustomize "$src" > "$dir/infrastructure-components.yaml"
"$kubectl" kustomize "$src/templates/default" > "$dir/cluster-template.yaml"
for flavor in ipam remediation; do
  "$kubectl" kustomize "$src/templates/$flavor" > "$dir/cluster-template-$flavor.yaml"
done
cat > "$out/clusterctl.yaml" <<CONFIG
providers:
- name: maas
  type: InfrastructureProvider
  url: file://$dir/infrastructure-components.yaml
CONFIG
echo "clusterctl repository for infrastructure-maas $version in $dir:"
ls "$dir"
