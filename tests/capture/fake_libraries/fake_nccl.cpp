// A stand-in for libnccl.so.2 (tests only): nothing but NCCL's version
// function, answering NCCL 2.27.3's code, for library_versions_test.cpp.
extern "C" __attribute__((visibility("default"))) int ncclGetVersion(int* version) {
  if (version == nullptr) return 4;  // ncclInvalidArgument
  *version = 22703;
  return 0;  // ncclSuccess
}
