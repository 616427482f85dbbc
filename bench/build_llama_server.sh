#!/usr/bin/env bash
# llama.cpp's own `llama-server`, built from the llama.cpp sources vendored in the llama-cpp-python
# sdist (the version the Makefile pins), for bench/bench_server.py's llama-server-npN peers.
# Only PyPI is reached (pip download of the sdist); CMake downloads nothing: no web UI assets (the
# server answers the API without them), no OpenSSL, no curl. 20 min on 2 shared cores (load 5).
#
#   bash bench/build_llama_server.sh          # or: make llama-server-native
#
# Result: bench/.cache/llama-server/bin/llama-server (static, one file).
set -euo pipefail

VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/bench/.cache/llama-server
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
JOBS=${JOBS:-2}
SRC=$DEST/llama_cpp_python-$VERSION/vendor/llama.cpp

mkdir -p "$DEST"
if [ ! -f "$SRC/CMakeLists.txt" ]; then
    "$PYTHON" -m pip download "llama-cpp-python==$VERSION" --no-binary :all: --no-deps -d "$DEST/sdist"
    tar xzf "$DEST/sdist/llama_cpp_python-$VERSION.tar.gz" -C "$DEST"
fi

# As the Makefile's llama-server target: tuned for this CPU but without AMX, whose tile state
# some hypervisors do not hand over (ldtilecfg faults).
FLAGS=""
if [ "$(uname -m)" = x86_64 ]; then
    FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
fi

started=$(date +%s)
GENERATOR=()
if command -v ninja >/dev/null; then GENERATOR=(-G Ninja); fi
cmake -S "$SRC" -B "$DEST/build" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    "-DCMAKE_C_FLAGS=$FLAGS" "-DCMAKE_CXX_FLAGS=$FLAGS"
cmake --build "$DEST/build" --target llama-server -j "$JOBS"
mkdir -p "$DEST/bin"
cp "$DEST/build/bin/llama-server" "$DEST/bin/llama-server"
echo "built $DEST/bin/llama-server in $(( $(date +%s) - started )) s"
"$DEST/bin/llama-server" --version 2>&1 | tail -2
