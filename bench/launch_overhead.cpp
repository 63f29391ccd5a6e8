// Launch overhead: how long a thread spends per launch of an empty kernel,
// for bench/launch_overhead.py to compare without the shim, with it passing
// calls through, and with it recording metadata (docs/benchmarks.md).
//
//   kcap_bench_launch_overhead [--launches N] [--reps R] [--warmup W] [--threads T] [--pin-cpu C]
//                              [--interleave P] [--same-blocks 1] [--graph 1] [--host-work NS]
//                              [--rest-ms MS] [--hooked-work NS]
//
// --graph 1: each launch is a cuGraphLaunch of a graph (one per thread)
// whose one node launches kcap_empty, instead of a cuLaunchKernel; the
// interleaved direct blocks call libcuda's own cuGraphLaunch. Prints `made
// graph_launches N` instead of the kernel count.
//
// --same-blocks 1: with --interleave, the second block of each pair also
// goes through the program's entry point (the shim's): an A/A run, whose
// pair differences show the method's own spread, and whose blocks are all
// recorded, as in a process that records every launch.
//
// --rest-ms MS: the threads sleep MS ms before each repetition (not timed):
// whatever the shim's threads still have to do catches up between them.
//
// --hooked-work NS: with --interleave, only the hooked blocks' threads spin
// NS ns after each launch. Without the shim (both blocks then call
// libcuda's own entry point) it measures what NS ns of a thread's own work
// between launches costs in wall time, the way the shim's figure is
// measured: at one thread NS, at several what libcuda's contention makes of it.
//
// --host-work NS: after each launch the launching thread spins NS ns on the
// CPU, touching nothing shared: what any interposer that adds NS ns of its
// own work to a launch costs, with no threads and no shared state of its
// own. Run without the shim, it tells how libcuda's contention among
// several launching threads turns a thread's added CPU time into wall time.
//
// Each of T threads (default 1) launches kcap_empty (kernels/empty.cu,
// <<<1, 1>>>, no parameters) N times (default 100000) into its own stream
// with cuLaunchKernel, then synchronizes that stream; a repetition is timed
// on the host (steady_clock) from the start of the launch loop to the end of
// the synchronize, all threads starting together. R repetitions (default 7)
// after W untimed warm-up launches a thread (default 1000; they also start
// the shim's recording, which happens at the first launch). With --pin-cpu,
// thread t runs on CPU C + t from the end of its warm-up on (threads made
// before, the shim's among them, keep running anywhere): which core, and
// how far it is from the GPU, changes a launch's cost by hundreds of ns
// from one process to the next, more than the shim adds.
//
// --interleave P: instead of the repetitions, P pairs of blocks of N
// launches a thread in one process, one block through `cuLaunchKernel` as the
// program links it (the shim's, under LD_PRELOAD) and one through libcuda's
// own cuLaunchKernel, found in libcuda's dynamic symbol table so that no
// interposer sees it; in the order ABBA BAAB ... so that drift cancels. With
// T threads all of them run the same kind of block at once, between two
// barriers (the block's time is the slowest thread's). The difference of a
// pair is what the shim adds to a launch, measured without the spread
// between processes (which core, which driver state: larger than what the
// shim adds, see docs/benchmarks.md). The shim's writer works behind the
// launches by its batching delay, a small part of a block, so its work
// lands in the hooked block's time.
// Prints per pair
//   pair I hooked_ns_per_launch X direct_ns_per_launch Y
//   ... hooked_cpu_ns_per_launch X2 direct_cpu_ns_per_launch Y2
//   ... hooked_process_cpu_ns_per_launch X3 direct_process_cpu_ns_per_launch Y3
// (X2, Y2: the launching threads' CPU time, getrusage RUSAGE_THREAD, per
// launch; X3, Y3: the whole process's, the shim's writer included), then
// interleaved_added_ns_per_launch Z (the median of X - Y),
// interleaved_added_cpu_ns_per_launch Z2 (of X2 - Y2),
// interleaved_added_process_cpu_ns_per_launch Z3 (of X3 - Y3), and
// `made kernel kcap_empty` counts only the launches the shim could see.
//
// Prints, one fact a line:
//   rep I ns_per_launch X loop_ns_per_launch Y   X: loop + synchronize, Y: loop only
//                                                (slowest thread, per launch of one thread)
//   median_ns_per_launch X
//   min_ns_per_launch X
//   median_loop_ns_per_launch Y
//   involuntary_switches_per_1k_launches Z        the launching threads' involuntary
//                                                context switches over the timed
//                                                repetitions (getrusage RUSAGE_THREAD):
//                                                other threads (the shim's writer
//                                                among them) taking their CPU
//   voluntary_switches_per_1k_launches Z          ... and voluntary ones (blocking:
//                                                a contended lock, a full queue)
//   migrations_per_1k_launches Z                  ... and moves to another CPU (a perf
//                                                software counter; -1 where the
//                                                kernel does not allow it)
//   process_cpu_ns_per_launch Z                   CPU time of the whole process (every
//                                                thread: the driver's, the shim's
//                                                writer) over the timed repetitions,
//                                                per launch
//
// An empty kernel runs for about a microsecond: when the host submits
// faster than the GPU retires, the launch queue fills and cuLaunchKernel
// waits, so the figures are max(host cost, GPU cost) per launch. The shim's
// cost shows in full only while the host side is the slower one (see
// docs/benchmarks.md for how to read a small difference).
#include "gpu_bench.h"

