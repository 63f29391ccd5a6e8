// kcap ranks FILE... [--json]: the traces of one multi-process job (one per
// rank, as `kcap record -o run-%r.kcap` writes them) side by side: which rank
// each trace is, where it ran, what it launched, what is wrong with the set
// (a rank claimed twice, world sizes that disagree, ranks missing), and the
// first launch at which the ranks' kernel sequences part.
//
// A trace's rank and world size come from its recorded environment, with the
// precedence of the recorder's %r: RANK, LOCAL_RANK, SLURM_PROCID,
// OMPI_COMM_WORLD_RANK; WORLD_SIZE, SLURM_NTASKS, OMPI_COMM_WORLD_SIZE.
//
// The launch sequences are compared in launchIndex order, launches captured
// into a graph included: each is a launch call the rank made, and the index
// printed is the one `kcap dump` and `kcap extract --launch` take. (Graph
// launches are not kernel launches and are not compared.) Launches recorded
// without a kernel name are compared by their "<function 0x...>" handle,
// which differs between processes.
//
// Exit codes: 0 every file read; 1 a file cannot be read or a trace is
// damaged (the other files, and every intact event of a damaged one, still
// report). Problems of the set and a divergence are findings, not failures.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <kj/exception.h>

#include "common.h"
#include "errors.h"
#include "event_visitor.h"
#include "job_environment.h"
#include "launch_table.h"
#include "subcommands.h"
#include "trace_reader.h"
#include "trace_summary.h"

namespace kcap::tools {
namespace {

struct Options {
  std::vector<std::string> paths;
  bool json = false;
};

// A recorded variable that names a rank or a world size.
struct Recorded {
  std::string variable;
  std::string text;
  std::optional<uint64_t> value;  // nullopt: the text is not a decimal number
};

struct DeviceUse {
  int32_t ordinal = 0;
  std::string name;  // empty when the trace lists no such device
  std::string pciBusId;
};

// Kernel names, each held once for every trace: sequences compare ids.
class Names {
 public:
  uint32_t intern(const std::string& name) {
    const auto [it, inserted] = ids_.emplace(name, static_cast<uint32_t>(byId_.size()));
    if (inserted) byId_.push_back(name);
    return it->second;
  }
  const std::string& name(uint32_t id) const { return byId_[id]; }

 private:
  std::vector<std::string> byId_;
  std::unordered_map<std::string, uint32_t> ids_;
};

struct RankTrace {
  std::string path;
  std::optional<Recorded> rank;
  std::optional<Recorded> worldSize;
  bool hasBegin = false;
  std::string host;
  uint32_t pid = 0;
  std::string captureMode = "unknown";
  std::vector<DeviceUse> devices;  // those its launches ran on
  uint64_t launches = 0;
  uint64_t distinctKernels = 0;
  uint64_t ncclLaunches = 0;
  std::string ncclVersion = "unknown";
  bool damaged = false;                                 // the reader met problems
  std::vector<std::string> gaps;                        // why the trace is incomplete; empty: complete
  std::vector<std::pair<uint64_t, uint32_t>> sequence;  // (launchIndex, kernel name id), launchIndex order

