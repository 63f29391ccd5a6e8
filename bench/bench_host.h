// Helpers any host-side benchmark can use to describe the machine it runs on
// and to do the untimed file I/O and clock readings around its timed regions.
// They are kept apart from the benchmarks so that a benchmark's file holds
// only what it measures, and the next benchmark need not copy them.
#pragma once

#include <cstdint>
#include <string>

namespace kcap::bench {

// Both throw std::runtime_error; failErrno appends strerror(errno).
[[noreturn]] void fail(const std::string& what);
[[noreturn]] void failErrno(const std::string& what);

// ---- files and clocks ------------------------------------------------------------

void writeAll(int fd, const uint8_t* data, uint64_t size);
// Reads exactly size bytes; false at a clean end of file before the first byte.
bool readAll(int fd, uint8_t* data, uint64_t size);
int openWrite(const std::string& path);
int openRead(const std::string& path);
void closeFd(int fd);
uint64_t fileSize(const std::string& path);
void truncateIfExists(const std::string& path);
void syncFile(const std::string& path);

double wallNow();

// CPU time of the whole process (every thread a variant uses), user and system.
struct Cpu {
  double user = 0, sys = 0;
  double total() const { return user + sys; }
  Cpu operator-(const Cpu& o) const { return {user - o.user, sys - o.sys}; }
};

Cpu cpuNow();

// CPU seconds all processes spent busy so far (from /proc/stat). With cpuNow()
// this says how much of the machine other processes took during a timing.
double systemBusySeconds();

std::string loadAverage();

// ---- machine ---------------------------------------------------------------------

std::string cpuModel();
std::string memTotal();
std::string fsType(const std::string& dir);

}  // namespace kcap::bench
