// Code: module and library loads (with their image bytes and globals),
// unloads, launch handles (with their parameter layouts), attributes.
#include "record/recorder.h"

#include "code_image.h"
#include "job_environment.h"
#include "record/code_registry.h"
#include "record/driver_api.h"

#include <cstdio>
#include <map>
#include <mutex>

namespace kcap {
namespace {

std::optional<std::vector<uint8_t>> readFile(const char* path) {
  std::FILE* in = std::fopen(path, "rb");
  if (in == nullptr) {
    return std::nullopt;
  }
  std::vector<uint8_t> bytes;
  uint8_t chunk[65536];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, in)) > 0) {
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  const bool ok = std::ferror(in) == 0;
  std::fclose(in);
  if (!ok) {
    return std::nullopt;
  }
  return bytes;
}

schema::ImageKind imageKind(image::Kind kind) {
  switch (kind) {
    case image::Kind::kFatbin:
      return schema::ImageKind::FATBIN;
    case image::Kind::kCubin:
      return schema::ImageKind::CUBIN;
    case image::Kind::kPtx:
      return schema::ImageKind::PTX;
    case image::Kind::kFatbinWrapper:
      return schema::ImageKind::FATBIN_WRAPPER;
    case image::Kind::kUnknown:
      break;
  }
  return schema::ImageKind::UNKNOWN;
}

// Addresses of the named globals, from the driver. Names the driver does not
// know (a PTX-only declaration it optimized away) are left out.
std::vector<GlobalVariable> resolveGlobals(uint64_t handle, bool isLibrary, const std::vector<std::string>& names) {
  const DriverApi& api = driverApi();
  std::vector<GlobalVariable> globals;
  for (const std::string& name : names) {
    CUdeviceptr address = 0;
    size_t size = 0;
    CUresult r = CUDA_ERROR_NOT_FOUND;
    if (isLibrary && api.libraryGetGlobal != nullptr) {
      r = api.libraryGetGlobal(&address, &size, reinterpret_cast<CUlibrary>(handle), name.c_str());
    } else if (!isLibrary && api.moduleGetGlobal != nullptr) {
      r = api.moduleGetGlobal(&address, &size, reinterpret_cast<CUmodule>(handle), name.c_str());
    }
    if (r == CUDA_SUCCESS && address != 0 && size != 0) {
      globals.push_back({name, address, size});
    }
  }
  return globals;
}

// One copy of each distinct layout, never freed: FunctionInfo, the
// per-thread caches and launch events in the writer's queue point to it.
const std::vector<ParamSlot>* internLayout(const std::vector<ParamSlot>& layout) {
  static std::mutex mutex;
  static auto* const layouts = new std::map<std::string, std::unique_ptr<const std::vector<ParamSlot>>>;
  std::string key;
  for (const ParamSlot& slot : layout) {
    key.append(reinterpret_cast<const char*>(&slot.offset), sizeof slot.offset);
    key.append(reinterpret_cast<const char*>(&slot.size), sizeof slot.size);
  }
  std::lock_guard lock(mutex);
  auto& interned = (*layouts)[key];
  if (!interned) {
    interned = std::make_unique<const std::vector<ParamSlot>>(layout);
  }
  return interned.get();
}

// Whether the driver has loaded a function's code (false only when it says
// so: a driver without cuFuncIsLoaded loads everything eagerly).
bool functionLoaded(uint64_t handle) {
  const auto isLoaded = driverApi().funcIsLoaded;
  CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_LOADED;
  return isLoaded == nullptr || isLoaded(&state, reinterpret_cast<CUfunction>(handle)) != CUDA_SUCCESS ||
         state != CU_FUNCTION_LOADING_STATE_UNLOADED;
}

// The parameter layout of a launch handle, from the driver. A CUkernel needs
// cuKernelGetParamInfo (cuFuncGetParamInfo rejects it, CUDA-NOTES).
// `firstAnswer`, when given, receives the driver's answer for parameter 0.
const std::vector<ParamSlot>* queryLayout(uint64_t handle, bool isKernel, CUresult* firstAnswer = nullptr) {
  const DriverApi& api = driverApi();
  if (isKernel ? api.kernelGetParamInfo == nullptr : api.funcGetParamInfo == nullptr) {
    if (firstAnswer != nullptr) *firstAnswer = CUDA_ERROR_NOT_SUPPORTED;
    return nullptr;
  }
  std::vector<ParamSlot> slots;
  std::vector<ParamSlot>* layout = &slots;
  constexpr size_t kMaxParams = 4096;
  for (size_t i = 0; i < kMaxParams; ++i) {
    size_t offset = 0;
    size_t size = 0;
    const CUresult r = isKernel ? api.kernelGetParamInfo(reinterpret_cast<CUkernel>(handle), i, &offset, &size)
                                : api.funcGetParamInfo(reinterpret_cast<CUfunction>(handle), i, &offset, &size);
    if (i == 0 && firstAnswer != nullptr) *firstAnswer = r;
    if (r != CUDA_SUCCESS) {
      // Past the last parameter the driver says INVALID_VALUE; any other
      // answer for the first one means it cannot tell. So does
      // INVALID_VALUE for a function not loaded yet (lazy loading), which
      // has parameters all the same.
      if (i == 0 && (r != CUDA_ERROR_INVALID_VALUE || (!isKernel && !functionLoaded(handle)))) {
        return nullptr;
      }
      break;
    }
    layout->push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(size)});
  }
  return internLayout(slots);
}

}  // namespace

