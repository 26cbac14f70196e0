#!/usr/bin/env bash
# Copies the sources of spectrocloud's CAPMAAS v0.9.0 manager and of the MAAS client it uses
# into hack/capmaas/{cluster-api-provider-maas,maas-client-go}, from bare git mirrors of the two
# repositories. Run once by hand when the pin changes; the copies are committed, because the Go
# module proxy refuses both modules (README.md). hack/testenv/build.sh builds from the copies.
# Usage: import.sh <mirror of spectrocloud/cluster-api-provider-maas> <mirror of spectrocloud/maas-client-go>
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
capmaas_git="${1:?mirror of spectrocloud/cluster-api-provider-maas}"
client_git="${2:?mirror of spectrocloud/maas-client-go}"
# v0.9.0 of CAPMAAS; the newest maas-client-go commit the mirror has (its go.mod is the one
# v0.1.7-beta1 has, by CAPMAAS's go.sum; its code is older: README.md).
CAPMAAS_COMMIT=030afed04585cc209b6ec40fe08f8357d37b3588
CLIENT_COMMIT=c51a64cc3e1038f59cff8b8f39db30fa5a05850c
LXD_INITIALIZER_IMAGE=us-east1-docker.pkg.dev/spectro-images/cluster-api/lxd-initializer:v0.9.0

git --git-dir="$capmaas_git" tag --points-at "$CAPMAAS_COMMIT" | grep -qx v0.9.0 \
  || { echo "import: $CAPMAAS_COMMIT is not tagged v0.9.0 in $capmaas_git" >&2; exit 1; }

rm -rf "$here/cluster-api-provider-maas" "$here/maas-client-go"
mkdir -p "$here/cluster-api-provider-maas" "$here/maas-client-go"
# What the manager is built and installed from: its Go packages (tests left out), go.mod and
# go.sum, the kustomize config that renders its clusterctl components, its default cluster
# template and metadata, and the licence.
git --git-dir="$capmaas_git" archive "$CAPMAAS_COMMIT" \
    main.go go.mod go.sum LICENSE metadata.yaml api controllers pkg config templates/cluster-template.yaml \
  | tar -x -C "$here/cluster-api-provider-maas" --exclude='*_test.go' --exclude='pkg/maas/client/mock'
git --git-dir="$client_git" archive "$CLIENT_COMMIT" go.mod go.sum LICENSE maasclient \
  | tar -x -C "$here/maas-client-go" --exclude='*_test.go'

cd "$here/cluster-api-provider-maas"
# What CAPMAAS's Makefile generates before `go build` (the LXD initializer DaemonSet with its
# release image), and the local copy of the client instead of the refused module.
sed "s|\${LXD_INITIALIZER_IMAGE}|$LXD_INITIALIZER_IMAGE|g" \
  controllers/templates/lxd_initializer_ds.yaml > controllers/templates/lxd_initializer_ds.yaml.processed
printf '\nreplace github.com/spectrocloud/maas-client-go => ../maas-client-go\n' >> go.mod
echo "import: CAPMAAS $CAPMAAS_COMMIT and maas-client-go $CLIENT_COMMIT copied into $here"
du -sh "$here/cluster-api-provider-maas" "$here/maas-client-go"
