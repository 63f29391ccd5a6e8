#!/usr/bin/env bash
# Bundles the Debian packages kcap builds against that a GPU host may lack
# (Cap'n Proto, xxHash, RE2, nlohmann-json, pybind11) into a folder that can be copied
# there, for a host that cannot install packages itself (no network, no apt).
#
#   scripts/bundle-gpu-deps.sh [DIR]        default: .gpu-deps (ignored by git)
#
# Run it on a Debian machine with apt; copy DIR to the GPU host, into the
# checkout. scripts/env.sh (and so every build script) then puts DIR's
# programs, libraries, headers and CMake packages first. More packages:
# KCAP_GPU_EXTRA_DEBS="pkg1 pkg2".
set -euo pipefail
dir=${1:-.gpu-deps}
packages=(capnproto libcapnp-0.9.2 libcapnp-dev libxxhash0 libxxhash-dev libre2-9 libre2-dev nlohmann-json3-dev pybind11-dev)
# shellcheck disable=SC2206
packages+=(${KCAP_GPU_EXTRA_DEBS:-})

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
if ! (cd "$debs" && apt-get download "${packages[@]}" >/dev/null 2>&1); then
  apt-get update -qq >/dev/null
  (cd "$debs" && apt-get download "${packages[@]}" >/dev/null)
fi
for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$dir"; done

# Cap'n Proto's CMake package names /usr/bin/capnp and /usr/include by
# absolute path; make both relative to the package file so DIR can move.
config="$dir/usr/lib/x86_64-linux-gnu/cmake/CapnProto/CapnProtoConfig.cmake"
up='${CMAKE_CURRENT_LIST_DIR}/../../../..'
sed -i -e "s#/usr/bin/capnp#$up/bin/capnp#g" \
       -e "s#set(CAPNP_INCLUDE_DIRECTORY /usr/include)#set(CAPNP_INCLUDE_DIRECTORY $up/include)#" "$config"

cat >"$dir/env.sh" <<'EOF'
# Sourced by scripts/env.sh: the bundled packages first.
_bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export KCAP_GPU_DEPS="$_bundle"
export PATH="$_bundle/usr/bin:$PATH"
export LD_LIBRARY_PATH="$_bundle/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CMAKE_PREFIX_PATH="$_bundle/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export CPATH="$_bundle/usr/include${CPATH:+:$CPATH}"
export LIBRARY_PATH="$_bundle/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
EOF
echo "kcap: bundled ${packages[*]} in $dir ($(du -sh "$dir" | cut -f1))"