  bool complete() const { return gaps.empty(); }
  std::string rankText() const {
    if (!rank) return "?";
    return rank->value ? std::to_string(*rank->value) : printable(rank->text, true);
  }
};

struct Unreadable {
  std::string path;
  std::string message;
};

struct Problem {
  std::string kind;
  std::string message;
  std::vector<std::string> files;
};

// Where the ranks' sequences first differ.
struct Divergence {
  size_t traces = 0;
  uint64_t agreed = 0;  // launches every rank made alike before the difference
  bool differs = false;
};

std::string lowercase(std::string text) {
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

std::optional<uint64_t> decimal(const std::string& text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The first of `names` set and not empty in the recorded environment (the
// first occurrence of a name recorded twice, as getenv would return).
template <size_t N>
std::optional<Recorded> firstOf(capnp::List<schema::KeyValue>::Reader environment, const char* const (&names)[N]) {
  for (const char* name : names) {
    for (const auto kv : environment) {
      if (kv.getKey() != name) continue;
      const std::string value = kv.getValue().cStr();
      if (value.empty()) break;
      return Recorded{name, value, decimal(value)};
    }
  }
  return std::nullopt;
}

void describeBegin(RankTrace& t, schema::TraceBegin::Reader b, const std::set<int32_t>& ordinals) {
  t.hasBegin = true;
  t.host = b.getHostName().cStr();
  t.pid = b.getProcessId();
  t.captureMode = enumName(b.getCaptureMode());
  t.rank = firstOf(b.getEnvironment(), format::kRankVariables);
  t.worldSize = firstOf(b.getEnvironment(), format::kWorldSizeVariables);
  for (const auto kv : b.getLibraries()) {
    const std::string key = lowercase(kv.getKey().cStr());
    if (key == "nccl" || key.starts_with("libnccl")) {
      t.ncclVersion = kv.getValue().cStr();
      break;
    }
  }
  for (const int32_t ordinal : ordinals) {
    DeviceUse use{ordinal, "", ""};
    for (const auto dev : b.getDevices()) {
      if (dev.getOrdinal() != ordinal) continue;
      use.name = dev.getName().cStr();
      use.pciBusId = dev.getPciBusId().cStr();
      break;
    }
    t.devices.push_back(std::move(use));
  }
}

// Reads one trace. Throws what the reader throws for a file it cannot read.
RankTrace readTrace(const std::string& path, Names& names) {
  RankTrace t;
  t.path = path;
  auto reader = format::TraceReader::open(path);
  std::set<int32_t> ordinals;
  const format::TraceSummary s = format::summarizeTrace(*reader, [&](schema::Event::Reader event) {
    format::visitEvent(event, format::Overloaded{
                                  [&](schema::Launch::Reader l) {
                                    const std::string name = format::launchKernelName(l);
                                    if (format::isNcclKernel(name)) ++t.ncclLaunches;
                                    ordinals.insert(l.getDevice());
                                    t.sequence.emplace_back(l.getLaunchIndex(), names.intern(name));
                                  },
                                  [](const auto&) {},
                              });
  });
  // Stable: a launchIndex met twice (a damaged trace) keeps its file order.
  std::stable_sort(t.sequence.begin(), t.sequence.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  t.launches = s.launches;
  t.distinctKernels = s.kernels.size();
  if (const auto begin = s.traceBegin()) describeBegin(t, *begin, ordinals);

  if (!s.end) {
    t.gaps.push_back("no traceEnd: the process did not close the trace");
  } else if (!reader->closed()) {
    t.gaps.push_back("no trailer: the file was not closed");
  }
  const auto& problems = reader->problems();
  if (!problems.empty()) {
    t.damaged = true;
    std::string gap =
        strf("%llu problem%s, the first at byte %llu: ", static_cast<unsigned long long>(reader->problemCount()),
             reader->problemCount() == 1 ? "" : "s", static_cast<unsigned long long>(problems[0].offset));
    t.gaps.push_back(gap + bareProblem(path, problems[0].message));
  }
  return t;
}

// The reader's message for a file it cannot read, as `guarded` words it.
std::optional<Unreadable> tryRead(const std::string& path, Names& names, std::vector<RankTrace>& traces) {
  try {
    traces.push_back(readTrace(path, names));
    return std::nullopt;
  } catch (const format::FormatError& e) {
    return Unreadable{path, bareProblem(path, e.what())};
  } catch (const kj::Exception& e) {
    return Unreadable{path, std::string("malformed trace data: ") + e.getDescription().cStr()};
  } catch (const std::bad_alloc&) {
    return Unreadable{path, "out of memory while reading the trace"};
  }
}

std::string joined(const std::vector<std::string>& parts, const char* separator = ", ") {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : separator) + p;
  return out;
}

// Problems of the set: ranks unknown, claimed twice, outside the world or
// missing, world sizes that disagree.
std::vector<Problem> findProblems(const std::vector<RankTrace>& traces, const std::vector<Unreadable>& unreadable) {
  std::vector<Problem> out;
  for (const auto& u : unreadable) out.push_back({"unreadable", "cannot be read: " + u.message, {u.path}});
  std::map<uint64_t, std::vector<std::string>> byRank;
  std::map<uint64_t, std::vector<std::string>> byWorld;
  for (const auto& t : traces) {
    if (!t.hasBegin) {
      out.push_back({"noRank", "no traceBegin: its rank is unknown", {t.path}});
    } else if (!t.rank) {
      out.push_back({"noRank",
                     "no rank in its recorded environment (RANK, LOCAL_RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK)",
                     {t.path}});
    } else if (!t.rank->value) {
      out.push_back({"badRank", t.rank->variable + "=" + printable(t.rank->text, true) + " is not a rank", {t.path}});
    } else {
      byRank[*t.rank->value].push_back(t.path);
    }
    if (t.worldSize && !t.worldSize->value) {
      out.push_back({"badWorldSize",
                     t.worldSize->variable + "=" + printable(t.worldSize->text, true) + " is not a world size",
                     {t.path}});
    } else if (t.worldSize) {
      byWorld[*t.worldSize->value].push_back(t.path);
    }
    if (!t.complete()) out.push_back({"incomplete", "incomplete: " + joined(t.gaps, "; "), {t.path}});
  }
  for (const auto& [rank, files] : byRank) {
    if (files.size() < 2) continue;
    out.push_back({"duplicateRank",
                   strf("rank %llu is claimed by %zu traces", static_cast<unsigned long long>(rank), files.size()),
                   files});
  }
  if (byWorld.size() > 1) {
    std::vector<std::string> sizes, files;
    for (const auto& [size, paths] : byWorld) {
      sizes.push_back(strf("%llu (%zu trace%s)", static_cast<unsigned long long>(size), paths.size(),
                           paths.size() == 1 ? "" : "s"));
      files.insert(files.end(), paths.begin(), paths.end());
    }
    out.push_back({"worldSizeDisagrees", "the traces disagree on the world size: " + joined(sizes), files});
  }
  // Missing ranks: below the world size when all agree on one, else below
  // the highest rank present (ranks count from 0).
  uint64_t expected = 0;
  std::string against;
  if (byWorld.size() == 1) {
    expected = byWorld.begin()->first;
    against = strf("world size %llu", static_cast<unsigned long long>(expected));
    for (const auto& [rank, files] : byRank) {
      if (rank < expected) continue;
      out.push_back({"rankOutsideWorld",
                     strf("rank %llu is outside the ", static_cast<unsigned long long>(rank)) + against, files});
    }
  } else if (byWorld.empty() && !byRank.empty()) {
    expected = byRank.rbegin()->first + 1;
    against = strf("highest rank %llu (no world size recorded)", static_cast<unsigned long long>(expected - 1));
  }
  uint64_t present = 0;
  for (const auto& entry : byRank) present += entry.first < expected ? 1 : 0;
  if (present < expected) {
    // Listed up to a bound: a recorded world size is untrusted and may be
    // huge. The loop meets each present rank once and stops at the bound.
    std::vector<std::string> missing;
    for (uint64_t rank = 0; rank < expected && missing.size() < 32; ++rank) {
      if (!byRank.count(rank)) missing.push_back(std::to_string(rank));
    }
    const uint64_t absent = expected - present;
    std::string list = joined(missing);
    if (absent > missing.size()) list += strf(", ... (%llu in all)", static_cast<unsigned long long>(absent));
    out.push_back({"missingRanks",
                   against +
                       strf(", %llu rank%s present: missing rank", static_cast<unsigned long long>(present),
                            present == 1 ? "" : "s") +
                       (absent == 1 ? " " : "s ") + list,
                   {}});
  }
  return out;
}

// The first position (in launchIndex order) at which the traces' kernel
// names are not all the same, a trace that has ended counting as different.
Divergence findDivergence(const std::vector<RankTrace>& traces) {
  Divergence d;
  d.traces = traces.size();
  if (traces.size() < 2) return d;
  size_t longest = 0;
  for (const auto& t : traces) longest = std::max(longest, t.sequence.size());
  for (size_t at = 0; at < longest; ++at) {
    const auto& first = traces[0].sequence;
    for (const auto& t : traces) {
      const bool ended = at >= t.sequence.size();
      if (ended != (at >= first.size()) || (!ended && t.sequence[at].second != first[at].second)) {
        d.agreed = at;
        d.differs = true;
        return d;
      }
    }
  }
  d.agreed = longest;
  return d;
}

std::string deviceText(const RankTrace& t) {
  std::vector<std::string> parts;
  for (const auto& d : t.devices) {
    parts.push_back(strf("%d", d.ordinal) + (d.name.empty() ? "" : " " + printable(d.name)));
  }
  return parts.empty() ? "-" : joined(parts);
}

// ---- text ---------------------------------------------------------------------

void printText(const std::vector<RankTrace>& traces, const std::vector<Problem>& problems, const Divergence& d,
               const Names& names) {
  std::string out = strf("Ranks (%zu trace%s)\n", traces.size(), traces.size() == 1 ? "" : "s");
  if (!traces.empty()) {
    Table table({"Rank", "World", "Host", "PID", "Device", "Mode", "Launches", "Kernels", "NCCL", "NCCL version",
                 "Complete", "File"},
                "rr r  rrr");
    for (const auto& t : traces) {
      table.row({t.rankText(), t.worldSize ? (t.worldSize->value ? std::to_string(*t.worldSize->value) : "?") : "-",
                 t.hasBegin ? printable(t.host) : "-", t.hasBegin ? std::to_string(t.pid) : "-", deviceText(t),
                 t.captureMode, withCommas(t.launches), withCommas(t.distinctKernels), withCommas(t.ncclLaunches),
                 printable(t.ncclVersion), t.complete() ? "yes" : (t.damaged ? "no (damaged)" : "no"),
                 printable(t.path)});
    }
    out += table.render();
  }

  if (problems.empty()) {
    out += "\nProblems: none\n";
  } else {
    out += strf("\nProblems (%zu)\n", problems.size());
    for (const auto& p : problems) {
      std::vector<std::string> files;
      for (const auto& f : p.files) files.push_back(printable(f));
      out += "  " + (files.size() == 1 ? files[0] + ": " : "") + p.message +
             (files.size() > 1 ? ": " + joined(files) : "") + "\n";
    }
  }

  out += "\nLaunch order (launchIndex order, launches captured into graphs included)\n";
  if (d.traces < 2) {
    out += "  fewer than 2 traces: nothing to compare\n";
  } else if (!d.differs) {
    out += strf("  all %zu ranks launched the same %s kernels in the same order\n", d.traces,
                withCommas(d.agreed).c_str());
  } else {
    out += strf("  the ranks agree on the first %s launch%s; then they differ:\n", withCommas(d.agreed).c_str(),
                d.agreed == 1 ? "" : "es");
    Table table({"Rank", "Launch", "Kernel", "File"}, "rr");
    for (const auto& t : traces) {
      if (d.agreed < t.sequence.size()) {
        const auto& [index, id] = t.sequence[d.agreed];
        table.row({t.rankText(), std::to_string(index), printable(names.name(id)), printable(t.path)});
      } else {
        table.row({t.rankText(), "-", "ended (" + withCommas(t.sequence.size()) + " launches)", printable(t.path)});
      }
    }
    out += table.render();
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

// ---- JSON ---------------------------------------------------------------------

Json recordedJson(const std::optional<Recorded>& r) {
  if (!r) return nullptr;
  return {{"variable", r->variable}, {"text", r->text}, {"value", r->value ? Json(*r->value) : Json()}};
}

void printJson(const std::vector<RankTrace>& traces, const std::vector<Unreadable>& unreadable,
               const std::vector<Problem>& problems, const Divergence& d, const Names& names) {
  Json rows = Json::array();
  for (const auto& t : traces) {
    Json devices = Json::array();
    for (const auto& dev : t.devices) {
      devices.push_back({{"ordinal", dev.ordinal}, {"name", dev.name}, {"pciBusId", dev.pciBusId}});
    }
    rows.push_back({{"file", t.path},
                    {"rank", t.rank && t.rank->value ? Json(*t.rank->value) : Json()},
                    {"worldSize", t.worldSize && t.worldSize->value ? Json(*t.worldSize->value) : Json()},
                    {"rankFrom", recordedJson(t.rank)},
                    {"worldSizeFrom", recordedJson(t.worldSize)},
                    {"host", t.hasBegin ? Json(t.host) : Json()},
                    {"pid", t.hasBegin ? Json(t.pid) : Json()},
                    {"devices", std::move(devices)},
                    {"captureMode", t.captureMode},
                    {"launches", t.launches},
                    {"distinctKernels", t.distinctKernels},
                    {"ncclLaunches", t.ncclLaunches},
                    {"ncclVersion", t.ncclVersion},
                    {"complete", t.complete()},
                    {"damaged", t.damaged},
                    {"incomplete", t.gaps}});
  }
  Json errors = Json::array();
  for (const auto& u : unreadable) errors.push_back({{"file", u.path}, {"message", u.message}});
  Json problemList = Json::array();
  for (const auto& p : problems) problemList.push_back({{"kind", p.kind}, {"message", p.message}, {"files", p.files}});

  Json divergence = {{"order", "launchIndex"},
                     {"capturedIncluded", true},
                     {"traces", d.traces},
                     {"agreed", d.agreed},
                     {"differs", d.differs}};
  if (d.differs) {
    Json at = Json::array();
    for (const auto& t : traces) {
      Json entry = {{"file", t.path}, {"rank", t.rank && t.rank->value ? Json(*t.rank->value) : Json()}};
      if (d.agreed < t.sequence.size()) {
        entry["launchIndex"] = t.sequence[d.agreed].first;
        entry["kernel"] = names.name(t.sequence[d.agreed].second);
        entry["ended"] = false;
      } else {
        entry["launchIndex"] = nullptr;
        entry["kernel"] = nullptr;
        entry["ended"] = true;
      }
      at.push_back(std::move(entry));
    }
    divergence["first"] = std::move(at);
  } else {
    divergence["first"] = nullptr;
  }
  const Json document = {{"traces", std::move(rows)},
                         {"errors", std::move(errors)},
                         {"problems", std::move(problemList)},
                         {"divergence", std::move(divergence)}};
  const std::string text = jsonText(document) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
}

int runRanks(const Options& opt) {
  Names names;
  std::vector<RankTrace> traces;
  std::vector<Unreadable> unreadable;
  for (const auto& path : opt.paths) {
    if (auto u = tryRead(path, names, traces)) {
      std::cerr << "kcap ranks: " << terminalSafe(u->path) << ": " << terminalSafe(u->message) << "\n";
      unreadable.push_back(std::move(*u));
    }
  }
  // By rank; traces without one last; equal ranks in the order given.
  std::stable_sort(traces.begin(), traces.end(), [](const RankTrace& a, const RankTrace& b) {
    const auto key = [](const RankTrace& t) {
      return t.rank && t.rank->value ? std::make_pair(0, *t.rank->value) : std::make_pair(1, uint64_t{0});
    };
    return key(a) < key(b);
  });
  const std::vector<Problem> problems = findProblems(traces, unreadable);
  const Divergence divergence = findDivergence(traces);
  if (opt.json) {
    printJson(traces, unreadable, problems, divergence, names);
  } else {
    printText(traces, problems, divergence, names);
  }
  std::fflush(stdout);
  const bool damaged = std::any_of(traces.begin(), traces.end(), [](const RankTrace& t) { return t.damaged; });
  return unreadable.empty() && !damaged ? kExitOk : kExitTrace;
}

}  // namespace

Run setupRanks(CLI::App& cmd) {
  auto opt = std::make_shared<Options>();
  cmd.add_option("files", opt->paths, "The traces of one job, one per rank (kcap record -o run-%r.kcap)")
      ->required()
      ->type_name("FILE...");
  cmd.add_flag("--json", opt->json, "Print one JSON document instead of text");
  return [opt] { return runRanks(*opt); };
}

}  // namespace kcap::tools
