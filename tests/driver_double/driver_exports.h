// Declarations of the double's exports that cuda.h does not declare in an
// ordinary build: the per-thread-default-stream variants and the older ABIs
// whose names cuda.h maps to newer ones (cuGetProcAddress ->
// cuGetProcAddress_v2, cuDeviceGetUuid -> cuDeviceGetUuid_v2). Declared from
// cudaTypedefs.h so that the signatures cannot drift.
#pragma once

#include <cudaTypedefs.h>

#include <type_traits>

#undef cuGetProcAddress
#undef cuDeviceGetUuid

#define KCAP_DOUBLE_DECLARE(symbol, pfn) extern "C" std::remove_pointer_t<pfn> symbol;
KCAP_DOUBLE_DECLARE(cuGetProcAddress, PFN_cuGetProcAddress_v11030)
KCAP_DOUBLE_DECLARE(cuDeviceGetUuid, PFN_cuDeviceGetUuid_v9020)
KCAP_DOUBLE_DECLARE(cuLaunchKernel_ptsz, PFN_cuLaunchKernel_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuLaunchKernelEx_ptsz, PFN_cuLaunchKernelEx_v11060_ptsz)
KCAP_DOUBLE_DECLARE(cuLaunchCooperativeKernel_ptsz, PFN_cuLaunchCooperativeKernel_v9000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemcpyHtoD_v2_ptds, PFN_cuMemcpyHtoD_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemcpyDtoH_v2_ptds, PFN_cuMemcpyDtoH_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemcpyDtoD_v2_ptds, PFN_cuMemcpyDtoD_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemcpyHtoDAsync_v2_ptsz, PFN_cuMemcpyHtoDAsync_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemcpyDtoHAsync_v2_ptsz, PFN_cuMemcpyDtoHAsync_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemcpyDtoDAsync_v2_ptsz, PFN_cuMemcpyDtoDAsync_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemsetD8_v2_ptds, PFN_cuMemsetD8_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemsetD32_v2_ptds, PFN_cuMemsetD32_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemsetD8Async_ptsz, PFN_cuMemsetD8Async_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemsetD32Async_ptsz, PFN_cuMemsetD32Async_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemcpy2D_v2_ptds, PFN_cuMemcpy2D_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemcpy2DUnaligned_v2_ptds, PFN_cuMemcpy2DUnaligned_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemcpy2DAsync_v2_ptsz, PFN_cuMemcpy2DAsync_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemcpy3D_v2_ptds, PFN_cuMemcpy3D_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemcpy3DAsync_v2_ptsz, PFN_cuMemcpy3DAsync_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemsetD2D8_v2_ptds, PFN_cuMemsetD2D8_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemsetD2D16_v2_ptds, PFN_cuMemsetD2D16_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemsetD2D32_v2_ptds, PFN_cuMemsetD2D32_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemsetD2D8Async_ptsz, PFN_cuMemsetD2D8Async_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemsetD2D16Async_ptsz, PFN_cuMemsetD2D16Async_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemsetD2D32Async_ptsz, PFN_cuMemsetD2D32Async_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuStreamSynchronize_ptsz, PFN_cuStreamSynchronize_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemsetD16_v2_ptds, PFN_cuMemsetD16_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemsetD16Async_ptsz, PFN_cuMemsetD16Async_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemcpy_ptds, PFN_cuMemcpy_v7000_ptds)
KCAP_DOUBLE_DECLARE(cuMemcpyAsync_ptsz, PFN_cuMemcpyAsync_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuMemAllocAsync_ptsz, PFN_cuMemAllocAsync_v11020_ptsz)
KCAP_DOUBLE_DECLARE(cuMemFreeAsync_ptsz, PFN_cuMemFreeAsync_v11020_ptsz)
KCAP_DOUBLE_DECLARE(cuEventRecord_ptsz, PFN_cuEventRecord_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuStreamWaitEvent_ptsz, PFN_cuStreamWaitEvent_v7000_ptsz)
KCAP_DOUBLE_DECLARE(cuStreamBeginCapture_v2_ptsz, PFN_cuStreamBeginCapture_v10010_ptsz)
KCAP_DOUBLE_DECLARE(cuStreamEndCapture_ptsz, PFN_cuStreamEndCapture_v10000_ptsz)
KCAP_DOUBLE_DECLARE(cuStreamIsCapturing_ptsz, PFN_cuStreamIsCapturing_v10000_ptsz)
KCAP_DOUBLE_DECLARE(cuGraphLaunch_ptsz, PFN_cuGraphLaunch_v10000_ptsz)
#undef KCAP_DOUBLE_DECLARE

// Every entry point: exported whatever the build's default visibility.
// Exports are thin shells over static functions and never call each other: in
// a build without -Bsymbolic such a call would go through the global scope,
// i.e. through the shim under test, and be counted twice.
#define DOUBLE_API extern "C" __attribute__((visibility("default")))
