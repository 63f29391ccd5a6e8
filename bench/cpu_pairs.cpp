// kcap_bench_cpu_pairs: which CPUs slow a given CPU down when they work.
//
// A VM's vCPUs may be hyperthreads of one physical core even when the guest
// sees "one thread per core" (lscpu). Two threads on such a pair share a
// core's execution units and its L1/L2 caches, so whatever the shim's
// writer threads do there slows the launching thread down, while on any
// other vCPU it would not. This measures it directly: a thread pinned to
// --cpu runs a fixed loop, first alone, then while a second thread runs the
// same kind of loop on each other CPU in turn. A slowdown well above the
// others (tens of percent) marks a CPU that shares the measured CPU's core.
//
// Two loops: "compute" (independent multiply chains, bound by the core's
// execution units) and "cache" (dependent loads over 1.5 MiB, sensitive to
// sharing L2). Each figure is the median of --reps timed runs of --ms.
//
//   kcap_bench_cpu_pairs [--cpu C] [--ms MS] [--reps R]
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

bool pinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Eight independent xorshift-multiply chains: more multiplies than one
// core's multiplier issues in their latency, so the loop is bound by the
// core's execution units (what a hyperthread sibling competes for), not by
// the chains' latency.
uint64_t computeSteps(uint64_t steps, uint64_t seed) {
  uint64_t v[8];
  for (int k = 0; k < 8; ++k) v[k] = seed * (2 * k + 3) + k;
  for (uint64_t i = 0; i < steps; ++i) {
    for (int k = 0; k < 8; ++k) {
      v[k] ^= v[k] >> 29;
      v[k] *= 0x9E3779B97F4A7C15ull + 2 * static_cast<uint64_t>(k);
    }
  }
  uint64_t all = 0;
  for (uint64_t x : v) all ^= x;
  return all;
}

// A random cycle through 1.5 MiB (64-byte steps): each load waits for the
// last. It fits one core's L2 on the H200 host (2 MiB), two of them do not:
// a thread on the same core's other hyperthread turns its hits into misses.
struct Ring {
  std::vector<uint32_t> next;
  explicit Ring(uint64_t seed) : next(1536 * 1024 / 64 * 16) {
    const size_t lines = next.size() / 16;
    std::vector<uint32_t> order(lines);
    for (size_t i = 0; i < lines; ++i) order[i] = static_cast<uint32_t>(i);
    uint64_t x = seed | 1;
    for (size_t i = lines - 1; i > 0; --i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      std::swap(order[i], order[x % (i + 1)]);
    }
    for (size_t i = 0; i < lines; ++i) next[order[i] * 16] = order[(i + 1) % lines] * 16;
  }
  uint32_t walk(uint64_t steps, uint32_t at) const {
    for (uint64_t i = 0; i < steps; ++i) at = next[at];
    return at;
  }
};

std::atomic<uint64_t> g_sink{0};

// Steps a second of the chosen loop on the calling thread, over `ms`.
double rate(bool cache, const Ring& ring, int ms) {
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  const uint64_t chunk = cache ? 20000 : 100000;
  uint64_t steps = 0, sink = 0;
  uint32_t at = 0;
  const auto start = Clock::now();
  auto now = start;
  while (now < end) {
    if (cache) {
      at = ring.walk(chunk, at);
    } else {
      sink += computeSteps(chunk, steps + 1);
    }
    steps += chunk;
    now = Clock::now();
  }
  g_sink += sink + at;
  return static_cast<double>(steps) / std::chrono::duration<double>(now - start).count();
}

double medianRate(bool cache, const Ring& ring, int ms, int reps) {
  // Sized up front: GCC 14's -Wnull-dereference cannot see that a vector
  // grown by push_back in a loop is not empty after it.
  std::vector<double> rates(static_cast<size_t>(std::max(1, reps)));
  for (double& value : rates) value = rate(cache, ring, ms);
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

// Runs the same kind of loop on `cpu` until told to stop.
struct Burner {
  std::atomic<bool> stop{false};
  std::thread thread;
  Burner(int cpu, bool cache)
      : thread([this, cpu, cache] {
          pinTo(cpu);
          const Ring ring(0x5eed + static_cast<uint64_t>(cpu));
          uint64_t sink = 0;
          uint32_t at = 0;
          while (!stop.load(std::memory_order_relaxed)) {
            if (cache) {
              at = ring.walk(20000, at);
            } else {
              sink += computeSteps(100000, sink);
            }
          }
          g_sink += sink + at;
        }) {}
  ~Burner() {
    stop = true;
    thread.join();
  }
};

// A whole non-negative decimal number, or -1.
int parseCount(const char* text) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 0 || value > 1000000) return -1;
  return static_cast<int>(value);
}

}  // namespace

int main(int argc, char** argv) {
  int measured = 2, ms = 100, reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    int* target = arg == "--cpu" ? &measured : arg == "--ms" ? &ms : arg == "--reps" ? &reps : nullptr;
    const char* text = target != nullptr && i + 1 < argc ? argv[++i] : "";
    const int value = target != nullptr ? parseCount(text) : -1;
    if (value < 0) {
      std::fprintf(stderr, "cpu_pairs: '%s %s': expected --cpu C, --ms MS or --reps R (whole numbers)\n", arg.c_str(),
                   text);
      return 2;
    }
    *target = value;
  }
  ms = std::max(10, ms);
  reps = std::max(1, reps);

  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || !CPU_ISSET(measured, &allowed) || !pinTo(measured)) {
    std::fprintf(stderr, "cpu_pairs: cannot run on CPU %d\n", measured);
    return 1;
  }
  const Ring ring(0x5eed);
  std::printf("measured CPU %d; %d ms x %d reps a figure; slowdown = 1 - rate with a busy CPU / rate alone\n", measured,
              ms, reps);
  const double aloneCompute = medianRate(false, ring, ms, reps);
  const double aloneCache = medianRate(true, ring, ms, reps);
  std::printf("alone: compute %.1f M steps/s, cache %.1f M loads/s\n", aloneCompute / 1e6, aloneCache / 1e6);
  std::printf("busy_cpu compute_slowdown_pct cache_slowdown_pct\n");
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (cpu == measured || !CPU_ISSET(cpu, &allowed)) continue;
    double compute = 0, cache = 0;
    {
      const Burner burner(cpu, false);
      compute = medianRate(false, ring, ms, reps);
    }
    {
      const Burner burner(cpu, true);
      cache = medianRate(true, ring, ms, reps);
    }
    std::printf("%d %.1f %.1f\n", cpu, 100.0 * (1 - compute / aloneCompute), 100.0 * (1 - cache / aloneCache));
  }
  // Alone again: drift of the measured CPU itself during the run.
  std::printf("alone again: compute %.1f M steps/s, cache %.1f M loads/s\n", medianRate(false, ring, ms, reps) / 1e6,
              medianRate(true, ring, ms, reps) / 1e6);
  return g_sink.load() == 42 ? 3 : 0;  // keeps the loops' results alive
}
