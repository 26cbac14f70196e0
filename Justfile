# Every task a person runs. `bash hack/just <task>` works without just installed.

set shell := ["bash", "-euo", "pipefail", "-c"]

# List the tasks.
default:
    @{{just_executable()}} --list

# Build the test control plane (etcd, kube-apiserver, kube-controller-manager, CAPI CRDs), fetch
# cert-manager's CRDs (for dry-runs of deploy/), and build clusterctl and argocd-health with
# Argo CD's CRDs (packaging tests) into .cache/testenv.
testenv:
    bash hack/testenv/build.sh
    bash hack/testenv/cert-manager.sh
    bash hack/testenv/tools.sh

# Create the project-local Python virtualenv with python-libmaas (third-party MAAS client tests).
libmaas:
    bash hack/python-libmaas/setup-venv.sh

# Regenerate the CRDs in deploy/crds and docs/crd-reference.md from the API types.
crds:
    cargo run -q -p capmaas-api --bin crdgen

# Regenerate deploy/base/webhook-server/webhook-configurations.yaml from webhook-server's table of kinds.
webhooks:
    cargo run -q -p webhook-server --bin webhookgen

# `skopeo copy oci-archive:<archive>:<TAG> docker://<REGISTRY>/<component>:<TAG>` pushes one of
# the archives this writes (hack/images.sh: static release programs FROM scratch, CA bundle,
# non-root user, OCI labels, an SPDX SBOM each; TAG defaults to v<workspace version>).
# The six OCI images, built without a container daemon or base image, checked, in target/images/.
images TAG="" REGISTRY="ghcr.io/capmaas-rs":
    bash hack/images.sh {{ if TAG == "" { "" } else { "--tag " + TAG } }} --registry {{REGISTRY}} --check

# A clusterctl repository (metadata, infrastructure-components.yaml, cluster templates) rendered
# from deploy/clusterctl into target/clusterctl-repo/infrastructure-maas/<VERSION>/.
clusterctl-repo VERSION="v0.10.0":
    bash hack/clusterctl-repo.sh target/clusterctl-repo {{VERSION}}

# Format the code.
fmt:
    cargo fmt --all

# Formatting and clippy, as CI runs them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo xtask layout

# Everything needed, then every test: unit, integration against a real API server, simulator,
# python-libmaas, and the end-to-end scenarios (which run the built binaries).
test: testenv libmaas
    cargo build --workspace --bins
    cargo test --workspace --no-fail-fast

# Only the end-to-end scenarios: CAPI core, our binaries, maas-sim, two API servers.
e2e: testenv
    cargo build --workspace --bins
    cargo test -p capmaas-e2e --no-fail-fast

# An upgrade from the previous release to this tree, as docs/install.md "Upgrading" runs it
# (e2e/tests/upgrade.rs). The previous release's programs are built once (a few minutes) into
# the cache by hack/previous-release.sh; not part of `just test`.
upgrade-test: testenv
    bash hack/previous-release.sh
    cargo build --workspace --bins
    cargo test -p capmaas-e2e --test upgrade -- --ignored

# A 3 + 5 node cluster on 20 simulated MAAS servers, shown live until ready, then a worker
# rebooted back by remediation and an image upgrade with node reuse; Ctrl-C stops it.
demo: testenv
    cargo build -q --workspace --bins
    cargo run -q -p capmaas-e2e --bin demo

# Benchmarks (numbers are printed, never asserted): MAAS client and simulator throughput,
# gateway MAAS calls and memory, test control plane start-up, and provisioning end to end:
# 200 machines with 0–2 s, 30 s and 120 s simulated deployments, 50 instant ones and 1,000
# with 0–2 s (how cost grows), each size
# also with a null provider (the ceiling), then 200 × 0–2 s against a MAAS with the `region`
# latency profile (docs/maas-sim.md), then a mass deletion (200 machines deleted at once while
# 10 more are provisioned); release binaries; CAPMAAS_BENCH_SIZES and CAPMAAS_BENCH_DEPLOYS
# narrow it, CAPMAAS_BENCH_RUN=deletion runs the deletion alone (docs/e2e.md); tables in
# e2e/bench-results.md.
bench: testenv
    cargo bench -p maas-api-client --bench throughput
    cargo bench -p maas-client --bench gateway
    cargo bench -p data-controller --bench ipam
    cargo bench -p data-controller --bench claims
    cargo bench -p remediation-controller --bench remediations
    cargo bench -p webhook-server --bench admission
    cargo run -q -p capmaas-testenv --example measure
    cargo build --release --workspace --bins
    CAPMAAS_BIN_DIR=target/release cargo run --release -q -p capmaas-e2e --bin bench
    CAPMAAS_BENCH_MAAS=region CAPMAAS_BENCH_SIZES=200 CAPMAAS_BENCH_DEPLOYS=0 CAPMAAS_BIN_DIR=target/release cargo run --release -q -p capmaas-e2e --bin bench
    CAPMAAS_BENCH_GATEWAY_ARGS=--maas-workload-annotations CAPMAAS_BENCH_SIZES=200 CAPMAAS_BENCH_DEPLOYS=0 CAPMAAS_BIN_DIR=target/release cargo run --release -q -p capmaas-e2e --bin bench
    CAPMAAS_BENCH_RUN=deletion CAPMAAS_BENCH_SIZES=200 CAPMAAS_BIN_DIR=target/release cargo run --release -q -p capmaas-e2e --bin bench

# Chaos run (issue #10): 200 machines under kills and MAAS faults, then 100, then none; fails
# on any harm. A random controller is SIGKILLed and restarted every 5 s; MAAS fails 10 % of
# calls with 5xx, times out 2 %, commits then fails 2 % and goes away for 60 s. Release
# binaries; CHAOS_MACHINES, CHAOS_SCALE_TO, CHAOS_KILL_SECONDS, CHAOS_OUTAGE_SECONDS,
# CHAOS_SEED change the size; process logs are copied to target/chaos-logs.
chaos: testenv
    cargo build --release --workspace --bins
    CAPMAAS_BIN_DIR=target/release cargo run --release -q -p capmaas-e2e --bin chaos

# Run the MAAS simulator in the foreground with 20 machines (Ctrl-C stops it).
sim *ARGS:
    cargo run -q -p maas-sim -- --machines 20 --zones z1,z2,z3 {{ARGS}}

# What CI runs.
ci: lint test