void Recorder::moduleLoaded(const ModuleLoadCall& call) {
  Operation operation(*this);
  if (!operation) {
    return;
  }
  EventMessage message(*this);
  auto load = message.event().initModuleLoad();
  load.setHandle(call.handle);
  load.setIsLibrary(call.isLibrary);
  load.setApi(call.api);
  load.setContext(currentContext());
  load.setDevice(currentDevice());
  load.setResult(call.result);

  // The image: a file's bytes, or the memory the loader was given (only
  // parsed once the driver accepted it: its extent is computed, not given).
  std::optional<std::vector<uint8_t>> fileBytes;
  std::optional<image::Image> code;
  if (call.path != nullptr) {
    load.setPath(call.path);
    fileBytes = readFile(call.path);
    if (fileBytes) {
      code = image::identify(image::Bytes(*fileBytes));
    }
  } else if (call.image != nullptr && call.result == CUDA_SUCCESS) {
    code = image::identify(call.image);
  }
  if (code) {
    load.setImageKind(imageKind(code->kind));
    writer_->storeContent(code->bytes.data(), code->bytes.size(), load.initImage());
    auto extra = load.initExtraImages(static_cast<unsigned>(code->extra.size()));
    for (unsigned i = 0; i < code->extra.size(); ++i) {
      writer_->storeContent(code->extra[i].data(), code->extra[i].size(), extra[i]);
    }
  }
  auto jit = load.initJitOptions(call.jitOptions != nullptr && call.jitValues != nullptr ? call.jitOptionCount : 0);
  for (unsigned i = 0; i < jit.size(); ++i) {
    jit[i].setOption(static_cast<int32_t>(call.jitOptions[i]));
    jit[i].setValue(reinterpret_cast<uint64_t>(call.jitValues[i]));
  }

  if (call.result == CUDA_SUCCESS) {
    std::vector<GlobalVariable> globals;
    if (code) {
      globals = resolveGlobals(call.handle, call.isLibrary, image::globalNames(*code));
    }
    auto list = load.initGlobals(static_cast<unsigned>(globals.size()));
    for (unsigned i = 0; i < globals.size(); ++i) {
      list[i].setName(globals[i].name);
      list[i].setAddress(globals[i].address);
      list[i].setSize(globals[i].size);
    }
    CodeRegistry::instance().recordedLoad(call.handle, std::move(globals));
  }
  append(message);
}

void Recorder::moduleUnloaded(uint64_t handle, bool isLibrary, CUresult result) {
  if (result != CUDA_SUCCESS) {
    return;
  }
  Operation operation(*this);
  if (!operation) {
    return;
  }
  CodeRegistry::instance().recordedUnload(handle);
  EventMessage message(*this);
  auto unload = message.event().initModuleUnload();
  unload.setHandle(handle);
  unload.setIsLibrary(isLibrary);
  append(message);
}

void Recorder::functionBound(schema::BindApi api, CUresult result, uint64_t handle, bool isKernel, uint64_t owner,
                             const char* name) {
  if (result != CUDA_SUCCESS) {
    return;
  }
  Operation operation(*this);
  if (!operation) {
    return;
  }
  FunctionInfo info;
  info.isKernel = isKernel;
  info.owner = owner;
  std::string kernelName = name != nullptr ? name : "";
  uint64_t source = 0;
  if (api == schema::BindApi::KERNEL_GET_FUNCTION) {
    // `owner` is the CUkernel: the function belongs to its library.
    source = owner;
    info.owner = CodeRegistry::instance().recordedKernel(source, kernelName);
  }
  const bool isModule = api == schema::BindApi::LIBRARY_GET_MODULE;
  if (api == schema::BindApi::KERNEL_GET_FUNCTION) {
    // The kernel's parameters are the function's, and the kernel can tell
    // them before the function's code is loaded.
    info.layout = queryLayout(source, true);
  }
  if (!isModule && info.layout == nullptr) {
    info.layout = queryLayout(handle, isKernel);
  }

  EventMessage message(*this);
  auto bind = message.event().initFunctionBind();
  bind.setHandle(handle);
  bind.setIsKernel(isKernel);
  bind.setModuleHandle(info.owner);
  bind.setName(kernelName);
  bind.setApi(api);
  bind.setContext(currentContext());
  bind.setSourceHandle(source);
  if (info.layout) {
    auto params = bind.initParams(static_cast<unsigned>(info.layout->size()));
    for (unsigned i = 0; i < info.layout->size(); ++i) {
      params[i].setOffset((*info.layout)[i].offset);
      params[i].setSize((*info.layout)[i].size);
    }
  }
  if (isModule) {
    CodeRegistry::instance().recordedLibraryModule(handle, owner);
  } else {
    const bool libraryKernel =
        api == schema::BindApi::LIBRARY_GET_KERNEL || api == schema::BindApi::LIBRARY_ENUMERATE_KERNELS;
    CodeRegistry::instance().recordedBind(handle, info, libraryKernel ? &kernelName : nullptr);
  }
  append(message);
}

