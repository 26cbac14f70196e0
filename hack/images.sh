#!/usr/bin/env bash
# Builds the six OCI images without a container daemon and without pulling a base image
# (docs/install.md, "Images"). Each image is FROM scratch: one program at /manager, the CA
# bundle, an /etc/passwd naming the non-root user 65532, and an SPDX SBOM of the program's
# crates; the OCI config runs /manager as 65532:65532 and carries the
# org.opencontainers.image.* labels. umoci (Debian's package, installed here when missing)
# assembles each image; the result is an OCI archive per component and architecture in
# target/images/, next to the SBOM.
#
#   hack/images.sh [--profile release|dev] [--arch amd64|arm64]... [--tag vX.Y.Z] [--registry R]
#                  [--check] [--no-sbom] [component...]
#
# --profile release (the default, and what a release pushes): the program is built with
#   `cargo build --release` and glibc linked statically (`-C target-feature=+crt-static`), so
#   the image needs no libc. TLS is rustls: no OpenSSL.
# --profile dev: the program CI already built (target/debug), dynamically linked, with the
#   shared libraries `ldd` names copied beside it. CI builds one image this way and checks it:
#   the packaging is the same, only the program differs.
# --arch (repeatable; amd64 when not given): arm64 is cross-compiled for
#   aarch64-unknown-linux-gnu (release profile only) with Debian's cross gcc and glibc
#   (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross) and rustup's standard library for the
#   target, all installed here when missing. One archive per architecture; the release
#   workflow joins them into one multi-arch tag.
# --check: unpack each archive again and prove it: the config's user is not root, the
#   entrypoint runs (`/manager --version` in a chroot of the unpacked root filesystem, or under
#   qemu-aarch64-static for arm64) and prints the component's name, and the size is reported.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

profile=release
registry=ghcr.io/capmaas-rs
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
tag="v${version}"
check=false
sbom=true
components=()
arches=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --arch) arches+=("$2"); shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --registry) registry="$2"; shift 2 ;;
    --check) check=true; shift ;;
    --no-sbom) sbom=false; shift ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) components+=("$1"); shift ;;
  esac
