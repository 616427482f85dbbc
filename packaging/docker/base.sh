#!/usr/bin/env bash
# The images' Debian base, made from Debian's packages with mmdebstrap and `docker import`ed
# (no registry image is pulled): python3 and venv, tini as PID 1, CA certificates, and a
# non-root user `assistant` (uid 10001). About 20 s and 200 MB.
#   packaging/docker/base.sh [IMAGE]    (default: offline-assistant-base:$DEBIAN_SUITE, bookworm)
# Rebuilt only when this script changes: its hash is the image's label. Needs root and Debian's archive.
set -euo pipefail
cd "$(dirname "$0")/../.."
SUITE="${DEBIAN_SUITE:-bookworm}"
BASE="${1:-offline-assistant-base:$SUITE}"
WORK=build/docker
mkdir -p "$WORK"

recipe="$(sha256sum "$0" | cut -c1-16)"
if [ "$(docker image inspect -f '{{index .Config.Labels "offline-assistant.base-recipe"}}' "$BASE" 2>/dev/null)" != "$recipe" ]; then
  started=$SECONDS
  rm -f "$WORK/base.tar"
  mmdebstrap --variant=minbase --quiet --format=tar \
    --include=python3,python3-venv,tini,ca-certificates \
    --customize-hook='chroot "$1" useradd --uid 10001 --create-home --shell /usr/sbin/nologin assistant' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/usr/share/man/*' \
    "$SUITE" "$WORK/base.tar"
  docker import --change "LABEL offline-assistant.base-recipe=$recipe" --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' "$WORK/base.tar" "$BASE" >/dev/null
  rm -f "$WORK/base.tar"
  echo "base image $BASE built in $((SECONDS - started)) s"
fi
