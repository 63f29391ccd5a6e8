// Helpers any host-side benchmark can use (bench_host.h says what each does).

#include "bench_host.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace kcap::bench {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }
[[noreturn]] void failErrno(const std::string& what) { fail(what + ": " + std::strerror(errno)); }

// ---- files and clocks ------------------------------------------------------------

void writeAll(int fd, const uint8_t* data, uint64_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, std::min<uint64_t>(size, 1ull << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) failErrno("write");
    data += n;
    size -= static_cast<uint64_t>(n);
  }
}

bool readAll(int fd, uint8_t* data, uint64_t size) {
  uint64_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, data + got, std::min<uint64_t>(size - got, 1ull << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) failErrno("read");
    if (n == 0) {
      if (got == 0) return false;
      fail("unexpected end of file");
    }
    got += static_cast<uint64_t>(n);
  }
  return true;
}

int openWrite(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) failErrno("cannot create " + path);
  return fd;
}

int openRead(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) failErrno("cannot open " + path);
  return fd;
}

void closeFd(int fd) {
  if (::close(fd) != 0) failErrno("close");
}

uint64_t fileSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) failErrno("cannot stat " + path);
  return static_cast<uint64_t>(st.st_size);
}

void truncateIfExists(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return;
    failErrno("cannot truncate " + path);
  }
  closeFd(fd);
}

void syncFile(const std::string& path) {
  int fd = openRead(path);
  if (::fsync(fd) != 0) failErrno("fsync " + path);
  closeFd(fd);
}

double wallNow() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

Cpu cpuNow() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
  };
  return {seconds(u.ru_utime), seconds(u.ru_stime)};
}

double systemBusySeconds() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  if (!(f >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu") return 0;
  return static_cast<double>(user + nice + system + irq + softirq) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::string loadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// ---- machine ---------------------------------------------------------------------

std::string cpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

std::string memTotal() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  unsigned long long kb = 0;
  while (f >> key >> kb >> unit) {
    if (key == "MemTotal:") return std::to_string(kb / 1024 / 1024) + " GiB";
  }
  return "unknown";
}

std::string fsType(const std::string& dir) {
  struct statfs st {};
  if (::statfs(dir.c_str(), &st) != 0) return "unknown";
  switch (static_cast<unsigned long>(st.f_type)) {
    case 0x01021994ul:
      return "tmpfs";
    case 0xef53ul:
      return "ext2/3/4";
    case 0x58465342ul:
      return "xfs";
    case 0x9123683eul:
      return "btrfs";
    case 0x794c7630ul:
      return "overlayfs";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%lx", static_cast<unsigned long>(st.f_type));
      return buf;
    }
  }
}

}  // namespace kcap::bench
