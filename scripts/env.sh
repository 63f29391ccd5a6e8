# Sourced by the other scripts: puts nvcc on PATH and, on a GPU host given a
# bundle made by scripts/bundle-gpu-deps.sh, the bundled Cap'n Proto, xxHash,
# RE2 and nlohmann-json.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
_kcap_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -f "$_kcap_root/.gpu-deps/env.sh" ]; then
  # shellcheck disable=SC1091
  source "$_kcap_root/.gpu-deps/env.sh"
fi
JOBS=${JOBS:-$(nproc)}
