#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages that Ember's build, tests and tools need.
#
# Idempotent and quick when everything is present: it asks dpkg first and
# touches apt (update + install) only for what is missing. Runs apt through
# sudo unless it already runs as root. Tested on Debian 12 and meant for
# Ubuntu 24.04 too (same package names; the clang version differs, which is
# why the TSan runtime is looked up as the `libclang-rt-dev` metapackage
# first and as `libclang-rt-<clang major>-dev` after).
#
# Usage: tools/install_deps.sh
# CUDA (nvcc) is not an apt package here: CUDA code builds when nvcc is found.
set -euo pipefail

# Required: compilers and build tools, the libraries Ember links, GoogleTest,
# the benchmark peers (StarPU, oneTBB), and clang for the TSan and
# -Wthread-safety build.
required=(
  build-essential cmake pkg-config
  libabsl-dev libspdlog-dev libfmt-dev libconcurrentqueue-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libblas-dev
  libstarpu-dev libtbb-dev
  clang
)
# Optional: a failure to install these is a warning, not an error.
optional=(valgrind)

log() { printf '[install_deps] %s\n' "$*"; }

is_installed() {
  dpkg-query -W -f='${db:Status-Status}\n' "$1" 2>/dev/null | grep -qx installed
}

has_candidate() {
  local candidate
  candidate=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')
  [[ -n "$candidate" && "$candidate" != "(none)" ]]
}

# The major version of the clang that the `clang` package pulls in, from the
# installed clang or else from apt's dependency (`clang-14`); empty if unknown.
clang_major() {
  local version=""
  if command -v clang >/dev/null 2>&1; then
    version=$(clang -dumpversion 2>/dev/null || true)
  fi
  if [[ -z "$version" ]]; then
    version=$(apt-cache depends clang 2>/dev/null |
      sed -n 's/^ *Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -n1)
  fi
  printf '%s\n' "${version%%.*}"
}

# The ThreadSanitizer runtime: satisfied by the metapackage or by the package
# of the installed clang's version.
tsan_runtime_installed() {
  local major
  is_installed libclang-rt-dev && return 0
  major=$(clang_major)
  [[ -n "$major" ]] && is_installed "libclang-rt-${major}-dev"
}

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  log "error: this script needs a Debian or Ubuntu system (dpkg and apt-get)" >&2
  exit 1
fi

missing=()
for pkg in "${required[@]}"; do
  is_installed "$pkg" || missing+=("$pkg")
done
missing_optional=()
for pkg in "${optional[@]}"; do
  is_installed "$pkg" || missing_optional+=("$pkg")
done
need_tsan=0
tsan_runtime_installed || need_tsan=1

if ((${#missing[@]} == 0 && ${#missing_optional[@]} == 0 && need_tsan == 0)); then
  log "all $((${#required[@]} + ${#optional[@]} + 1)) packages present"
  exit 0
fi

sudo=()
if ((EUID != 0)); then
  if ! command -v sudo >/dev/null 2>&1; then
    log "error: not root and no sudo; install as root: ${missing[*]} ${missing_optional[*]}" >&2
    exit 1
  fi
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
# Wait for another apt/dpkg run (e.g. unattended-upgrades) instead of failing.
apt_get=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 -y -q)

log "updating the package lists"
"${apt_get[@]}" update

if ((need_tsan)); then
  if has_candidate libclang-rt-dev; then
    missing+=(libclang-rt-dev)
  else
    # Older releases: no metapackage. Install clang first to learn its version.
    if ! is_installed clang; then
      log "installing clang"
      "${apt_get[@]}" install --no-install-recommends clang
    fi
    major=$(clang_major)
    if [[ -n "$major" ]] && has_candidate "libclang-rt-${major}-dev"; then
      missing+=("libclang-rt-${major}-dev")
    else
      # Before clang 15 Debian shipped the sanitizer runtimes inside
      # libclang-common-<major>-dev, which clang already depends on.
      log "warning: no libclang-rt package for clang ${major:-?}; assuming clang ships its TSan runtime"
    fi
  fi
fi

if ((${#missing[@]} > 0)); then
  log "installing: ${missing[*]}"
  "${apt_get[@]}" install --no-install-recommends "${missing[@]}"
fi
if ((${#missing_optional[@]} > 0)); then
  log "installing (optional): ${missing_optional[*]}"
  "${apt_get[@]}" install --no-install-recommends "${missing_optional[@]}" ||
    log "warning: could not install optional packages: ${missing_optional[*]}"
fi
log "done"
