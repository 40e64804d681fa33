#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# An installed afmesh, moved elsewhere after `cmake --install`, used the two
# ways a program outside this project uses it: find_package(afmesh)
# (examples/c/CMakeLists.txt) and pkg-config. Each build of af_echo.c runs as a
# 1-worker 1-server cluster under the moved tree's own `afmesh run`, and a
# request for the next major version is refused.
#
#   consumer_test.sh <build dir> <source dir> <version> <cmake> <generator> <C compiler>
set -euo pipefail
build_dir=$1 source_dir=$2 version=$3 cmake=$4 generator=$5 cc=$6

fail() {
  echo "consumer_test: FAILED: $*" >&2
  exit 1
}

# The moved tree must find its library and modules by itself, not through
# whatever ctest or the calling shell points at the build tree.
unset AFMESH_MODULE_PATH AFMESH_LIBRARY LD_LIBRARY_PATH

tmp=$(realpath "$(mktemp -d)")
moved=$tmp/moved
cluster_pid=
cleanup() {
  # Only set if the script was interrupted while a cluster ran: afmesh run
  # stops all its nodes on SIGTERM.
  if [ -n "$cluster_pid" ]; then
    kill -TERM "$cluster_pid" 2>/dev/null || true
    wait "$cluster_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# logged <log name> <what> <command...>: runs the command with its output in
# a log, shown only if it fails.
logged() {
  local log=$tmp/$1.log what=$2
  shift 2
  "$@" >"$log" 2>&1 || { cat "$log" >&2; fail "$what"; }
}

# resolves_moved_library <program>: the dynamic loader takes libafmesh from the
# moved tree, with no LD_LIBRARY_PATH.
resolves_moved_library() {
  local lib
  lib=$(ldd "$1" | awk '$1 ~ /^libafmesh\.so/ { print $3 }')
  if [ -z "$lib" ] || [ "$(dirname "$(realpath "$lib")")" != "$moved/lib" ]; then
    fail "$1 loads libafmesh from '${lib:-nowhere}', not from $moved/lib"
  fi
}

# run_cluster <what> <program>: the program as a 1-worker 1-server cluster;
# afmesh run picks a free scheduler port. In the background so that the
# EXIT trap can stop it if this script is interrupted.
run_cluster() {
  local what=$1 rc=0
  "$moved/bin/afmesh" run --workers 1 --servers 1 --timeout 120 -- "$2" &
  cluster_pid=$!
  wait "$cluster_pid" || rc=$?
  cluster_pid=
  [ "$rc" -eq 0 ] || fail "$what: the 1-worker 1-server cluster exited with status $rc"
}

echo "consumer_test: installing $build_dir into $tmp/a, then moving it to $moved"
logged install "cmake --install $build_dir" "$cmake" --install "$build_dir" --prefix "$tmp/a"
mv "$tmp/a" "$moved"
for file in lib/cmake/afmesh/afmeshConfig.cmake lib/cmake/afmesh/afmeshConfigVersion.cmake \
            lib/cmake/afmesh/afmeshTargets.cmake lib/pkgconfig/afmesh.pc include/afmesh/afmesh.h bin/afmesh; do
  [ -f "$moved/$file" ] || fail "the install has no $file"
done
# A path into the build, the source or the original prefix would still work
# here, so look for them rather than trust the builds below to notice.
for path in "$tmp/a" "$build_dir" "$source_dir"; do
  if grep -rlF "$path" "$moved/lib/cmake/afmesh" "$moved/lib/pkgconfig"; then
    fail "the installed package files above name $path: they must be relative to their own location"
  fi
done

echo "consumer_test: find_package(afmesh 0.1) from $moved"
logged cmake-configure "configuring examples/c against $moved" \
  "$cmake" -S "$source_dir/examples/c" -B "$tmp/cmake-build" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_PREFIX_PATH="$moved"
grep -qxF "afmesh_DIR:PATH=$moved/lib/cmake/afmesh" "$tmp/cmake-build/CMakeCache.txt" ||
  fail "find_package found $(grep '^afmesh_DIR' "$tmp/cmake-build/CMakeCache.txt"), not the moved tree's package"
logged cmake-build "building examples/c" "$cmake" --build "$tmp/cmake-build"
resolves_moved_library "$tmp/cmake-build/af_echo"
run_cluster "af_echo built with CMake" "$tmp/cmake-build/af_echo"

wrong=$((${version%%.*} + 1)).0
echo "consumer_test: find_package(afmesh $wrong) must refuse afmesh $version"
mkdir "$tmp/wrong-version"
printf '%s\n' 'cmake_minimum_required(VERSION 3.25)' 'project(wrong_version LANGUAGES NONE)' \
  "find_package(afmesh $wrong CONFIG REQUIRED)" >"$tmp/wrong-version/CMakeLists.txt"
if "$cmake" -S "$tmp/wrong-version" -B "$tmp/wrong-version/build" -G "$generator" -DCMAKE_PREFIX_PATH="$moved" \
  >"$tmp/wrong-version.log" 2>&1; then
  cat "$tmp/wrong-version.log" >&2
  fail "find_package(afmesh $wrong) accepted afmesh $version"
fi
grep -qF "version: $version" "$tmp/wrong-version.log" || {
  cat "$tmp/wrong-version.log" >&2
  fail "find_package(afmesh $wrong) failed, but not by refusing afmesh $version"
}

if ! command -v pkg-config >/dev/null; then
  echo "consumer_test: pkg-config half skipped: pkg-config is not installed (Debian: pkgconf)"
  exit 0
fi
echo "consumer_test: pkg-config afmesh from $moved/lib/pkgconfig"
export PKG_CONFIG_PATH=$moved/lib/pkgconfig
pc_version=$(pkg-config --modversion afmesh) || fail "pkg-config does not find afmesh.pc"
[ "$pc_version" = "$version" ] || fail "afmesh.pc says version $pc_version, the build $version"
read -ra flags <<<"$(pkg-config --cflags --libs afmesh)"
libdir=$(pkg-config --variable=libdir afmesh)
mkdir "$tmp/pc-build"
logged pc-build "compiling af_echo.c with ${flags[*]}" \
  "$cc" -Wall -Wextra -Werror -o "$tmp/pc-build/af_echo" "$source_dir/examples/c/af_echo.c" "${flags[@]}" \
  "-Wl,-rpath,$libdir"
resolves_moved_library "$tmp/pc-build/af_echo"
run_cluster "af_echo built with pkg-config" "$tmp/pc-build/af_echo"
echo "consumer_test: passed"
