#!/usr/bin/env bash
# Builds the container image (`make docker`): a Debian base made from Debian's packages with
# mmdebstrap and imported into docker (no registry image is pulled), then packaging/docker/Dockerfile
# on top of it.
#   packaging/docker/build.sh [--base-only] [--llama] [TAG]    (TAG default: offline-assistant:VERSION)
# --llama also builds the llama.cpp engine image of compose.yaml (compiles llama.cpp: ~10 min).
# Needs root (mmdebstrap), a docker daemon, and Debian's archive and PyPI during the build only.
set -euo pipefail
cd "$(dirname "$0")/../.."

SUITE="${DEBIAN_SUITE:-bookworm}"
BASE="offline-assistant-base:$SUITE"
WORK=build/docker
VERSION="$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
base_only=0 llama=0 tag="offline-assistant:$VERSION"
for arg in "$@"; do
  case "$arg" in
    --base-only) base_only=1 ;;
    --llama) llama=1 ;;
    -*) echo "unknown option: $arg" >&2; exit 2 ;;
    *) tag="$arg" ;;
  esac
done
mkdir -p "$WORK"

# The base: python3 and venv, tini as PID 1, CA certificates; a non-root user (uid 10001).
# Rebuilt only when this script changes (its hash is the image's label).
recipe="$(sha256sum "$0" | cut -c1-16)"
if [ "$(docker image inspect -f '{{index .Config.Labels "recipe"}}' "$BASE" 2>/dev/null)" != "$recipe" ]; then
  started=$SECONDS
  rm -f "$WORK/base.tar"
  mmdebstrap --variant=minbase --quiet --format=tar \
    --include=python3,python3-venv,tini,ca-certificates \
    --customize-hook='chroot "$1" useradd --uid 10001 --create-home --shell /usr/sbin/nologin assistant' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/usr/share/doc/* "$1"/usr/share/man/*' \
    "$SUITE" "$WORK/base.tar"
  docker import --change "LABEL recipe=$recipe" --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' "$WORK/base.tar" "$BASE" >/dev/null
  rm -f "$WORK/base.tar"
  echo "base image $BASE built in $((SECONDS - started)) s"
fi
[ "$base_only" = 1 ] && exit 0

# pip inside the build trusts what pip trusts here: a proxy's CA ($PIP_CERT), if there is one.
# It stays in the build stage; the image itself carries Debian's CA certificates only.
: > "$WORK/pip-ca.crt"
if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then cp "$PIP_CERT" "$WORK/pip-ca.crt"; fi

started=$SECONDS
docker build --network host --build-arg "BASE=$BASE" -f packaging/docker/Dockerfile -t "$tag" .
echo "image $tag built in $((SECONDS - started)) s, $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}')"
if [ "$llama" = 1 ]; then
  docker build --network host --build-arg "BASE=$BASE" -f packaging/docker/llama.Dockerfile \
    -t "offline-assistant-llama:$VERSION" .
fi
