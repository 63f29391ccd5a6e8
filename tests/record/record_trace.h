// What the recording tests (record_*_test.cpp) share: a trace read back
// whole, the bytes of what it stored, and the ways a test program is run
// (plainly, under the shim, through `kcap`).
#pragma once

#include "process_runner.h"

#include "trace_files.h"
#include "trace_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

// GCC 12's AddressSanitizer does not hold its allocator's locks across
// fork() (it has no fork interceptor): a child forked while another thread
// of the parent (the shim's writer threads) is inside the allocator inherits
// that lock taken and deadlocks on its first allocation of that size. Seen
// here on 2026-12-01 with this code and with 038630c alike (7 of 8 runs
// hung); glibc's malloc, in the normal build, takes its locks around fork
// and these tests run there.
#if defined(__SANITIZE_ADDRESS__)
#define KCAP_SKIP_FORK_UNDER_ASAN() \
  GTEST_SKIP() << "AddressSanitizer's allocator is not fork-safe while other threads allocate"
#else
#define KCAP_SKIP_FORK_UNDER_ASAN() (void)0
#endif

namespace kcap_test::record {

using kcap::schema::Event;
namespace schema = kcap::schema;

inline constexpr int kN = 1000;  // direct_launch's element count
inline constexpr uint64_t kPoisonKill = 0xDEAD0000DEADDEADull;
inline constexpr uint64_t kPoisonHang = 0xDEAD0000DEAD4A46ull;
inline constexpr uint64_t kPoisonSlow = 0xDEAD0000DEAD5105ull;
inline constexpr uint64_t kPoisonAbort = 0xDEAD0000DEADAB07ull;

// ---- reading traces ------------------------------------------------------------------

class Trace {
 public:
  explicit Trace(const std::string& path) : reader_(kcap::format::TraceReader::open(path)) {
    events_ = kcap::test::readAllEvents(path);
  }

  std::vector<Event::Reader> all() const {
    std::vector<Event::Reader> out;
    for (const auto& e : events_) {
      out.push_back(e.get());
    }
    return out;
  }
  std::vector<Event::Reader> of(Event::Which which) const {
    std::vector<Event::Reader> out;
    for (const auto& e : events_) {
      if (e.get().which() == which) {
        out.push_back(e.get());
      }
    }
    return out;
  }
  std::vector<schema::Launch::Reader> launches() const {
    std::vector<schema::Launch::Reader> out;
    for (const auto& e : of(Event::LAUNCH)) {
      out.push_back(e.getLaunch());
    }
    return out;
  }
  std::vector<schema::LaunchEnd::Reader> launchEnds() const {
    std::vector<schema::LaunchEnd::Reader> out;
    for (const auto& e : of(Event::LAUNCH_END)) {
      out.push_back(e.getLaunchEnd());
    }
    return out;
  }
  std::vector<uint8_t> bytes(schema::Content::Reader content) const { return reader_->readContent(content); }
  kcap::format::TraceReader& reader() { return *reader_; }
  size_t size() const { return events_.size(); }

 private:
  std::unique_ptr<kcap::format::TraceReader> reader_;
  std::vector<kcap::test::OwnedEvent> events_;
};

inline std::vector<uint8_t> fileBytes(const std::string& path) { return kcap::test::readFileBytes(path); }

template <class T>
std::vector<uint8_t> asBytes(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline std::vector<float> floatsOf(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

inline std::vector<float> ramp(float scale, int count = kN) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    v[static_cast<size_t>(i)] = scale * static_cast<float>(i);
  }
  return v;
}

template <class T>
T at(capnp::Data::Reader data, size_t offset) {
  T value{};
  if (offset + sizeof(T) <= data.size()) {
    std::memcpy(&value, data.begin() + offset, sizeof(T));
  }
  return value;
}

// The snapshot of the range starting at `address`, or nullopt.
inline std::optional<schema::MemoryRange::Reader> rangeAt(capnp::List<schema::MemoryRange>::Reader ranges,
                                                          uint64_t address) {
  for (const auto range : ranges) {
    if (range.getAddress() == address) {
      return range;
    }
  }
  return std::nullopt;
}

inline std::vector<float> floatsAt(const Trace& trace, capnp::List<schema::MemoryRange>::Reader ranges,
                                   uint64_t address) {
  const auto range = rangeAt(ranges, address);
  return range ? floatsOf(trace.bytes(range->getContent())) : std::vector<float>{};
}

// ---- running -----------------------------------------------------------------------------

inline void expectClean(const Outcome& run) {
  EXPECT_FALSE(run.timedOut) << run.describe();
  EXPECT_EQ(run.exitCode, 0) << run.describe();
  EXPECT_EQ(run.err, "") << run.describe();
}

inline Outcome plainRun(const std::string& program, const std::vector<std::string>& args = {}) {
  return run({program, args, {}, false});
}

inline Outcome recorded(const std::string& program, const std::vector<std::string>& args,
                        std::map<std::string, std::string> env) {
  return run({program, args, std::move(env), true});
}

// `kcap ARGS...` (`env` added), as a test runs it: its exit code and output.
inline Outcome kcap(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
  return run({kcapBinary(), args, std::move(env), false});
}

// `kcap check` on a trace: its exit code and output.
inline Outcome kcapCheck(const std::string& path) { return kcap({"check", path}); }

inline void expectChecks(const std::string& path) {
  const Outcome check = kcapCheck(path);
  EXPECT_EQ(check.exitCode, 0) << check.describe();
  EXPECT_NE(check.out.find("OK: "), std::string::npos) << check.describe();
}

// `program ARGS` run plainly and recorded into `path` (with `env` beside
// KCAP_OUTPUT): both runs clean, the same output, and the trace checks.
// Returns the plain run.
inline Outcome expectRecordedLikePlain(const std::string& program, const std::vector<std::string>& args,
                                       const std::string& path, std::map<std::string, std::string> env = {}) {
  const Outcome plain = plainRun(program, args);
  env["KCAP_OUTPUT"] = path;
  const Outcome shimmed = recorded(program, args, std::move(env));
  expectClean(plain);
  expectClean(shimmed);
  EXPECT_EQ(shimmed.out, plain.out);
  expectChecks(path);
  return plain;
}

}  // namespace kcap_test::record
