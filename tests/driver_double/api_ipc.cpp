// CUDA IPC, the importing side: another process's device memory mapped into
// this one. The double's device memory is host memory, so a handle names a
// file (its bytes: a NUL-terminated path) whose pages are mapped shared;
// whoever else maps that file plays the other process, writing the memory
// without a CUDA call of this one. Handles of the double's own allocations
// (cuIpcGetMemHandle) are not made: its memory is private to the process.
#include "driver_exports.h"
#include "state.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <cuda.h>

using kcap_double::Lock;
using kcap_double::needContext;
using kcap_double::State;
using kcap_double::state;

DOUBLE_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* address, CUipcMemHandle handle, unsigned flags) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (address == nullptr || flags > CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::string path(handle.reserved, strnlen(handle.reserved, sizeof handle.reserved));
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  struct stat info {};
  void* mapped = MAP_FAILED;
  if (fstat(fd, &info) == 0 && info.st_size > 0) {
    mapped = mmap(nullptr, static_cast<std::size_t>(info.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (mapped == MAP_FAILED) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  State& s = state();
  Lock lock(s.mutex);
  const auto base = reinterpret_cast<std::uintptr_t>(mapped);
  s.allocations[base] = static_cast<std::size_t>(info.st_size);  // device memory to copies and kernels
  s.ipcMappings[base] = static_cast<std::size_t>(info.st_size);
  *address = base;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuIpcCloseMemHandle(CUdeviceptr address) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  const auto it = s.ipcMappings.find(address);
  if (it == s.ipcMappings.end()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  munmap(reinterpret_cast<void*>(address), it->second);
  s.allocations.erase(address);
  s.ipcMappings.erase(it);
  return CUDA_SUCCESS;
}
