#!/usr/bin/env bash
# Installs kcap's build dependencies from Debian/Ubuntu packages, only those
# missing. The CUDA toolkit (nvcc, driver API headers, CUPTI) is not a
# distribution package at the version kcap needs (CUDA 13): it must already be
# installed, normally under /usr/local/cuda; this script checks for it.
set -euo pipefail

pkgs=(build-essential cmake ninja-build pkg-config capnproto libcapnp-dev libzstd-dev
      libxxhash-dev libre2-dev libcli11-dev libgtest-dev clang clang-format clang-tidy nlohmann-json3-dev python3
      pybind11-dev python3-dev python3-numpy python3-pytest)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kcap: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "kcap: the CUDA toolkit (nvcc) was not found. Install CUDA 13.0 or later from NVIDIA" >&2
  echo "      (it provides nvcc, cuda.h, cudaTypedefs.h and CUPTI), then run this again." >&2
  exit 1
fi
echo "kcap: dependencies present"
