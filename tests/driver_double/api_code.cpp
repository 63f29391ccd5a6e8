// Modules, libraries, functions and kernels: loading the real images of
// kernels/ (images.cpp says how they are recognized) and the handles and
// queries built on them.
#include "driver_exports.h"
#include "state.h"

#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace kcap_double {
namespace {

const KernelDef* findKernel(const Module& module, const char* name) {
  if (name == nullptr) {
    return nullptr;
  }
  for (const KernelDef* def : module.contents.kernels) {
    if (def->name == name) {
      return def;
    }
  }
  return nullptr;
}

bool readFile(const char* path, std::string& bytes) {
  std::FILE* in = std::fopen(path, "rb");
  if (in == nullptr) {
    return false;
  }
  char chunk[4096];
  std::size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, in)) > 0) {
    bytes.append(chunk, n);
  }
  const bool ok = std::ferror(in) == 0;
  std::fclose(in);
  return ok;  // std::string keeps a NUL after the data: PTX stays a C string
}

CUresult loadModule(CUmodule* module, const void* image) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (module == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Module* loaded = nullptr;
  const CUresult r = s.loadModule(image, loaded);
  if (r == CUDA_SUCCESS) {
    *module = reinterpret_cast<CUmodule>(loaded);
  }
  return r;
}

