#include "code_cache.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "driver.h"
#include "image_choice.h"

namespace kcap::replay {

CodeCache::CodeCache(Driver& driver, format::TraceReader& reader, int sm, const ReplayOptions& options)
    : driver_(driver), reader_(reader), sm_(sm), options_(options) {
  // Compiled once: kernelFor searches every kernel's name with each.
  for (const KernelOverride& override : options_.overrides) {
    try {
      overridePatterns_.emplace_back(override.kernelPattern);
    } catch (const std::invalid_argument& e) {
      throw ReplayError("--override " + override.kernelPattern + ": not a valid regular expression (" + e.what() + ")");
    }
  }
}

CodeCache::~CodeCache() {
  for (auto& [key, m] : recorded_) driver_.cuModuleUnload(m.module);
  for (auto& [key, m] : overrides_) driver_.cuModuleUnload(m.module);
}

CUmodule CodeCache::loadImage(const std::vector<uint8_t>& bytes, const std::string& what) {
  CUmodule module = nullptr;
  // The JIT's own log says why PTX does not compile: keep it for the message.
  char log[4096] = {};
  CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(sizeof log)};
  const CUresult result = driver_.cuModuleLoadDataEx(&module, bytes.data(), 2, keys, values);
  if (result != CUDA_SUCCESS) {
    std::string message = what;
    if (log[0] != '\0') message += " (JIT log: " + std::string(log, strnlen(log, sizeof log)) + ")";
    throw CudaError(result, message);
  }
  return module;
}

CodeCache::Module& CodeCache::loadRecorded(const StoredEvent& event) {
  const auto found = recorded_.find(event.seq());
  if (found != recorded_.end()) return found->second;
  const auto load = event.get().getModuleLoad();
  const std::string image = "event #" + std::to_string(event.seq()) + "'s module image";
  const std::vector<uint8_t> bytes = reader_.readContent(load.getImage(), format::kMaxCodeImageSize, image.c_str());
  ImageChoice choice = chooseCode(image::Bytes(bytes.data(), bytes.size()), sm_, options_.forcePtx);
  if (load.getExtraImages().size() != 0 && !choice.sass) {
    // Relocatable device code: the wrapper's own fatbin is nvcc's device-link
    // output, SASS for the architectures the program was built for; the extra
    // fatbins are its translation units, which cudart links with the driver's
    // linker when that SASS does not fit the GPU. Replay does the same, and
    // for --force-ptx (device-link output holds no PTX).
    return recorded_.emplace(event.seq(), linkRelocatable(load)).first->second;
  }
  if (!choice.runnable) throw ReplayError(choice.why);
  Module m;
  const std::string what = "loading the recorded image (" + imageContents(image::Bytes(bytes.data(), bytes.size())) +
                           ") on sm_" + std::to_string(sm_);
  m.module = loadImage(choice.ptx.empty() ? bytes : choice.ptx, what);
  m.code = choice.description;

  return recorded_.emplace(event.seq(), std::move(m)).first->second;
}

CodeCache::Module CodeCache::linkRelocatable(schema::ModuleLoad::Reader load) {
  const auto extras = load.getExtraImages();
  const std::string what = "linking the recorded relocatable device code (" + std::to_string(extras.size()) +
                           " fatbins) on sm_" + std::to_string(sm_);
  if (driver_.cuLinkCreate == nullptr || driver_.cuLinkAddData == nullptr || driver_.cuLinkComplete == nullptr ||
      driver_.cuLinkDestroy == nullptr) {
    throw ReplayError(what + ": this driver has no cuLink* functions");
  }
  char log[4096] = {};
  CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(sizeof log)};
  CUlinkState link = nullptr;
  check(driver_.cuLinkCreate(2, keys, values, &link), what);
  // Destroyed on every path: the linked cubin lives in the link state.
  struct Destroy {
    Driver& driver;
    CUlinkState link;
    ~Destroy() { driver.cuLinkDestroy(link); }
  } destroy{driver_, link};
  const auto fail = [&](CUresult result, const std::string& step) {
    std::string message = what + ": " + step;
    if (log[0] != '\0') message += " (linker log: " + std::string(log, strnlen(log, sizeof log)) + ")";
    throw CudaError(result, message);
  };
  std::vector<std::string> parts;
  for (unsigned i = 0; i < extras.size(); ++i) {
    std::vector<uint8_t> bytes = reader_.readContent(extras[i], format::kMaxCodeImageSize,
                                                     (what + ": extra image " + std::to_string(i)).c_str());
    ImageChoice choice = chooseCode(image::Bytes(bytes.data(), bytes.size()), sm_, options_.forcePtx);
    if (!choice.runnable) throw ReplayError(what + ": fatbin " + std::to_string(i) + ": " + choice.why);
    const bool ptx = !choice.ptx.empty();
    std::vector<uint8_t> input = ptx ? std::move(choice.ptx) : std::move(bytes);
    const std::string name = "kcap_rdc_" + std::to_string(i);
    const CUresult added = driver_.cuLinkAddData(link, ptx ? CU_JIT_INPUT_PTX : CU_JIT_INPUT_FATBINARY, input.data(),
                                                 input.size(), name.c_str(), 0, nullptr, nullptr);
    if (added != CUDA_SUCCESS) fail(added, "adding fatbin " + std::to_string(i));
    parts.push_back(choice.description);
  }
  void* cubin = nullptr;
  size_t cubinSize = 0;
  const CUresult linked = driver_.cuLinkComplete(link, &cubin, &cubinSize);
  if (linked != CUDA_SUCCESS) fail(linked, "cuLinkComplete");
  const auto* begin = static_cast<const uint8_t*>(cubin);
  Module m;
  m.module = loadImage(std::vector<uint8_t>(begin, begin + cubinSize), what);
  m.code = "relocatable device code linked here from " + std::to_string(extras.size()) + " fatbins (";
  for (size_t i = 0; i < parts.size(); ++i) m.code += (i ? ", " : "") + parts[i];
  m.code += ")";
  return m;
}

