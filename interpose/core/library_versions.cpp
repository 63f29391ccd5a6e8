#include "library_versions.h"

#include <dlfcn.h>
#include <link.h>

#include <cstddef>
#include <string_view>

namespace kcap {
namespace {

// How a library tells its version.
enum class Ask { kNccl, kSizeT, kRuntime };

struct Library {
  std::string_view name;    // the key in traceBegin.libraries
  std::string_view soname;  // a loaded object whose file name starts with this
  std::string_view symbol;  // its version function
  Ask ask;
};

constexpr Library kLibraries[] = {
    {"nccl", "libnccl.so", "ncclGetVersion", Ask::kNccl},
    {"cudnn", "libcudnn.so", "cudnnGetVersion", Ask::kSizeT},
    {"cublasLt", "libcublasLt.so", "cublasLtGetVersion", Ask::kSizeT},
    {"cudart", "libcudart.so", "cudaRuntimeGetVersion", Ask::kRuntime},
};

std::string_view fileName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// The path of the first loaded object of each library, by kLibraries' order.
struct Found {
  std::string paths[std::size(kLibraries)];
};

int visit(dl_phdr_info* info, size_t, void* data) {
  auto* found = static_cast<Found*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
  const std::string_view file = fileName(info->dlpi_name);
  for (size_t i = 0; i < std::size(kLibraries); ++i) {
    if (found->paths[i].empty() && file.starts_with(kLibraries[i].soname)) {
      found->paths[i] = info->dlpi_name;
    }
  }
  return 0;
}

}  // namespace

std::string versionText(long long code, bool thousandsMajor) {
  if (code <= 0) return {};
  const long long majorUnit = thousandsMajor ? 1000 : 10000;
  const long long major = code / majorUnit;
  const long long minor = (code % majorUnit) / 100;
  const long long patch = code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

LibraryVersions loadedLibraryVersions() {
  LibraryVersions out;
  Found found;
  dl_iterate_phdr(visit, &found);  // paths only: nothing is called under the loader's lock
  for (size_t i = 0; i < std::size(kLibraries); ++i) {
    if (found.paths[i].empty()) continue;
    void* handle = dlopen(found.paths[i].c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    void* symbol = dlsym(handle, kLibraries[i].symbol.data());
    std::string version;
    if (symbol != nullptr) {
      switch (kLibraries[i].ask) {
        case Ask::kNccl: {
          int code = 0;
          if (reinterpret_cast<int (*)(int*)>(symbol)(&code) == 0) version = versionText(code, code < 20900);
          break;
        }
        case Ask::kSizeT: {
          const auto code = static_cast<long long>(reinterpret_cast<size_t (*)()>(symbol)());
          version = versionText(code, code < 10000);  // cuDNN 8: 8907 is 8.9.7
          break;
        }
        case Ask::kRuntime: {
          int code = 0;
          if (reinterpret_cast<int (*)(int*)>(symbol)(&code) == 0 && code > 0) {
            out.runtimeVersion = code;
            version = std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10);
          }
          break;
        }
      }
    }
    dlclose(handle);
    if (!version.empty()) out.libraries.emplace_back(kLibraries[i].name, version);
  }
  return out;
}

}  // namespace kcap
