#!/usr/bin/env bash
# Copies cert-manager's CRDs (Issuer, ClusterIssuer, Certificate) out of its Go module into the
# test control plane's cache, so tests can server-side dry-run deploy/ (whose webhook
# certificate is a cert-manager Certificate). The module's CRD files are Helm templates whose
# template parts are YAML comments or quoted label values; those label lines are dropped.
# Does nothing when the cache already holds this version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${CAPMAAS_TESTENV_DIR:-$repo/.cache/testenv}"
CERT_MANAGER_VERSION="v1.16.2"
out="$cache/cert-manager-crds"

if [[ -f "$out/version" && "$(cat "$out/version")" == "$CERT_MANAGER_VERSION" ]]; then
  echo "testenv: cert-manager $CERT_MANAGER_VERSION CRDs up to date in $out"
  exit 0
fi
command -v go >/dev/null || { echo "testenv: Go is required to fetch the cert-manager CRDs" >&2; exit 1; }
mkdir -p "$cache"
# Downloaded outside any module so no go.mod or go.sum is touched.
dir="$(cd "$cache" && GOFLAGS= go mod download -json "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "$dir/deploy/crds" ]] || { echo "testenv: the cert-manager module has no deploy/crds" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"
for crd in issuers clusterissuers certificates; do
  # Keep comment lines (Helm control flow lives there); drop lines with a template value.
  sed -e '/^[[:space:]]*#/b' -e '/{{/d' "$dir/deploy/crds/crd-$crd.yaml" > "$out/$crd.yaml"
done
echo "$CERT_MANAGER_VERSION" > "$out/version"
echo "testenv: cert-manager $CERT_MANAGER_VERSION CRDs in $out: $(ls "$out" | grep yaml | tr '\n' ' ')"