done
if [[ ${#components[@]} -eq 0 ]]; then
  components=(maas-client cluster-controller machine-controller data-controller remediation-controller webhook-server)
fi
if [[ ${#arches[@]} -eq 0 ]]; then
  arches=(amd64)
fi
out="$repo/target/images"
mkdir -p "$out"

apt_install() { # packages: installed from Debian's packages when a command is missing
  # A fresh machine's package lists may be missing or stale: refresh them once if needed.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2 \
    || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2; }
}
command -v umoci >/dev/null 2>&1 || apt_install umoci

revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
created="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# The programs of one architecture: the folder they are in, after building them if needed.
programs_for() { # arch
  local arch="$1" target
  case "$arch" in
    amd64) target=x86_64-unknown-linux-gnu ;;
    arm64) target=aarch64-unknown-linux-gnu ;;
    *) echo "--arch is amd64 or arm64" >&2; exit 2 ;;
  esac
  if [[ "$profile" == dev ]]; then
    [[ "$arch" == amd64 ]] || { echo "--profile dev is the host's amd64 build only" >&2; exit 2; }
    echo "$repo/target/debug"
    return
  fi
  [[ "$profile" == release ]] || { echo "--profile is release or dev" >&2; exit 2; }
  local packages=()
  for c in "${components[@]}"; do packages+=(-p "$c"); done
  if [[ "$arch" == arm64 ]]; then
    command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || apt_install gcc-aarch64-linux-gnu libc6-dev-arm64-cross
    command -v qemu-aarch64-static >/dev/null 2>&1 || [[ "$check" != true ]] || apt_install qemu-user-static
    rustup target list --installed | grep -qx "$target" || rustup target add "$target" >&2
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
    export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
  fi
  RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --release --locked --target "$target" --target-dir "$repo/target/static" "${packages[@]}" --bins >&2
  echo "$repo/target/static/$target/release"
}

sbom_of() { # component, file: the SPDX SBOM of the component's crates, from cargo-sbom
  local component="$1" file="$2" tools="$repo/.cache/tools"
  if [[ ! -x "$tools/bin/cargo-sbom" ]]; then
    echo "installing cargo-sbom into $tools" >&2
    cargo install --quiet --locked --root "$tools" cargo-sbom@0.10.0 >&2
  fi
  "$tools/bin/cargo-sbom" sbom --cargo-package "$component" --output-format spdx_json_2_3 > "$file"
}

for arch in "${arches[@]}"; do
bindir="$(programs_for "$arch")"
for component in "${components[@]}"; do
  program="$bindir/$component"
  [[ -x "$program" ]] || { echo "no program $program (build it first)" >&2; exit 1; }
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  root="$work/rootfs"
  mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/usr/share/doc/$component"
  install -m 0755 "$program" "$root/manager"
  if [[ "$profile" == release ]]; then
    # The line tables stay in target/; the image keeps the symbols (a backtrace names its
    # functions) and is a fraction of the size.
    strip_tool=strip
    [[ "$arch" == arm64 ]] && strip_tool=aarch64-linux-gnu-strip
    "$strip_tool" --strip-debug "$root/manager"
  fi
  if [[ "$profile" == dev ]]; then
    # The shared libraries the program loads, at the paths it loads them from.
    ldd "$program" | awk '/=> \//{print $3} /^[ \t]*\/.*ld-linux/{print $1}' | while read -r lib; do
      install -D -m 0755 "$lib" "$root$lib"
    done
  elif readelf --program-headers "$program" | grep -q INTERP; then
    # A program interpreter (ld-linux) is what a dynamically linked program asks for.
    echo "$program is not statically linked" >&2
    exit 1
  fi
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$root/etc/group"
  chmod 1777 "$root/tmp"
  if [[ "$sbom" == true ]]; then
    sbom_of "$component" "$out/${component}_${tag}.spdx.json"
    cp "$out/${component}_${tag}.spdx.json" "$root/usr/share/doc/$component/sbom.spdx.json"
  fi

  layout="$work/layout"
  image="$layout:$tag"
  umoci init --layout "$layout"
  umoci new --image "$image"
  umoci unpack --rootless --image "$image" "$work/bundle" >/dev/null
  cp -a "$root/." "$work/bundle/rootfs/"
  umoci repack --image "$image" "$work/bundle"
  labels=(
    "org.opencontainers.image.title=$component"
    "org.opencontainers.image.description=Cluster API provider for MAAS: $component"
    "org.opencontainers.image.version=$tag"
    "org.opencontainers.image.revision=$revision"
    "org.opencontainers.image.created=$created"
    "org.opencontainers.image.source=https://github.com/capmaas-rs/capmaas-rs"
    "org.opencontainers.image.licenses=Apache-2.0"
    "org.opencontainers.image.ref.name=$registry/$component:$tag"
  )
  config_args=(--os linux --architecture "$arch" --author capmaas-rs
    --config.user 65532:65532 --config.entrypoint /manager --config.workingdir /
    --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt --clear=config.cmd)
  for label in "${labels[@]}"; do
    config_args+=(--config.label "$label" --manifest.annotation "$label")
  done
  umoci config --image "$image" "${config_args[@]}"
  umoci gc --layout "$layout"
  archive="$out/${component}_${tag}_linux_${arch}.oci.tar"
  tar -C "$layout" -cf "$archive" .
  echo "built $archive ($registry/$component:$tag, $profile)"

  if [[ "$check" == true ]]; then
    verify="$work/verify"
    mkdir -p "$verify/layout"
    tar -C "$verify/layout" -xf "$archive"
    umoci unpack --rootless --image "$verify/layout:$tag" "$verify/bundle" >/dev/null
    user="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["process"]["user"]["uid"])' "$verify/bundle/config.json")"
    [[ "$user" != 0 ]] || { echo "$component: the image runs as root" >&2; exit 1; }
    entrypoint="$(python3 -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))["process"]["args"]))' "$verify/bundle/config.json")"
    [[ "$entrypoint" == /manager ]] || { echo "$component: entrypoint $entrypoint" >&2; exit 1; }
    rootfs="$verify/bundle/rootfs"
    emulator=()
    if [[ "$arch" == arm64 && "$(uname -m)" != aarch64 ]]; then
      # A static qemu in the unpacked root runs the arm64 program there.
      install -m 0755 "$(command -v qemu-aarch64-static)" "$rootfs/qemu-aarch64-static"
      emulator=(/qemu-aarch64-static)
    fi
    if [[ "$(id -u)" == 0 ]]; then
      printed="$(chroot --userspec=65532:65532 "$rootfs" "${emulator[@]}" /manager --version)"
    elif [[ ${#emulator[@]} -gt 0 ]]; then
      printed="$("$rootfs/qemu-aarch64-static" "$rootfs/manager" --version)"
    else
      printed="$("$rootfs/manager" --version)"
    fi
    [[ "$printed" == "$component "* ]] || { echo "$component: --version printed '$printed'" >&2; exit 1; }
    size="$(du -k "$archive" | cut -f1)"
    echo "checked $component ($arch): user $user, entrypoint /manager prints '$printed', archive ${size} KiB"
  fi
  rm -rf "$work"
  trap - EXIT
done
done
