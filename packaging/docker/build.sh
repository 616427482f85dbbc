#!/usr/bin/env bash
# Builds the container image (`make docker`): the Debian base of base.sh (mmdebstrap, no registry
# image pulled), then packaging/docker/Dockerfile on top of it (~3 min from nothing, 880 MB).
#   packaging/docker/build.sh [--base-only] [--llama] [TAG]    (TAG default: offline-assistant:VERSION)
# --llama also builds the llama.cpp engine image of compose.yaml (compiles llama.cpp: ~10 min).
# Needs root (mmdebstrap), a docker daemon, and Debian's archive and PyPI during the build only.
set -euo pipefail
cd "$(dirname "$0")/../.."

BASE="offline-assistant-base:${DEBIAN_SUITE:-bookworm}"
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

packaging/docker/base.sh "$BASE"
# pip inside the builds (and `docker compose build`) trusts what pip trusts here: a proxy's CA
# ($PIP_CERT), if there is one. It stays in the build stages: the images carry Debian's CAs only.
: > "$WORK/pip-ca.crt"
if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then cp "$PIP_CERT" "$WORK/pip-ca.crt"; fi
[ "$base_only" = 1 ] && exit 0

started=$SECONDS
# The build stage is tagged, then removed once the image is made: its ~900 MB would stay behind as
# cache that the next build cannot use anyway (any change to the sources redoes it).
build_stage="offline-assistant-build:$$"
docker build --network host --build-arg "BASE=$BASE" -f packaging/docker/Dockerfile --target build \
  -t "$build_stage" .
docker build --network host --build-arg "BASE=$BASE" -f packaging/docker/Dockerfile -t "$tag" .
docker rmi "$build_stage" >/dev/null
echo "image $tag built in $((SECONDS - started)) s, $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}')"
if [ "$llama" = 1 ]; then
  docker build --network host --build-arg "BASE=$BASE" -f packaging/docker/llama.Dockerfile \
    -t "offline-assistant-llama:$VERSION" .
fi