CodeCache::Module& CodeCache::loadOverride(const KernelOverride& override) {
  const auto found = overrides_.find(override.imagePath);
  if (found != overrides_.end()) return found->second;
  std::ifstream in(override.imagePath, std::ios::binary);
  if (!in) throw ReplayError("--override: cannot read " + override.imagePath);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty()) throw ReplayError("--override: " + override.imagePath + " is empty");
  const auto identified = image::identify(image::Bytes(bytes.data(), bytes.size()));
  if (identified && identified->kind == image::Kind::kPtx && bytes.back() != 0) bytes.push_back(0);
  if (!identified) {
    // PTX files do not end in a NUL: try again as text.
    bytes.push_back(0);
    if (!image::identify(image::Bytes(bytes.data(), bytes.size()))) {
      throw ReplayError("--override: " + override.imagePath + " is not a cubin, fatbin or PTX file");
    }
  }
  ImageChoice choice = chooseCode(image::Bytes(bytes.data(), bytes.size()), sm_, options_.forcePtx);
  if (!choice.runnable) throw ReplayError("--override " + override.imagePath + ": " + choice.why);
  Module m;
  m.module = loadImage(choice.ptx.empty() ? bytes : choice.ptx, "loading --override " + override.imagePath);
  m.code = "override " + override.imagePath + " (" + choice.description + ")";
  return overrides_.emplace(override.imagePath, std::move(m)).first->second;
}

std::vector<GlobalPlacement> CodeCache::globalsOf(CUmodule module, const StoredEvent& load) {
  std::vector<GlobalPlacement> globals;
  for (const auto global : load.get().getModuleLoad().getGlobals()) {
    GlobalPlacement g;
    g.name = global.getName();
    g.recordedAddress = global.getAddress();
    g.size = global.getSize();
    size_t size = 0;
    if (driver_.cuModuleGetGlobal(&g.address, &size, module, g.name.c_str()) == CUDA_SUCCESS) {
      g.size = std::min<uint64_t>(g.size, size);
      globals.push_back(g);
    }
  }
  return globals;
}

LoadedKernel CodeCache::kernelFor(const CodeRef& code) {
  Module& recorded = loadRecorded(*code.load);
  Module* module = &recorded;
  for (size_t i = 0; i < overridePatterns_.size(); ++i) {
    if (overridePatterns_[i].search(code.kernelName)) {
      module = &loadOverride(options_.overrides[i]);
      break;
    }
  }
  LoadedKernel kernel;
  kernel.code = module->code;
  const CUresult found = driver_.cuModuleGetFunction(&kernel.function, module->module, code.kernelName.c_str());
  if (found != CUDA_SUCCESS) {
    throw CudaError(found, "kernel " + code.kernelName + " not found in " +
                               (module == &recorded ? std::string("the recorded image") : kernel.code));
  }
  for (const auto& event : code.attributes) {
    const auto a = event->get().getFunctionAttribute();
    switch (a.getApi()) {
      case schema::AttributeApi::FUNC_SET_ATTRIBUTE:
      case schema::AttributeApi::KERNEL_SET_ATTRIBUTE:
        check(driver_.cuFuncSetAttribute(kernel.function, static_cast<CUfunction_attribute>(a.getAttribute()),
                                         static_cast<int>(a.getValue())),
              "re-applying recorded attribute " + std::to_string(a.getAttribute()) + " = " +
                  std::to_string(a.getValue()));
        break;
      case schema::AttributeApi::FUNC_SET_CACHE_CONFIG:
      case schema::AttributeApi::KERNEL_SET_CACHE_CONFIG:
        driver_.cuFuncSetCacheConfig(kernel.function, static_cast<CUfunc_cache>(a.getAttribute()));
        break;
      default:
        break;  // shared-memory bank config: a no-op on current GPUs
    }
  }
  // The globals the launch reaches are the module's that runs it (an
  // override build has its own, found by the recorded names).
  kernel.globals = globalsOf(module->module, *code.load);
  return kernel;
}

}  // namespace kcap::replay