#include <elf.h>
#include <link.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <barrier>
#include <cstring>
#include <thread>

namespace {

struct Options {
  unsigned long long launches = 100000;
  unsigned long long reps = 7;
  unsigned long long warmup = 1000;
  unsigned long long threads = 1;
  long long pinCpu = -1;                // -1: not pinned
  unsigned long long interleave = 0;    // pairs of blocks; 0: repetitions
  bool graph = false;                   // cuGraphLaunch of a one-node graph instead of cuLaunchKernel
  unsigned long long hostWorkNs = 0;    // spun on the CPU after each launch
  unsigned long long restMs = 0;        // the threads sleep this long before each repetition
  unsigned long long hookedWorkNs = 0;  // --interleave: spun after each launch of the hooked blocks only
  bool sameBlocks = false;              // --interleave's "direct" blocks also through the program's entry point
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const char* flag = argv[i];
    if (std::strcmp(flag, "--help") == 0) {
      std::printf(
          "usage: %s [--launches N] [--reps R] [--warmup W] [--threads T] [--pin-cpu C] "
          "[--interleave P] [--same-blocks 1] [--graph 1] [--host-work NS] [--rest-ms MS] [--hooked-work NS]\n",
          argv[0]);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: needs a value\n", flag);
      std::exit(2);
    }
    const unsigned long long value = bench::number(flag, argv[++i]);
    if (std::strcmp(flag, "--launches") == 0) {
      options.launches = value;
    } else if (std::strcmp(flag, "--reps") == 0) {
      options.reps = value;
    } else if (std::strcmp(flag, "--warmup") == 0) {
      options.warmup = value;
    } else if (std::strcmp(flag, "--threads") == 0) {
      options.threads = value;
    } else if (std::strcmp(flag, "--pin-cpu") == 0) {
      options.pinCpu = static_cast<long long>(value);
    } else if (std::strcmp(flag, "--interleave") == 0) {
      options.interleave = value;
    } else if (std::strcmp(flag, "--graph") == 0) {
      options.graph = value != 0;
    } else if (std::strcmp(flag, "--host-work") == 0) {
      options.hostWorkNs = value;
    } else if (std::strcmp(flag, "--hooked-work") == 0) {
      options.hookedWorkNs = value;
    } else if (std::strcmp(flag, "--rest-ms") == 0) {
      options.restMs = value;
    } else if (std::strcmp(flag, "--same-blocks") == 0) {
      options.sameBlocks = value != 0;
    } else {
      std::fprintf(stderr, "unknown flag %s (--help)\n", flag);
      std::exit(2);
    }
  }
  if (options.launches == 0 || options.reps == 0 || options.threads == 0 || options.threads > 1024) {
    std::fprintf(stderr, "--launches, --reps need at least 1, --threads 1..1024\n");
    std::exit(2);
  }
  return options;
}

using LaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  CUstream, void**, void**);
using GraphLaunch = CUresult (*)(CUgraphExec, CUstream);

// What one launch is: the empty kernel, or a graph that launches it, and
// the host work that follows it.
struct Unit {
  CUfunction empty = nullptr;
  CUgraphExec graph = nullptr;  // --graph
  unsigned long long hostWorkNs = 0;
};

// The entry points a block calls: the program's (the shim's, under
// LD_PRELOAD) or libcuda's own.
struct EntryPoints {
  LaunchKernel kernel = &cuLaunchKernel;
  GraphLaunch graph = &cuGraphLaunch;
};

