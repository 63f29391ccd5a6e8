// scale_struct: dst[i * stride] = src[i * stride] * scale for i < n, with all
// arguments passed in one by-value struct.
//
// Test material for kcap recording and replay: the kernel has a single 32-byte
// parameter whose words include two device pointers (offsets 0 and 8) next to
// scalars (float at 16, int at 20, 64-bit stride at 24). The parameter layout
// reported by the driver is one opaque 32-byte blob, so the recorder has to
// find the pointer words inside it by value and save the buffers they point
// to. stride is in elements and must be >= 1; src and dst must each hold at
// least (n - 1) * stride + 1 floats. Launch with any 1-D grid (grid-strided).

#include <cstddef>

struct ScaleArgs {
  const float* src;
  float* dst;
  float scale;
  int n;
  long long stride;
};

static_assert(sizeof(ScaleArgs) == 32, "ScaleArgs layout is part of the test contract");
static_assert(offsetof(ScaleArgs, src) == 0, "src at 0");
static_assert(offsetof(ScaleArgs, dst) == 8, "dst at 8");
static_assert(offsetof(ScaleArgs, scale) == 16, "scale at 16");
static_assert(offsetof(ScaleArgs, n) == 20, "n at 20");
static_assert(offsetof(ScaleArgs, stride) == 24, "stride at 24");

extern "C" __global__ void scale_struct(ScaleArgs args) {
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < args.n; i += step) {
    const long long j = i * args.stride;
    args.dst[j] = args.src[j] * args.scale;
  }
}
