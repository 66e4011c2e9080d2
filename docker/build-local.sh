#!/usr/bin/env bash
# Build the image on a machine without Docker and without access to an image registry: buildah
# builds the Dockerfile FROM a Debian bookworm base that debootstrap makes from the Debian mirror
# (its Python is Debian's 3.11, where the Dockerfile's default base has the python image's).
# Not CI; for trying the image here. README.md, "Container image", has the timings.
#
#   sudo docker/build-local.sh [runtime|spark|all] [TAG]     (default: all, local)
#
# Makes localhost/situflow:TAG (runtime) and localhost/situflow:TAG-spark (spark). Needs root
# (debootstrap, overlay storage, chroot) and Debian's buildah and debootstrap
# (apt-get install buildah debootstrap). Builds run with chroot isolation and the host's network,
# so no OCI runtime, cgroup delegation or network plugin is needed.
set -euo pipefail

target=${1:-all}
tag=${2:-local}
base=localhost/situflow-base:bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cd "$(dirname "$0")/.."

case $target in
  runtime) targets=(runtime) ;;
  spark) targets=(spark) ;;
  all) targets=(runtime spark) ;;
  *) echo "usage: $0 [runtime|spark|all] [TAG]" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "$0: run as root (debootstrap and buildah's storage need it)" >&2; exit 1; }
for command in buildah debootstrap; do
  command -v "$command" >/dev/null || { echo "$0: apt-get install $command" >&2; exit 1; }
done

if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm \
    "$rootfs" "$mirror"
  # The base trusts the CAs this machine trusts, so that pip and apt inside the build get
  # through the same TLS proxies as the host does (pip otherwise uses its own CA bundle).
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$rootfs/etc/pip.conf"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  container=$(buildah from scratch)
  cp -a "$rootfs/." "$(buildah mount "$container")/"
  buildah umount "$container" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd /bin/bash "$container"
  buildah commit --quiet "$container" "$base" >/dev/null
  buildah rm "$container" >/dev/null
fi

for stage in "${targets[@]}"; do
  name=localhost/situflow:$tag
  [ "$stage" = spark ] && name=$name-spark
  # No --layers: buildah 1.28 loses a cached stage's files for RUN --mount=from=that stage.
  buildah bud --isolation chroot --network host --build-arg "PYTHON_IMAGE=$base" \
    --target "$stage" --tag "$name" .
done
buildah images --filter reference=localhost/situflow
