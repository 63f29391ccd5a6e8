// Virtual memory management (what PyTorch's expandable segments use) on host
// memory: a reservation is an inaccessible range of the process's address
// space, a physical allocation a size, a mapping makes part of a reservation
// readable and writable (and device memory for copies and kernels). Unlike
// the driver, two mappings of one physical allocation do not share bytes,
// but for an imported one (cuMemImportFromShareableHandle of a file
// descriptor: another process's memory): its mappings map the file, whose
// bytes whoever holds it writes.
#include "driver_exports.h"
#include "state.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <cuda.h>

namespace kcap_double {
namespace {

constexpr std::size_t kGranularity = std::size_t{2} << 20;

struct Physical {
  std::size_t size;
  int fd = -1;  // imported: the shared file
};

std::map<std::uintptr_t, std::size_t>& reservations() {
  static auto* const map = new std::map<std::uintptr_t, std::size_t>;  // guarded by the state's mutex
  return *map;
}

std::unordered_set<const Physical*>& physicals() {
  static auto* const set = new std::unordered_set<const Physical*>;
  return *set;
}

// KCAP_DOUBLE_REFUSE_ADDRESS_HINTS=1: cuMemAddressReserve never places a
// reservation at the address it is asked for (the driver does not promise
// to), so tests can see what replay does when recorded addresses are taken.
bool refuseAddressHints() {
  const char* value = std::getenv("KCAP_DOUBLE_REFUSE_ADDRESS_HINTS");
  return value != nullptr && std::string_view(value) == "1";
}

bool insideReservation(std::uintptr_t address, std::size_t size) {
  auto it = reservations().upper_bound(address);
  if (it == reservations().begin()) {
    return false;
  }
  --it;
  return address >= it->first && address - it->first + size <= it->second;
}

}  // namespace
}  // namespace kcap_double

using namespace kcap_double;

DOUBLE_API CUresult cuMemGetAllocationGranularity(std::size_t* granularity, const CUmemAllocationProp*,
                                                  CUmemAllocationGranularity_flags) {
  if (granularity == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuMemAddressReserve(CUdeviceptr* address, std::size_t size, std::size_t, CUdeviceptr hint,
                                        unsigned long long) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (address == nullptr || size == 0 || size % kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  const bool refuse = refuseAddressHints();
  void* range = mmap(refuse ? nullptr : reinterpret_cast<void*>(hint), size, PROT_NONE, flags, -1, 0);
  if (refuse && range != MAP_FAILED && hint != 0 && range == reinterpret_cast<void*>(hint)) {
    // Placed where the hint asked by chance: move it.
    void* elsewhere = mmap(nullptr, size, PROT_NONE, flags, -1, 0);
    munmap(range, size);
    range = elsewhere;
  }
  if (range == MAP_FAILED) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  State& s = state();
  Lock lock(s.mutex);
  reservations()[reinterpret_cast<std::uintptr_t>(range)] = size;
  *address = reinterpret_cast<CUdeviceptr>(range);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuMemAddressFree(CUdeviceptr address, std::size_t size) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  const auto it = reservations().find(address);
  if (it == reservations().end() || it->second != size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  munmap(reinterpret_cast<void*>(address), size);
  reservations().erase(it);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
                                unsigned long long) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (handle == nullptr || prop == nullptr || size == 0 || size % kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !knownDevice(prop->location.id)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (!s.takeDeviceMemory(size)) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto* made = new Physical{size};
  physicals().insert(made);
  *handle = reinterpret_cast<CUmemGenericAllocationHandle>(made);
  return CUDA_SUCCESS;
}

// A POSIX file descriptor (held as the pointer's value): another process's
// memory, the file's size.
DOUBLE_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                                   CUmemAllocationHandleType type) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (handle == nullptr || type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const int fd = static_cast<int>(reinterpret_cast<std::intptr_t>(osHandle));
  struct stat file {};
  if (fstat(fd, &file) != 0 || file.st_size <= 0 || static_cast<std::size_t>(file.st_size) % kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const int held = dup(fd);
  if (held < 0) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  State& s = state();
  Lock lock(s.mutex);
  auto* made = new Physical{static_cast<std::size_t>(file.st_size), held};
  physicals().insert(made);
  *handle = reinterpret_cast<CUmemGenericAllocationHandle>(made);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  auto* found = reinterpret_cast<Physical*>(handle);
  if (physicals().erase(found) == 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (found->fd >= 0) {
    close(found->fd);
  } else {
    s.giveDeviceMemory(found->size);
  }
  delete found;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuMemMap(CUdeviceptr address, std::size_t size, std::size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  const auto* found = reinterpret_cast<const Physical*>(handle);
  if (physicals().count(found) == 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (size == 0 || offset + size > found->size || !insideReservation(address, size) || s.contains(address, 1)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (found->fd >= 0) {
    if (mmap(reinterpret_cast<void*>(address), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, found->fd,
             static_cast<off_t>(offset)) == MAP_FAILED) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  } else if (mprotect(reinterpret_cast<void*>(address), size, PROT_READ | PROT_WRITE) != 0) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s.allocations[address] = size;  // device memory from now on
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuMemSetAccess(CUdeviceptr address, std::size_t size, const CUmemAccessDesc*, std::size_t count) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  // Every byte mapped (by one mapping or several adjoining ones).
  for (CUdeviceptr at = address; at < address + size;) {
    CUdeviceptr base = 0;
    std::size_t mapped = 0;
    if (!s.rangeOf(at, base, mapped)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    at = base + mapped;
  }
  return count != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

DOUBLE_API CUresult cuMemUnmap(CUdeviceptr address, std::size_t size) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  if (!insideReservation(address, size)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (auto it = s.allocations.lower_bound(address); it != s.allocations.end() && it->first < address + size;) {
    it = s.allocations.erase(it);
  }
  // Back to reserved, inaccessible and empty (an imported mapping's file too).
  if (mmap(reinterpret_cast<void*>(address), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
           -1, 0) == MAP_FAILED) {
    return CUDA_ERROR_UNKNOWN;
  }
  return CUDA_SUCCESS;
}