// A graph of one node that launches `empty` <<<1, 1>>>, made executable.
CUgraphExec oneNodeGraph(CUfunction empty) {
  CUgraph graph = nullptr;
  BENCH_CHECK(cuGraphCreate(&graph, 0));
  CUDA_KERNEL_NODE_PARAMS node{};
  node.func = empty;
  node.gridDimX = node.gridDimY = node.gridDimZ = 1;
  node.blockDimX = node.blockDimY = node.blockDimZ = 1;
  CUgraphNode added = nullptr;
  BENCH_CHECK(cuGraphAddKernelNode(&added, graph, nullptr, 0, &node));
  CUgraphExec exec = nullptr;
  BENCH_CHECK(cuGraphInstantiate(&exec, graph, 0));
  BENCH_CHECK(cuGraphDestroy(graph));
  return exec;
}

Unit unitFor(const Options& options, CUfunction empty) {
  return {empty, options.graph ? oneNodeGraph(empty) : nullptr, options.hostWorkNs};
}

// --host-work: spins until `ns` have passed (steady clock).
void spinFor(unsigned long long ns) {
  const double until = bench::nowNs() + static_cast<double>(ns);
  while (bench::nowNs() < until) {}
}

void launchMany(const Unit& unit, CUstream stream, unsigned long long count, const EntryPoints& entry = {}) {
  if (unit.graph != nullptr) {
    for (unsigned long long i = 0; i < count; ++i) {
      const CUresult r = entry.graph(unit.graph, stream);
      if (r != CUDA_SUCCESS) [[unlikely]] {
        bench::die("cuGraphLaunch", r);
      }
      if (unit.hostWorkNs != 0) spinFor(unit.hostWorkNs);
    }
    return;
  }
  for (unsigned long long i = 0; i < count; ++i) {
    const CUresult r = entry.kernel(unit.empty, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr);
    if (r != CUDA_SUCCESS) [[unlikely]] {
      bench::die("cuLaunchKernel", r);
    }
    if (unit.hostWorkNs != 0) spinFor(unit.hostWorkNs);
  }
}

// The closing "made" line: what the shim's counts and trace must hold.
void printMade(const Options& options, unsigned long long perThread) {
  if (options.graph) {
    std::printf("made graph_launches %llu\n", perThread * options.threads);
  } else {
    std::printf("made kernel kcap_empty %llu\n", perThread * options.threads);
  }
}

struct Times {
  std::vector<double> loopNs;    // per repetition: the launch loop
  std::vector<double> totalNs;   // the loop and the synchronize
  long involuntarySwitches = 0;  // over all repetitions
  long voluntarySwitches = 0;
  long long migrations = -1;  // -1: not counted
};

rusage usageOf(int who) {
  rusage usage{};
  getrusage(who, &usage);
  return usage;
}

double cpuNs(const rusage& usage) {
  const auto ns = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_usec) * 1e3;
  };
  return ns(usage.ru_utime) + ns(usage.ru_stime);
}

// The calling thread's CPU migrations from now on (a perf software counter,
// which needs no privilege for one's own thread at perf_event_paranoid <= 2);
// -1 when the kernel refuses.
int countMigrationsOfThisThread() {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_MIGRATIONS;
  attr.exclude_kernel = 0;
  return static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
}

long long readCounter(int fd) {
  long long value = 0;
  if (fd < 0 || read(fd, &value, sizeof value) != static_cast<ssize_t>(sizeof value)) return -1;
  close(fd);
  return value;
}

// The GNU hash of a symbol name (the ELF gABI extension glibc uses).
uint32_t gnuHash(const char* name) {
  uint32_t h = 5381;
  for (; *name != 0; ++name) {
    h = h * 33 + static_cast<unsigned char>(*name);
  }
  return h;
}

struct SymbolQuery {
  const char* library;  // a part of the loaded object's path
  const char* name;
  void* found = nullptr;
};

