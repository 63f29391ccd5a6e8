// kcap: the command line. A table of subcommands and the dispatch; each
// subcommand lives in its own file (see subcommands.h).
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <kj/exception.h>

#include "subcommands.h"
#include "version.h"

namespace {

using namespace kcap::tools;

struct Subcommand {
  const char* name;
  const char* help;
  Setup setup;
};

// One row per subcommand, in the order `kcap --help` lists them.
constexpr Subcommand kSubcommands[] = {
    {"info", "Summarize a trace: environment, devices, modules, kernels, memory, storage", setupInfo},
    {"dump", "Print every event of a trace, one per line (text or JSON Lines)", setupDump},
    {"check", "Verify every chunk, blob and event of a trace; exit 1 unless fully intact", setupCheck},
    {"record", "Run a program with the capture shim preloaded: kcap record [options] -- CMD ARGS...", setupRecord},
    {"replay", "Re-run recorded launches on this GPU and compare with what was recorded", setupReplay},
    {"bisect", "Find the first launch whose outputs diverge (from the recording, PTX, another build or GPU)",
     setupBisect},
    {"extract", "Write a minimal trace of selected launches: kcap extract FILE (--launch N | --range A..B) -o OUT",
     setupExtract},
    {"doctor", "Compare the recorded environment with this machine's; check where the recorded launches can run",
     setupDoctor},
    {"export", "Write a trace as a timeline: kcap export --perfetto OUT.json FILE (ui.perfetto.dev, chrome://tracing)",
     setupExport},
    {"ranks", "Compare the traces of a multi-process job, one per rank: who ran where, and where their launches part",
     setupRanks},
};

constexpr int kUsage = 2;
constexpr int kTrouble = 1;

int run(int argc, char** argv) {
  CLI::App app{"kcap: record CUDA kernel launches into .kcap traces and replay them", "kcap"};
  app.set_version_flag("--version", std::string("kcap ") + kcap::kKcapVersion);
  app.require_subcommand(1);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "kcap: " + std::string(e.what()) + "\nRun 'kcap --help' for more information.\n";
  });

  Run selected;
  for (const Subcommand& sub : kSubcommands) {
    CLI::App* cmd = app.add_subcommand(sub.name, sub.help);
    Run runSub = sub.setup(*cmd);
    cmd->callback([&selected, runSub] { selected = runSub; });
  }

  if (argc <= 1) {
    std::cerr << app.help();
    return kUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints help/version (code 0) or the error
    return code == 0 ? 0 : kUsage;
  }
  return selected ? selected() : kUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // Subcommands report trace problems themselves; this is the last resort, so
  // that no input ends in an uncaught exception.
  try {
    return run(argc, argv);
  } catch (const kj::Exception& e) {
    std::cerr << "kcap: " << e.getDescription().cStr() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "kcap: " << e.what() << "\n";
  }
  return kTrouble;
}
