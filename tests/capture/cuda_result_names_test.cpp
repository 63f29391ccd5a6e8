// The shim's CUresult name table against the cuda.h of this build: the names
// an apiError event carries at process exit, when the driver cannot say.
#include "cuda_result_names.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace kcap {
namespace {

TEST(CudaResultNames, NamesTheCommonResults) {
  EXPECT_STREQ(cudaResultName(CUDA_SUCCESS), "CUDA_SUCCESS");
  EXPECT_STREQ(cudaResultName(CUDA_ERROR_INVALID_VALUE), "CUDA_ERROR_INVALID_VALUE");
  EXPECT_STREQ(cudaResultName(CUDA_ERROR_DEINITIALIZED), "CUDA_ERROR_DEINITIALIZED");
  EXPECT_STREQ(cudaResultName(CUDA_ERROR_ILLEGAL_ADDRESS), "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_STREQ(cudaResultName(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
  EXPECT_STREQ(cudaResultName(CUDA_ERROR_UNKNOWN), "CUDA_ERROR_UNKNOWN");
}

TEST(CudaResultNames, UnknownValuesHaveNoName) {
  EXPECT_EQ(cudaResultName(static_cast<CUresult>(10)), nullptr);  // between PROFILER_ALREADY_STOPPED and STUB_LIBRARY
  EXPECT_EQ(cudaResultName(static_cast<CUresult>(1000)), nullptr);
}

// Every enumerator of `typedef enum cudaError_enum {...} CUresult` in the
// header this build compiles against is in the table under its own name.
TEST(CudaResultNames, ListsEveryEnumeratorOfCudaH) {
  std::ifstream header(KCAP_CUDA_H);
  ASSERT_TRUE(header) << "cannot read " << KCAP_CUDA_H;
  std::stringstream text;
  text << header.rdbuf();
  const std::string all = text.str();
  const size_t begin = all.find("typedef enum cudaError_enum");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = all.find("} CUresult;", begin);
  ASSERT_NE(end, std::string::npos);
  const std::string body = all.substr(begin, end - begin);

  const std::regex enumerator(R"((CUDA_[A-Z0-9_]+)\s*=\s*(\d+))");
  int seen = 0;
  for (std::sregex_iterator it(body.begin(), body.end(), enumerator), last; it != last; ++it) {
    const std::string name = (*it)[1];
    const int value = std::stoi((*it)[2]);
    const char* listed = cudaResultName(static_cast<CUresult>(value));
    EXPECT_NE(listed, nullptr) << name << " = " << value << " is not in the table";
    if (listed != nullptr) {
      EXPECT_EQ(std::string(listed), name) << "value " << value;
    }
    ++seen;
  }
  EXPECT_GE(seen, 90) << "the CUresult enum was not parsed";
}

}  // namespace
}  // namespace kcap