// Looks the symbol up in one loaded object's own dynamic symbol table
// (DT_GNU_HASH), as the loader would in that object alone: dlsym cannot be
// used, the shim answers it.
int findInObject(dl_phdr_info* info, size_t, void* data) {
  auto* query = static_cast<SymbolQuery*>(data);
  if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, query->library) == nullptr) {
    return 0;
  }
  const ElfW(Addr) base = info->dlpi_addr;
  // glibc relocates these entries in place; other loaders may not.
  const auto address = [base](ElfW(Addr) value) { return value < base ? value + base : value; };
  const ElfW(Sym)* symbols = nullptr;
  const char* names = nullptr;
  const uint32_t* hash = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) {
      continue;
    }
    for (auto* entry = reinterpret_cast<const ElfW(Dyn)*>(base + info->dlpi_phdr[i].p_vaddr); entry->d_tag != DT_NULL;
         ++entry) {
      if (entry->d_tag == DT_SYMTAB) {
        symbols = reinterpret_cast<const ElfW(Sym)*>(address(entry->d_un.d_ptr));
      } else if (entry->d_tag == DT_STRTAB) {
        names = reinterpret_cast<const char*>(address(entry->d_un.d_ptr));
      } else if (entry->d_tag == DT_GNU_HASH) {
        hash = reinterpret_cast<const uint32_t*>(address(entry->d_un.d_ptr));
      }
    }
  }
  if (symbols == nullptr || names == nullptr || hash == nullptr) {
    return 0;
  }
  const uint32_t buckets = hash[0];
  const uint32_t firstHashed = hash[1];
  const uint32_t bloomWords = hash[2];
  const auto* bucket = reinterpret_cast<const uint32_t*>(reinterpret_cast<const ElfW(Addr)*>(hash + 4) + bloomWords);
  const uint32_t* chain = bucket + buckets;
  const uint32_t h = gnuHash(query->name);
  for (uint32_t index = bucket[h % buckets]; index >= firstHashed && index != 0; ++index) {
    const uint32_t entry = chain[index - firstHashed];
    const ElfW(Sym)& symbol = symbols[index];
    if ((entry | 1) == (h | 1) && symbol.st_shndx != SHN_UNDEF &&
        std::strcmp(names + symbol.st_name, query->name) == 0) {
      query->found = reinterpret_cast<void*>(base + symbol.st_value);
      return 1;
    }
    if ((entry & 1) != 0) {
      break;
    }
  }
  return 0;
}

// libcuda's own `name`, found in its dynamic symbol table so that no
// interposer sees the call.
void* driversOwn(const char* name) {
  SymbolQuery query{"libcuda.so", name};
  dl_iterate_phdr(findInObject, &query);
  if (query.found == nullptr) {
    std::fprintf(stderr, "%s not found in libcuda's symbol table\n", name);
    std::exit(1);
  }
  return query.found;
}

// Pins the calling thread (thread t of the launching ones) to CPU C + t
// when --pin-cpu C is given.
void pinLaunchingThread(const Options& options, unsigned long long t) {
  if (options.pinCpu < 0) return;
  const long long cpu = options.pinCpu + static_cast<long long>(t);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(static_cast<int>(cpu), &cpus);
  if (pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus) != 0) {
    std::fprintf(stderr, "cannot pin thread %llu to CPU %lld\n", t, cpu);
    std::exit(1);
  }
}

// What a launching thread launches into: its own unit and stream, made
// current and warmed up (through every entry point it will call: the
// program's, and libcuda's own when `direct` is given).
struct ThreadSetup {
  Unit unit;
  CUstream stream = nullptr;
};

ThreadSetup startLaunchingThread(const Options& options, CUcontext context, CUfunction empty,
                                 const EntryPoints* direct = nullptr) {
  BENCH_CHECK(cuCtxSetCurrent(context));
  ThreadSetup setup{unitFor(options, empty)};
  BENCH_CHECK(cuStreamCreate(&setup.stream, CU_STREAM_NON_BLOCKING));
  launchMany(setup.unit, setup.stream, options.warmup);
  if (direct != nullptr) launchMany(setup.unit, setup.stream, options.warmup, *direct);
  BENCH_CHECK(cuStreamSynchronize(setup.stream));
  return setup;
}