CUresult loadLibrary(CUlibrary* library, const void* code) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (library == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Module* module = nullptr;
  if (const CUresult r = s.loadModule(code, module); r != CUDA_SUCCESS) {
    return r;
  }
  if (contentHashFault() == "refuse" && findKernel(*module, "kcap_content_hash") != nullptr) {
    s.unloadModule(module);
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  auto* loaded = new Library{module, {}};
  module->library = loaded;
  s.libraries.insert(loaded);
  *library = reinterpret_cast<CUlibrary>(loaded);
  return CUDA_SUCCESS;
}

Library* findLibrary(State& s, CUlibrary library) {
  auto* found = reinterpret_cast<Library*>(library);
  return s.libraries.count(found) != 0 ? found : nullptr;
}

Module* findModule(State& s, CUmodule module) {
  auto* found = reinterpret_cast<Module*>(module);
  return s.modules.count(found) != 0 ? found : nullptr;
}

Launchable* kernelFor(State& s, Library& library, const KernelDef* def) {
  Launchable*& kernel = library.kernels[def];
  if (kernel == nullptr) {
    kernel = new Launchable{Launchable::Kind::kErnel, def, library.module};
    s.launchables.insert(kernel);
  }
  return kernel;
}

CUresult getGlobal(Module* module, const char* name, CUdeviceptr* address, std::size_t* bytes) {
  if (module == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (name == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const auto it = module->globals.find(std::string_view(name));
  if (it == module->globals.end()) {
    return CUDA_ERROR_NOT_FOUND;
  }
  const auto base = reinterpret_cast<CUdeviceptr>(it->second);
  if (address != nullptr) {
    *address = base;
  }
  if (bytes != nullptr) {
    CUdeviceptr ignored = 0;
    state().rangeOf(base, ignored, *bytes);
  }
  return CUDA_SUCCESS;
}

CUresult paramInfo(const Launchable* launchable, std::size_t index, std::size_t* offset, std::size_t* size) {
  if (launchable == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (index >= launchable->def->params.size()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (offset != nullptr) {
    *offset = launchable->def->params[index].offset;
  }
  if (size != nullptr) {
    *size = launchable->def->params[index].size;
  }
  return CUDA_SUCCESS;
}

CUresult setFunctionAttribute(CUfunction function) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  auto* launchable = reinterpret_cast<Launchable*>(function);
  if (s.launchables.count(launchable) == 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  launchable->loaded = true;  // changing an attribute loads the code
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace kcap_double

using namespace kcap_double;

// ---- modules and libraries -----------------------------------------------------

DOUBLE_API CUresult cuModuleLoad(CUmodule* module, const char* path) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  std::string bytes;
  if (path == nullptr || !readFile(path, bytes)) {
    return CUDA_ERROR_FILE_NOT_FOUND;
  }
  return loadModule(module, bytes.c_str());
}

DOUBLE_API CUresult cuModuleLoadData(CUmodule* module, const void* image) { return loadModule(module, image); }

DOUBLE_API CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned, CUjit_option*, void**) {
  return loadModule(module, image);
}

DOUBLE_API CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatbin) { return loadModule(module, fatbin); }

DOUBLE_API CUresult cuModuleUnload(CUmodule module) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Module* found = findModule(s, module);
  if (found == nullptr || found->library != nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  s.unloadModule(found);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (function == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Module* found = findModule(s, module);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const KernelDef* def = findKernel(*found, name);
  if (def == nullptr) {
    return CUDA_ERROR_NOT_FOUND;
  }
  *function = reinterpret_cast<CUfunction>(s.functionFor(found, def));
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuModuleGetGlobal_v2(CUdeviceptr* address, std::size_t* bytes, CUmodule module, const char* name) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  return getGlobal(findModule(s, module), name, address, bytes);
}

DOUBLE_API CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*, void**, unsigned,
                                      CUlibraryOption*, void**, unsigned) {
  return loadLibrary(library, code);
}

DOUBLE_API CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* path, CUjit_option*, void**, unsigned,
                                          CUlibraryOption*, void**, unsigned) {
  std::string bytes;
  if (path == nullptr || !readFile(path, bytes)) {
    return CUDA_ERROR_FILE_NOT_FOUND;
  }
  return loadLibrary(library, bytes.c_str());
}

DOUBLE_API CUresult cuLibraryUnload(CUlibrary library) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Library* found = findLibrary(s, library);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (const auto& [def, kernel] : found->kernels) {
    s.launchables.erase(kernel);
    delete kernel;
  }
  s.unloadModule(found->module);
  s.libraries.erase(found);
  delete found;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (kernel == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Library* found = findLibrary(s, library);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const KernelDef* def = findKernel(*found->module, name);
  if (def == nullptr) {
    return CUDA_ERROR_NOT_FOUND;
  }
  *kernel = reinterpret_cast<CUkernel>(kernelFor(s, *found, def));
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLibraryGetKernelCount(unsigned* count, CUlibrary library) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (count == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Library* found = findLibrary(s, library);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *count = static_cast<unsigned>(found->module->contents.kernels.size());
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLibraryEnumerateKernels(CUkernel* kernels, unsigned count, CUlibrary library) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Library* found = findLibrary(s, library);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const auto& defs = found->module->contents.kernels;
  if (kernels == nullptr || count != defs.size()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (unsigned i = 0; i < count; ++i) {
    kernels[i] = reinterpret_cast<CUkernel>(kernelFor(s, *found, defs[i]));
  }
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLibraryGetModule(CUmodule* module, CUlibrary library) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (module == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Library* found = findLibrary(s, library);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *module = reinterpret_cast<CUmodule>(found->module);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLibraryGetGlobal(CUdeviceptr* address, std::size_t* bytes, CUlibrary library, const char* name) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Library* found = findLibrary(s, library);
  return getGlobal(found != nullptr ? found->module : nullptr, name, address, bytes);
}

DOUBLE_API CUresult cuKernelGetFunction(CUfunction* function, CUkernel kernel) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (function == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Launchable* found = findLaunchable(s, kernel, Launchable::Kind::kErnel);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *function = reinterpret_cast<CUfunction>(s.functionFor(found->module, found->def));
  return CUDA_SUCCESS;
}

// ---- functions and kernels --------------------------------------------------------

DOUBLE_API CUresult cuFuncGetName(const char** name, CUfunction function) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (name == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Launchable* found = findLaunchable(s, function, Launchable::Kind::kFunction);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *name = found->def->name.data();  // names are string literals
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuKernelGetName(const char** name, CUkernel kernel) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (name == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Launchable* found = findLaunchable(s, kernel, Launchable::Kind::kErnel);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *name = found->def->name.data();
  return CUDA_SUCCESS;
}

// KCAP_DOUBLE_NO_PARAM_INFO=1: a driver that cannot tell a kernel's
// parameters (the recording then has no layout for its launches).
// KCAP_DOUBLE_NO_KERNEL_PARAM_INFO=1: one that cannot tell a CUkernel's,
// only those of its function in a context.
namespace {
bool noParamInfo() {
  static const bool refuse = std::getenv("KCAP_DOUBLE_NO_PARAM_INFO") != nullptr;
  return refuse;
}
bool noKernelParamInfo() {
  static const bool refuse = std::getenv("KCAP_DOUBLE_NO_KERNEL_PARAM_INFO") != nullptr;
  return refuse;
}
}  // namespace

DOUBLE_API CUresult cuFuncGetParamInfo(CUfunction function, std::size_t index, std::size_t* offset, std::size_t* size) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (noParamInfo()) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Launchable* launchable = findLaunchable(s, function, Launchable::Kind::kFunction);
  if (launchable != nullptr && !launchable->loaded) {
    return CUDA_ERROR_INVALID_VALUE;  // what the real driver says of code not loaded yet
  }
  return paramInfo(launchable, index, offset, size);
}

DOUBLE_API CUresult cuFuncIsLoaded(CUfunctionLoadingState* state, CUfunction function) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = kcap_double::state();
  Lock lock(s.mutex);
  const Launchable* launchable = findLaunchable(s, function, Launchable::Kind::kFunction);
  if (launchable == nullptr || state == nullptr) {
    return launchable == nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
  }
  *state = launchable->loaded ? CU_FUNCTION_LOADING_STATE_LOADED : CU_FUNCTION_LOADING_STATE_UNLOADED;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuFuncLoad(CUfunction function) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  auto* launchable = const_cast<Launchable*>(findLaunchable(s, function, Launchable::Kind::kFunction));
  if (launchable == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  launchable->loaded = true;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuKernelGetParamInfo(CUkernel kernel, std::size_t index, std::size_t* offset, std::size_t* size) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (noParamInfo() || noKernelParamInfo()) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  State& s = state();
  Lock lock(s.mutex);
  return paramInfo(findLaunchable(s, kernel, Launchable::Kind::kErnel), index, offset, size);
}

DOUBLE_API CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute, int) {
  return setFunctionAttribute(function);  // any handle that launches takes attributes
}

DOUBLE_API CUresult cuFuncSetCacheConfig(CUfunction function, CUfunc_cache) { return setFunctionAttribute(function); }

DOUBLE_API CUresult cuKernelSetAttribute(CUfunction_attribute, int, CUkernel kernel, CUdevice device) {
  if (const CUresult r = needInit(); r != CUDA_SUCCESS) {
    return r;
  }
  if (!knownDevice(device)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  State& s = state();
  Lock lock(s.mutex);
  return findLaunchable(s, kernel, Launchable::Kind::kErnel) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// ---- the JIT linker --------------------------------------------------------------
// The double links by listing what its inputs define: cuLinkComplete hands
// back PTX-like text naming every kernel and global of the images added,
// which cuModuleLoadData then takes like any PTX (images.cpp). Enough for
// replay's linking of relocatable device code to be tested end to end.

namespace kcap_double {
namespace {

struct LinkState {
  std::string linked = "// kcap driver double: linked image\n";
  std::size_t inputs = 0;
};

}  // namespace
}  // namespace kcap_double

DOUBLE_API CUresult cuLinkCreate_v2(unsigned, CUjit_option*, void**, CUlinkState* stateOut) {
  if (const CUresult r = needContext(); r != CUDA_SUCCESS) {
    return r;
  }
  if (stateOut == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *stateOut = reinterpret_cast<CUlinkState>(new LinkState);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLinkAddData_v2(CUlinkState stateIn, CUjitInputType type, void* data, std::size_t size,
                                     const char*, unsigned, CUjit_option*, void**) {
  auto* link = reinterpret_cast<LinkState*>(stateIn);
  if (link == nullptr || data == nullptr || size == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (type != CU_JIT_INPUT_PTX && type != CU_JIT_INPUT_FATBINARY && type != CU_JIT_INPUT_CUBIN) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  ImageContents contents;
  if (!inspectImage(data, contents)) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  for (const KernelDef* kernel : contents.kernels) {
    link->linked += ".entry " + std::string(kernel->name) + "\n";
  }
  for (const GlobalDef* global : contents.globals) {
    link->linked += ".global " + std::string(global->name) + "\n";
  }
  ++link->inputs;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLinkComplete(CUlinkState stateIn, void** cubin, std::size_t* size) {
  auto* link = reinterpret_cast<LinkState*>(stateIn);
  if (link == nullptr || cubin == nullptr || size == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (link->inputs == 0) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  *cubin = link->linked.data();  // NUL-terminated, owned by the state
  *size = link->linked.size() + 1;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLinkDestroy(CUlinkState stateIn) {
  delete reinterpret_cast<LinkState*>(stateIn);
  return CUDA_SUCCESS;
}
