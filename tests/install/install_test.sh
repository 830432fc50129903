#!/usr/bin/env bash
# Installs an Ember build into a scratch prefix, then configures, builds and
# runs the downstream project against that prefix. Registered with ctest by
# tests/install/CMakeLists.txt, which passes every argument; the work dir is
# emptied first and left behind for inspection.
#
# Usage: install_test.sh --cmake=CMAKE --generator=GEN --build-dir=DIR
#          --config=CONFIG --source-dir=DIR --work-dir=DIR --cxx=CXX
#          [--cxx-flags=FLAGS] [--linker-flags=FLAGS]
set -euo pipefail

cmake="" generator="" build_dir="" config="" source_dir="" work_dir="" cxx=""
cxx_flags="" linker_flags=""
for arg in "$@"; do
  case "$arg" in
    --cmake=*) cmake=${arg#*=} ;;
    --generator=*) generator=${arg#*=} ;;
    --build-dir=*) build_dir=${arg#*=} ;;
    --config=*) config=${arg#*=} ;;
    --source-dir=*) source_dir=${arg#*=} ;;
    --work-dir=*) work_dir=${arg#*=} ;;
    --cxx=*) cxx=${arg#*=} ;;
    --cxx-flags=*) cxx_flags=${arg#*=} ;;
    --linker-flags=*) linker_flags=${arg#*=} ;;
    *)
      echo "install_test: unknown argument '$arg'" >&2
      exit 2
      ;;
  esac
done
for required in cmake generator build_dir source_dir work_dir cxx; do
  if [[ -z "${!required}" ]]; then
    echo "install_test: missing --${required//_/-}=..." >&2
    exit 2
  fi
done

prefix="$work_dir/prefix"
downstream_build="$work_dir/build"
rm -rf "$work_dir"
mkdir -p "$work_dir"

step() { printf '\n-- install_test: %s\n' "$*"; }

config_args=()
[[ -n "$config" ]] && config_args=(--config "$config")

step "install $build_dir into $prefix"
"$cmake" --install "$build_dir" --prefix "$prefix" "${config_args[@]}"

# The package registry is off so that find_package can only succeed through
# the prefix; EMBER_EXPECTED_PREFIX makes the downstream project check that.
step "configure the downstream project"
"$cmake" -S "$source_dir" -B "$downstream_build" -G "$generator" \
  -DCMAKE_BUILD_TYPE="$config" \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="$cxx_flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$linker_flags" \
  -DEMBER_EXPECTED_PREFIX="$prefix"

step "build the downstream project"
"$cmake" --build "$downstream_build" "${config_args[@]}"

step "run the downstream program"
program="$downstream_build/ember_downstream"
# Multi-config generators put it in a per-config folder.
[[ -x "$program" || -z "$config" ]] || program="$downstream_build/$config/ember_downstream"
"$program"