// --interleave: pairs of blocks, hooked against direct, in one process.
// With several threads every thread runs the same kind of block at once
// (a barrier before and after each), and a block takes as long as its
// slowest thread.
int runInterleaved(const Options& options, CUcontext context, CUfunction empty) {
  const EntryPoints direct = options.sameBlocks
                                 ? EntryPoints{}
                                 : EntryPoints{reinterpret_cast<LaunchKernel>(driversOwn("cuLaunchKernel")),
                                               reinterpret_cast<GraphLaunch>(driversOwn("cuGraphLaunch"))};
  const bool linked = options.graph ? direct.graph == &cuGraphLaunch : direct.kernel == &cuLaunchKernel;
  std::printf("direct_is_linked %d\n", linked ? 1 : 0);  // 1: nothing interposes, or --same-blocks
  const double n = static_cast<double>(options.launches);
  const double launched = n * static_cast<double>(options.threads);
  struct BlockTime {
    double wallNs = 0;  // per launch of one thread
    // The launching threads' CPU time, per launch: in a VM guest with
    // steal-time accounting, time the host gave the vCPU to others is
    // not in it, which the wall clock counts.
    double cpuNs = 0;
    double processCpuNs = 0;  // every thread's, the shim's writer among them
  };
  // Each block's figures, in the order run: 2 a pair.
  std::vector<BlockTime> blocks(2 * options.interleave);
  std::vector<std::vector<double>> threadCpu(options.threads, std::vector<double>(blocks.size()));
  std::barrier sync(static_cast<std::ptrdiff_t>(options.threads));
  const auto hookedFirst = [](unsigned long long pair) {
    // ABBA BAAB: each kind goes first as often as second.
    return (pair % 4 == 0) || (pair % 4 == 3);
  };
  const auto threadCpuNs = [] { return cpuNs(usageOf(RUSAGE_THREAD)); };
  std::vector<std::thread> threads;
  for (unsigned long long t = 0; t < options.threads; ++t) {
    threads.emplace_back([&, t] {
      const auto [unit, stream] = startLaunchingThread(options, context, empty, &direct);
      Unit hookedUnit = unit;
      hookedUnit.hostWorkNs += options.hookedWorkNs;
      pinLaunchingThread(options, t);
      for (size_t b = 0; b < blocks.size(); ++b) {
        const bool hooked = (b % 2 == 0) == hookedFirst(b / 2);
        sync.arrive_and_wait();
        const double start = bench::nowNs();
        // The process's CPU is every thread's: thread 0 alone reads it.
        const double processStart = t == 0 ? cpuNs(usageOf(RUSAGE_SELF)) : 0;
        const double cpuStart = threadCpuNs();
        launchMany(hooked ? hookedUnit : unit, stream, options.launches, hooked ? EntryPoints{} : direct);
        BENCH_CHECK(cuStreamSynchronize(stream));
        threadCpu[t][b] = threadCpuNs() - cpuStart;
        sync.arrive_and_wait();
        if (t == 0) {
          blocks[b].wallNs = (bench::nowNs() - start) / n;
          blocks[b].processCpuNs = (cpuNs(usageOf(RUSAGE_SELF)) - processStart) / launched;
        }
      }
      BENCH_CHECK(cuStreamDestroy(stream));
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (size_t b = 0; b < blocks.size(); ++b) {
    double sum = 0;
    for (const auto& perBlock : threadCpu) sum += perBlock[b];
    blocks[b].cpuNs = sum / launched;
  }
  std::vector<double> added;
  std::vector<double> addedCpu;
  std::vector<double> addedProcessCpu;
  for (unsigned long long pair = 0; pair < options.interleave; ++pair) {
    const BlockTime& first = blocks[2 * pair];
    const BlockTime& second = blocks[2 * pair + 1];
    const BlockTime& hooked = hookedFirst(pair) ? first : second;
    const BlockTime& plain = hookedFirst(pair) ? second : first;
    added.push_back(hooked.wallNs - plain.wallNs);
    addedCpu.push_back(hooked.cpuNs - plain.cpuNs);
    addedProcessCpu.push_back(hooked.processCpuNs - plain.processCpuNs);
    std::printf(
        "pair %llu hooked_ns_per_launch %.1f direct_ns_per_launch %.1f hooked_cpu_ns_per_launch %.1f "
        "direct_cpu_ns_per_launch %.1f hooked_process_cpu_ns_per_launch %.1f direct_process_cpu_ns_per_launch %.1f\n",
        pair, hooked.wallNs, plain.wallNs, hooked.cpuNs, plain.cpuNs, hooked.processCpuNs, plain.processCpuNs);
  }
  std::printf("interleaved_added_ns_per_launch %.1f\n", bench::median(added));
  std::printf("interleaved_added_cpu_ns_per_launch %.1f\n", bench::median(addedCpu));
  std::printf("interleaved_added_process_cpu_ns_per_launch %.1f\n", bench::median(addedProcessCpu));
  // Launches through the direct entry point are not the shim's to count;
  // with --same-blocks there are none.
  const unsigned long long blocksThroughShim = options.sameBlocks ? 2 : 1;
  printMade(options, blocksThroughShim * (options.warmup + options.interleave * options.launches));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const CUcontext context = bench::primaryContext();
  const CUfunction empty = bench::loadKernel("empty.fatbin", "kcap_empty");
  std::printf("device %s\n", bench::deviceName().c_str());
  std::printf(
      "config launches %llu reps %llu warmup %llu threads %llu pin_cpu %lld interleave %llu graph %d same_blocks %d "
      "host_work_ns %llu rest_ms %llu hooked_work_ns %llu\n",
      options.launches, options.reps, options.warmup, options.threads, options.pinCpu, options.interleave,
      options.graph ? 1 : 0, options.sameBlocks ? 1 : 0, options.hostWorkNs, options.restMs, options.hookedWorkNs);
  if (options.interleave > 0) {
    return runInterleaved(options, context, empty);
  }

  // Two phases a repetition: everyone starts, everyone has finished.
  std::barrier sync(static_cast<std::ptrdiff_t>(options.threads));
  const double processCpuBefore = cpuNs(usageOf(RUSAGE_SELF));  // (warm-up included: small)
  std::vector<Times> times(options.threads);
  std::vector<std::thread> threads;
  for (unsigned long long t = 0; t < options.threads; ++t) {
    threads.emplace_back([&, t] {
      const auto [unit, stream] = startLaunchingThread(options, context, empty);
      pinLaunchingThread(options, t);
      const rusage before = usageOf(RUSAGE_THREAD);
      const int migrations = countMigrationsOfThisThread();
      for (unsigned long long rep = 0; rep < options.reps; ++rep) {
        if (options.restMs != 0) std::this_thread::sleep_for(std::chrono::milliseconds(options.restMs));
        sync.arrive_and_wait();
        const double start = bench::nowNs();
        launchMany(unit, stream, options.launches);
        const double looped = bench::nowNs();
        BENCH_CHECK(cuStreamSynchronize(stream));
        const double end = bench::nowNs();
        times[t].loopNs.push_back(looped - start);
        times[t].totalNs.push_back(end - start);
        sync.arrive_and_wait();
      }
      const rusage after = usageOf(RUSAGE_THREAD);
      times[t].migrations = readCounter(migrations);
      times[t].involuntarySwitches = after.ru_nivcsw - before.ru_nivcsw;
      times[t].voluntarySwitches = after.ru_nvcsw - before.ru_nvcsw;
      BENCH_CHECK(cuStreamDestroy(stream));
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  const double processCpuNs = cpuNs(usageOf(RUSAGE_SELF)) - processCpuBefore;

  // A repetition takes as long as its slowest thread.
  std::vector<double> perLaunch;
  std::vector<double> loopPerLaunch;
  const double n = static_cast<double>(options.launches);
  for (unsigned long long rep = 0; rep < options.reps; ++rep) {
    double total = 0;
    double loop = 0;
    for (const Times& thread : times) {
      total = std::max(total, thread.totalNs[rep]);
      loop = std::max(loop, thread.loopNs[rep]);
    }
    perLaunch.push_back(total / n);
    loopPerLaunch.push_back(loop / n);
    std::printf("rep %llu ns_per_launch %.1f loop_ns_per_launch %.1f\n", rep, total / n, loop / n);
  }
  std::printf("median_ns_per_launch %.1f\n", bench::median(perLaunch));
  std::printf("min_ns_per_launch %.1f\n", bench::minimum(perLaunch));
  std::printf("median_loop_ns_per_launch %.1f\n", bench::median(loopPerLaunch));
  long involuntary = 0, voluntary = 0;
  long long migrations = 0;
  for (const Times& thread : times) {
    involuntary += thread.involuntarySwitches;
    voluntary += thread.voluntarySwitches;
    migrations = (migrations < 0 || thread.migrations < 0) ? -1 : migrations + thread.migrations;
  }
  const double launched = n * static_cast<double>(options.reps * options.threads);
  const auto per1k = [&](double count) { return 1000.0 * count / launched; };
  std::printf("involuntary_switches_per_1k_launches %.3f\n", per1k(static_cast<double>(involuntary)));
  std::printf("voluntary_switches_per_1k_launches %.3f\n", per1k(static_cast<double>(voluntary)));
  std::printf("migrations_per_1k_launches %.3f\n", migrations < 0 ? -1.0 : per1k(static_cast<double>(migrations)));
  std::printf("process_cpu_ns_per_launch %.1f\n", processCpuNs / launched);
  printMade(options, options.warmup + options.reps * options.launches);
  return 0;
}
