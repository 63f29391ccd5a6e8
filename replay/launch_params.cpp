// The Replayer's parameter side: the recorded parameter bytes, with pointer
// words rewritten where memory moved and tensor maps re-encoded from their
// recorded arguments. Every offset from the trace is checked in 64 bits.
#include "replayer.h"

#include <cstdint>
#include <cstring>

#include "driver.h"

namespace kcap::replay {

// A recorded tensor map encode run again here, with the global address
// translated as any pointer is: a CUtensorMap's bytes are the driver's own,
// not necessarily valid on another GPU or driver, while its arguments are.
// nullopt when this driver lacks the encode function, or the recorded
// arguments are incomplete (lists shorter than the rank): the caller keeps the
// recorded bytes. A failing encode is an error of the launch.
std::optional<CUtensorMap> Replayer::reencode(schema::TensorMapEncode::Reader encode, uint64_t seq,
                                              const LoadedKernel& kernel) {
  const uint32_t rank = encode.getRank();
  if (rank == 0 || rank > 5 || encode.getGlobalDim().size() != rank || encode.getElementStrides().size() != rank ||
      encode.getGlobalStrides().size() != rank - 1) {
    return std::nullopt;
  }
  uint64_t dims[5] = {}, strides[5] = {};
  uint32_t box[5] = {}, elementStrides[5] = {};
  int lower[5] = {}, upper[5] = {};
  for (uint32_t i = 0; i < rank; ++i) {
    dims[i] = encode.getGlobalDim()[i];
    elementStrides[i] = encode.getElementStrides()[i];
    if (i + 1 < rank) strides[i] = encode.getGlobalStrides()[i];
  }
  const uint64_t recorded = encode.getGlobalAddress();
  void* address = reinterpret_cast<void*>(translate(recorded, kernel).value_or(recorded));
  const auto type = static_cast<CUtensorMapDataType>(encode.getDataType());
  const auto interleave = static_cast<CUtensorMapInterleave>(encode.getInterleave());
  const auto swizzle = static_cast<CUtensorMapSwizzle>(encode.getSwizzle());
  const auto l2 = static_cast<CUtensorMapL2promotion>(encode.getL2Promotion());
  const auto oob = static_cast<CUtensorMapFloatOOBfill>(encode.getOobFill());
  CUtensorMap map{};
  CUresult result = CUDA_SUCCESS;
  switch (encode.getApi()) {
    case schema::TensorMapApi::TILED:
      if (driver_.cuTensorMapEncodeTiled == nullptr || encode.getBoxDim().size() != rank) return std::nullopt;
      for (uint32_t i = 0; i < rank; ++i) box[i] = encode.getBoxDim()[i];
      result = driver_.cuTensorMapEncodeTiled(&map, type, rank, address, dims, strides, box, elementStrides, interleave,
                                              swizzle, l2, oob);
      break;
    case schema::TensorMapApi::IM2COL:
      if (driver_.cuTensorMapEncodeIm2col == nullptr || rank < 3 ||
          encode.getPixelBoxLowerCorner().size() != rank - 2 || encode.getPixelBoxUpperCorner().size() != rank - 2) {
        return std::nullopt;
      }
      for (uint32_t i = 0; i + 2 < rank; ++i) {
        lower[i] = encode.getPixelBoxLowerCorner()[i];
        upper[i] = encode.getPixelBoxUpperCorner()[i];
      }
      result = driver_.cuTensorMapEncodeIm2col(&map, type, rank, address, dims, strides, lower, upper,
                                               encode.getChannelsPerPixel(), encode.getPixelsPerColumn(),
                                               elementStrides, interleave, swizzle, l2, oob);
      break;
    case schema::TensorMapApi::IM2COL_WIDE:
      if (driver_.cuTensorMapEncodeIm2colWide == nullptr) return std::nullopt;
      result = driver_.cuTensorMapEncodeIm2colWide(
          &map, type, rank, address, dims, strides, encode.getPixelBoxLowerCornerWidth(),
          encode.getPixelBoxUpperCornerWidth(), encode.getChannelsPerPixel(), encode.getPixelsPerColumn(),
          elementStrides, interleave, static_cast<CUtensorMapIm2ColWideMode>(encode.getIm2colWideMode()), swizzle, l2,
          oob);
      break;
    default:
      return std::nullopt;  // an encode API newer than this replay
  }
  check(result, "re-encoding the tensor map of tensorMapEncode #" + std::to_string(seq));
  return map;
}

std::string Replayer::missingParameters(const LaunchRecord& launch, const LoadedKernel& kernel) const {
  const auto e = launch.event();
  if (e.getParams().size() != 0 || e.getParamsFromExtra() || driver_.cuFuncGetParamInfo == nullptr) return "";
  size_t offset = 0;
  size_t size = 0;
  if (driver_.cuFuncGetParamInfo(kernel.function, 0, &offset, &size) != CUDA_SUCCESS) return "";
  return "recorded without its parameters (the recording got no parameter layout for this kernel, which takes "
         "some): not launched";
}

LaunchParams Replayer::buildParams(const LaunchRecord& launch, const LoadedKernel& kernel) {
  LaunchParams built;
  buildParamsInto(launch, kernel, built);
  return built;
}

void Replayer::buildParamsInto(const LaunchRecord& launch, const LoadedKernel& kernel, LaunchParams& built) {
  const auto e = launch.event();
  built.bytes.assign(e.getParams().begin(), e.getParams().end());
  built.reencodedFrom.clear();
  std::vector<uint8_t>& params = built.bytes;
  for (const auto word : e.getPointers()) {
    // A tensor map a recorded encode made is made again here.
    if (const StoredEvent* encode = model_.tensorMapEncodeFor(launch, word)) {
      if (const auto map = reencode(encode->get().getTensorMapEncode(), encode->seq(), kernel)) {
        std::memcpy(params.data() + word.getOffset(), &*map, sizeof *map);
        built.reencodedFrom.push_back(encode->seq());
        continue;
      }
    }
    // Offsets are checked in 64 bits (launchParamProblem did too): a 32-bit
    // sum of a hostile offset wraps and would pass.
    const uint64_t offset = word.getOffset();
    const auto moved = translate(word.getValue(), kernel);
    if (!moved || *moved == word.getValue() || offset > params.size() || params.size() - offset < 8) continue;
    if (word.getInTensorMap() && driver_.cuTensorMapReplaceAddress != nullptr &&
        params.size() - offset >= sizeof(CUtensorMap)) {
      CUtensorMap map;
      std::memcpy(&map, params.data() + word.getOffset(), sizeof map);
      check(driver_.cuTensorMapReplaceAddress(&map, reinterpret_cast<void*>(*moved)), "cuTensorMapReplaceAddress");
      std::memcpy(params.data() + word.getOffset(), &map, sizeof map);
    } else {
      const uint64_t value = *moved;
      std::memcpy(params.data() + word.getOffset(), &value, sizeof value);
    }
  }
}

}  // namespace kcap::replay
