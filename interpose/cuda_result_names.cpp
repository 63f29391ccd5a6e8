#include "cuda_result_names.h"

namespace kcap {

// Every enumerator of CUresult in the CUDA 13.0 cuda.h, in its order, by
// value rather than by enumerator, so that the shim still builds against an
// older header. tests/capture/cuda_result_names_test.cpp holds the table
// against the cuda.h of the build: every enumerator listed, with its value.
const char* cudaResultName(CUresult result) noexcept
{
    switch (static_cast<int>(result)) {
        case 0: return "CUDA_SUCCESS";
        case 1: return "CUDA_ERROR_INVALID_VALUE";
        case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
        case 3: return "CUDA_ERROR_NOT_INITIALIZED";
        case 4: return "CUDA_ERROR_DEINITIALIZED";
        case 5: return "CUDA_ERROR_PROFILER_DISABLED";
        case 6: return "CUDA_ERROR_PROFILER_NOT_INITIALIZED";
        case 7: return "CUDA_ERROR_PROFILER_ALREADY_STARTED";
        case 8: return "CUDA_ERROR_PROFILER_ALREADY_STOPPED";
        case 34: return "CUDA_ERROR_STUB_LIBRARY";
        case 36: return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
        case 46: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
        case 100: return "CUDA_ERROR_NO_DEVICE";
        case 101: return "CUDA_ERROR_INVALID_DEVICE";
        case 102: return "CUDA_ERROR_DEVICE_NOT_LICENSED";
        case 200: return "CUDA_ERROR_INVALID_IMAGE";
        case 201: return "CUDA_ERROR_INVALID_CONTEXT";
        case 202: return "CUDA_ERROR_CONTEXT_ALREADY_CURRENT";
        case 205: return "CUDA_ERROR_MAP_FAILED";
        case 206: return "CUDA_ERROR_UNMAP_FAILED";
        case 207: return "CUDA_ERROR_ARRAY_IS_MAPPED";
        case 208: return "CUDA_ERROR_ALREADY_MAPPED";
        case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
        case 210: return "CUDA_ERROR_ALREADY_ACQUIRED";
        case 211: return "CUDA_ERROR_NOT_MAPPED";
        case 212: return "CUDA_ERROR_NOT_MAPPED_AS_ARRAY";
        case 213: return "CUDA_ERROR_NOT_MAPPED_AS_POINTER";
        case 214: return "CUDA_ERROR_ECC_UNCORRECTABLE";
        case 215: return "CUDA_ERROR_UNSUPPORTED_LIMIT";
        case 216: return "CUDA_ERROR_CONTEXT_ALREADY_IN_USE";
        case 217: return "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED";
        case 218: return "CUDA_ERROR_INVALID_PTX";
        case 219: return "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT";
        case 220: return "CUDA_ERROR_NVLINK_UNCORRECTABLE";
        case 221: return "CUDA_ERROR_JIT_COMPILER_NOT_FOUND";
        case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
        case 223: return "CUDA_ERROR_JIT_COMPILATION_DISABLED";
        case 224: return "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY";
        case 225: return "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC";
        case 226: return "CUDA_ERROR_CONTAINED";
        case 300: return "CUDA_ERROR_INVALID_SOURCE";
        case 301: return "CUDA_ERROR_FILE_NOT_FOUND";
        case 302: return "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND";
        case 303: return "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED";
        case 304: return "CUDA_ERROR_OPERATING_SYSTEM";
        case 400: return "CUDA_ERROR_INVALID_HANDLE";
        case 401: return "CUDA_ERROR_ILLEGAL_STATE";
        case 402: return "CUDA_ERROR_LOSSY_QUERY";
        case 500: return "CUDA_ERROR_NOT_FOUND";
        case 600: return "CUDA_ERROR_NOT_READY";
        case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
        case 701: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
        case 702: return "CUDA_ERROR_LAUNCH_TIMEOUT";
        case 703: return "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING";
        case 704: return "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED";
        case 705: return "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED";
        case 708: return "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE";
        case 709: return "CUDA_ERROR_CONTEXT_IS_DESTROYED";
        case 710: return "CUDA_ERROR_ASSERT";
        case 711: return "CUDA_ERROR_TOO_MANY_PEERS";
        case 712: return "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED";
        case 713: return "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED";
        case 714: return "CUDA_ERROR_HARDWARE_STACK_ERROR";
        case 715: return "CUDA_ERROR_ILLEGAL_INSTRUCTION";
        case 716: return "CUDA_ERROR_MISALIGNED_ADDRESS";
        case 717: return "CUDA_ERROR_INVALID_ADDRESS_SPACE";
        case 718: return "CUDA_ERROR_INVALID_PC";
        case 719: return "CUDA_ERROR_LAUNCH_FAILED";
        case 720: return "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE";
        case 721: return "CUDA_ERROR_TENSOR_MEMORY_LEAK";
        case 800: return "CUDA_ERROR_NOT_PERMITTED";
        case 801: return "CUDA_ERROR_NOT_SUPPORTED";
        case 802: return "CUDA_ERROR_SYSTEM_NOT_READY";
        case 803: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
        case 804: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
        case 805: return "CUDA_ERROR_MPS_CONNECTION_FAILED";
        case 806: return "CUDA_ERROR_MPS_RPC_FAILURE";
        case 807: return "CUDA_ERROR_MPS_SERVER_NOT_READY";
        case 808: return "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED";
        case 809: return "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED";
        case 810: return "CUDA_ERROR_MPS_CLIENT_TERMINATED";
        case 811: return "CUDA_ERROR_CDP_NOT_SUPPORTED";
        case 812: return "CUDA_ERROR_CDP_VERSION_MISMATCH";
        case 900: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
        case 901: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
        case 902: return "CUDA_ERROR_STREAM_CAPTURE_MERGE";
        case 903: return "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED";
        case 904: return "CUDA_ERROR_STREAM_CAPTURE_UNJOINED";
        case 905: return "CUDA_ERROR_STREAM_CAPTURE_ISOLATION";
        case 906: return "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT";
        case 907: return "CUDA_ERROR_CAPTURED_EVENT";
        case 908: return "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD";
        case 909: return "CUDA_ERROR_TIMEOUT";
        case 910: return "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE";
        case 911: return "CUDA_ERROR_EXTERNAL_DEVICE";
        case 912: return "CUDA_ERROR_INVALID_CLUSTER_SIZE";
        case 913: return "CUDA_ERROR_FUNCTION_NOT_LOADED";
        case 914: return "CUDA_ERROR_INVALID_RESOURCE_TYPE";
        case 915: return "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION";
        case 916: return "CUDA_ERROR_KEY_ROTATION";
        case 999: return "CUDA_ERROR_UNKNOWN";
        default:
            return nullptr;
    }
}

}  // namespace kcap
