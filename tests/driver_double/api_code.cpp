// Modules, libraries, functions and kernels: loading the real images of
// kernels/ (images.cpp says how they are recognized) and the handles and
// queries built on them.
#include "driver_exports.h"
#include "state.h"

#include <cuda.h>

#include <cstdio>
#include <string>

namespace kcap_double {
namespace {

const KernelDef* find_kernel(const Module& module, const char* name) {
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

bool read_file(const char* path, std::string& bytes) {
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

CUresult load_module(CUmodule* module, const void* image) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  if (module == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Module* loaded = nullptr;
  const CUresult r = s.load_module(image, loaded);
  if (r == CUDA_SUCCESS) {
    *module = reinterpret_cast<CUmodule>(loaded);
  }
  return r;
}

CUresult load_library(CUlibrary* library, const void* code) {
  if (const CUresult r = need_init(); r != CUDA_SUCCESS) {
    return r;
  }
  if (library == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Module* module = nullptr;
  if (const CUresult r = s.load_module(code, module); r != CUDA_SUCCESS) {
    return r;
  }
  if (content_hash_fault() == "refuse" && find_kernel(*module, "kcap_content_hash") != nullptr) {
    s.unload_module(module);
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  auto* loaded = new Library{module, {}};
  module->library = loaded;
  s.libraries.insert(loaded);
  *library = reinterpret_cast<CUlibrary>(loaded);
  return CUDA_SUCCESS;
}

Library* find_library(State& s, CUlibrary library) {
  auto* found = reinterpret_cast<Library*>(library);
  return s.libraries.count(found) != 0 ? found : nullptr;
}

Module* find_module(State& s, CUmodule module) {
  auto* found = reinterpret_cast<Module*>(module);
  return s.modules.count(found) != 0 ? found : nullptr;
}

Launchable* kernel_for(State& s, Library& library, const KernelDef* def) {
  Launchable*& kernel = library.kernels[def];
  if (kernel == nullptr) {
    kernel = new Launchable{Launchable::Kind::kernel, def, library.module};
    s.launchables.insert(kernel);
  }
  return kernel;
}

CUresult get_global(Module* module, const char* name, CUdeviceptr* address, std::size_t* bytes) {
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
    state().range_of(base, ignored, *bytes);
  }
  return CUDA_SUCCESS;
}

CUresult param_info(const Launchable* launchable, std::size_t index, std::size_t* offset, std::size_t* size) {
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

CUresult set_function_attribute(CUfunction function) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  return s.launchables.count(reinterpret_cast<const Launchable*>(function)) != 0 ? CUDA_SUCCESS
                                                                                 : CUDA_ERROR_INVALID_HANDLE;
}

}  // namespace
}  // namespace kcap_double

using namespace kcap_double;

// ---- modules and libraries -----------------------------------------------------

DOUBLE_API CUresult cuModuleLoad(CUmodule* module, const char* path) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  std::string bytes;
  if (path == nullptr || !read_file(path, bytes)) {
    return CUDA_ERROR_FILE_NOT_FOUND;
  }
  return load_module(module, bytes.c_str());
}

DOUBLE_API CUresult cuModuleLoadData(CUmodule* module, const void* image) { return load_module(module, image); }

DOUBLE_API CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned, CUjit_option*, void**) {
  return load_module(module, image);
}

DOUBLE_API CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatbin) { return load_module(module, fatbin); }

