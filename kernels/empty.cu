// kcap_empty: does nothing.
//
// Benchmark material (bench/launch_overhead.cpp): with no work and no
// parameters, a launch costs only the driver's submission path, so what the
// shim adds to each launch is what shows.

extern "C" __global__ void kcap_empty() {}