void Recorder::functionAttribute(schema::AttributeApi api, CUresult result, uint64_t handle, int32_t attribute,
                                 int64_t value, int32_t device) {
  Operation operation(*this);
  if (!operation) {
    return;
  }
  EventMessage message(*this);
  auto set = message.event().initFunctionAttribute();
  set.setHandle(handle);
  set.setApi(api);
  set.setAttribute(attribute);
  set.setValue(value);
  set.setDevice(device);
  set.setResult(result);
  append(message);
}

LaunchTarget Recorder::launchTarget(CUfunction function) {
  // A per-thread cache: no lock for a handle the thread launched before,
  // while the code generation holds. The kernel's name and what the
  // recorder knows of the handle, in one entry, one line.
  struct alignas(64) Cached {
    CUfunction handle;
    std::uint64_t generation;
    const Recorder* recorder;
    LaunchTarget target;
  };
  constexpr size_t kEntries = 16;
  thread_local Cached t_cache[kEntries] = {};
  Cached& cached = t_cache[(reinterpret_cast<std::uintptr_t>(function) >> 4) % kEntries];
  const std::uint64_t generation = codeGeneration();
  if (cached.handle == function && cached.generation == generation && cached.recorder == this) {
    return cached.target;
  }
  LaunchTarget target{CodeRegistry::instance().nameOf(function), lookupFunction(function)};
  target.waitsForHost = waitsForHost(target.kernelName);
  target.nccl = format::isNcclKernel(target.kernelName);
  cached = {function, generation, this, target};
  return target;
}

FunctionInfo Recorder::lookupFunction(CUfunction function) {
  const auto handle = reinterpret_cast<uint64_t>(function);
  if (std::optional<FunctionInfo> known = CodeRegistry::instance().recordedFunction(handle)) {
    return *known;
  }
  // A handle made where the shim did not see it (enumeration APIs): ask
  // the driver, as a CUfunction first, then as a CUkernel.
  FunctionInfo info;
  info.layout = queryLayout(handle, false);
  if (!info.layout) {
    info.layout = queryLayout(handle, true);
    info.isKernel = info.layout != nullptr;
  }
  return CodeRegistry::instance().rememberFunction(handle, std::move(info));
}

const std::vector<ParamSlot>* Recorder::layoutAtLaunch(CUfunction handle, FunctionInfo info, std::string& why) {
  // Under lazy loading a function's code, and with it what the driver can
  // say of its parameters, is loaded by its first launch. It is being
  // launched: loading it a moment earlier changes nothing the program sees.
  // Asked again whether or not this loads it: something else (an attribute
  // or occupancy query) may have loaded it since it was bound. A CUkernel
  // is asked as itself, then through its function in this context. Asked
  // once: what the driver answers now is kept for every later launch (the
  // registry's change reaches each thread's cache).
  const DriverApi& api = driverApi();
  char name[32];
  CUfunction function = handle;
  if (info.isKernel) {
    CUresult answer = CUDA_SUCCESS;
    info.layout = queryLayout(reinterpret_cast<uint64_t>(handle), true, &answer);
    why = std::string("cuKernelGetParamInfo answered ") + resultName(answer, name) + " for parameter 0";
    function = nullptr;
    if (info.layout == nullptr && api.kernelGetFunction != nullptr) {
      const CUresult got = api.kernelGetFunction(&function, reinterpret_cast<CUkernel>(handle));
      if (got != CUDA_SUCCESS) {
        why += std::string(", cuKernelGetFunction ") + resultName(got, name);
        function = nullptr;
      }
    }
  }
  if (function != nullptr) {
    const auto functionHandle = reinterpret_cast<uint64_t>(function);
    const bool wasLoaded = functionLoaded(functionHandle);
    CUresult loaded = CUDA_SUCCESS;
    if (!wasLoaded && api.funcLoad != nullptr) loaded = api.funcLoad(function);
    CUresult answer = CUDA_SUCCESS;
    info.layout = queryLayout(functionHandle, false, &answer);
    if (!why.empty()) why += "; its function: ";
    why += std::string("cuFuncGetParamInfo answered ") + resultName(answer, name) + " for parameter 0, the function ";
    if (wasLoaded) {
      why += "was loaded";
    } else if (api.funcLoad == nullptr) {
      why += "was not loaded and this driver has no cuFuncLoad";
    } else {
      why += std::string("was not loaded, cuFuncLoad answered ") + resultName(loaded, name);
    }
  }
  if (info.layout != nullptr) why.clear();
  info.layoutAskedAtLaunch = true;
  CodeRegistry::instance().recordedBind(reinterpret_cast<uint64_t>(handle), info, nullptr);
  return info.layout;
}

}  // namespace kcap