DOUBLE_API CUresult cuModuleUnload(CUmodule module) {
  if (const CUresult r = need_init(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Module* found = find_module(s, module);
  if (found == nullptr || found->library != nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  s.unload_module(found);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  if (function == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Module* found = find_module(s, module);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const KernelDef* def = find_kernel(*found, name);
  if (def == nullptr) {
    return CUDA_ERROR_NOT_FOUND;
  }
  *function = reinterpret_cast<CUfunction>(s.function_for(found, def));
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuModuleGetGlobal_v2(CUdeviceptr* address, std::size_t* bytes, CUmodule module, const char* name) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  return get_global(find_module(s, module), name, address, bytes);
}

DOUBLE_API CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*, void**, unsigned,
                                      CUlibraryOption*, void**, unsigned) {
  return load_library(library, code);
}

DOUBLE_API CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* path, CUjit_option*, void**, unsigned,
                                          CUlibraryOption*, void**, unsigned) {
  std::string bytes;
  if (path == nullptr || !read_file(path, bytes)) {
    return CUDA_ERROR_FILE_NOT_FOUND;
  }
  return load_library(library, bytes.c_str());
}

DOUBLE_API CUresult cuLibraryUnload(CUlibrary library) {
  if (const CUresult r = need_init(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Library* found = find_library(s, library);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (const auto& [def, kernel] : found->kernels) {
    s.launchables.erase(kernel);
    delete kernel;
  }
  s.unload_module(found->module);
  s.libraries.erase(found);
  delete found;
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
  if (const CUresult r = need_init(); r != CUDA_SUCCESS) {
    return r;
  }
  if (kernel == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Library* found = find_library(s, library);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const KernelDef* def = find_kernel(*found->module, name);
  if (def == nullptr) {
    return CUDA_ERROR_NOT_FOUND;
  }
  *kernel = reinterpret_cast<CUkernel>(kernel_for(s, *found, def));
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLibraryGetKernelCount(unsigned* count, CUlibrary library) {
  if (const CUresult r = need_init(); r != CUDA_SUCCESS) {
    return r;
  }
  if (count == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Library* found = find_library(s, library);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *count = static_cast<unsigned>(found->module->contents.kernels.size());
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLibraryEnumerateKernels(CUkernel* kernels, unsigned count, CUlibrary library) {
  if (const CUresult r = need_init(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Library* found = find_library(s, library);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const auto& defs = found->module->contents.kernels;
  if (kernels == nullptr || count != defs.size()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (unsigned i = 0; i < count; ++i) {
    kernels[i] = reinterpret_cast<CUkernel>(kernel_for(s, *found, defs[i]));
  }
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLibraryGetModule(CUmodule* module, CUlibrary library) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  if (module == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  Library* found = find_library(s, library);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *module = reinterpret_cast<CUmodule>(found->module);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLibraryGetGlobal(CUdeviceptr* address, std::size_t* bytes, CUlibrary library, const char* name) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  Library* found = find_library(s, library);
  return get_global(found != nullptr ? found->module : nullptr, name, address, bytes);
}

DOUBLE_API CUresult cuKernelGetFunction(CUfunction* function, CUkernel kernel) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  if (function == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Launchable* found = find_launchable(s, kernel, Launchable::Kind::kernel);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *function = reinterpret_cast<CUfunction>(s.function_for(found->module, found->def));
  return CUDA_SUCCESS;
}

// ---- functions and kernels --------------------------------------------------------

DOUBLE_API CUresult cuFuncGetName(const char** name, CUfunction function) {
  if (const CUresult r = need_init(); r != CUDA_SUCCESS) {
    return r;
  }
  if (name == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Launchable* found = find_launchable(s, function, Launchable::Kind::function);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *name = found->def->name.data();  // names are string literals
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuKernelGetName(const char** name, CUkernel kernel) {
  if (const CUresult r = need_init(); r != CUDA_SUCCESS) {
    return r;
  }
  if (name == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = state();
  Lock lock(s.mutex);
  const Launchable* found = find_launchable(s, kernel, Launchable::Kind::kernel);
  if (found == nullptr) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *name = found->def->name.data();
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuFuncGetParamInfo(CUfunction function, std::size_t index, std::size_t* offset, std::size_t* size) {
  if (const CUresult r = need_init(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  return param_info(find_launchable(s, function, Launchable::Kind::function), index, offset, size);
}

DOUBLE_API CUresult cuKernelGetParamInfo(CUkernel kernel, std::size_t index, std::size_t* offset, std::size_t* size) {
  if (const CUresult r = need_init(); r != CUDA_SUCCESS) {
    return r;
  }
  State& s = state();
  Lock lock(s.mutex);
  return param_info(find_launchable(s, kernel, Launchable::Kind::kernel), index, offset, size);
}

DOUBLE_API CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute, int) {
  return set_function_attribute(function);  // any handle that launches takes attributes
}

DOUBLE_API CUresult cuFuncSetCacheConfig(CUfunction function, CUfunc_cache) { return set_function_attribute(function); }

DOUBLE_API CUresult cuKernelSetAttribute(CUfunction_attribute, int, CUkernel kernel, CUdevice device) {
  if (const CUresult r = need_init(); r != CUDA_SUCCESS) {
    return r;
  }
  if (device != 0) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  State& s = state();
  Lock lock(s.mutex);
  return find_launchable(s, kernel, Launchable::Kind::kernel) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
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

DOUBLE_API CUresult cuLinkCreate_v2(unsigned, CUjit_option*, void**, CUlinkState* state_out) {
  if (const CUresult r = need_context(); r != CUDA_SUCCESS) {
    return r;
  }
  if (state_out == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *state_out = reinterpret_cast<CUlinkState>(new LinkState);
  return CUDA_SUCCESS;
}

DOUBLE_API CUresult cuLinkAddData_v2(CUlinkState state_in, CUjitInputType type, void* data, std::size_t size,
                                     const char*, unsigned, CUjit_option*, void**) {
  auto* link = reinterpret_cast<LinkState*>(state_in);
  if (link == nullptr || data == nullptr || size == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (type != CU_JIT_INPUT_PTX && type != CU_JIT_INPUT_FATBINARY && type != CU_JIT_INPUT_CUBIN) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  ImageContents contents;
  if (!inspect_image(data, contents)) {
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

DOUBLE_API CUresult cuLinkComplete(CUlinkState state_in, void** cubin, std::size_t* size) {
  auto* link = reinterpret_cast<LinkState*>(state_in);
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

DOUBLE_API CUresult cuLinkDestroy(CUlinkState state_in) {
  delete reinterpret_cast<LinkState*>(state_in);
  return CUDA_SUCCESS;
}
