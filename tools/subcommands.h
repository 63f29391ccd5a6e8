// The `kcap` subcommands. Each lives in its own source file and exposes one
// setup function; main.cpp lists them in its table.
//
// A setup function declares the subcommand's options and positionals on `cmd`
// (binding them to state it owns) and returns the function that runs the
// subcommand after a successful parse. That function returns the exit code:
// 0 ok, 1 trace problem (cannot open, not a trace, damaged), 2 usage error.
//
// To add a subcommand: write tools/NAME.cpp defining setupNAME, declare it
// here, add its source to tools/CMakeLists.txt and one row to the table in
// main.cpp.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace kcap::tools {

using Run = std::function<int()>;
using Setup = Run (*)(CLI::App& cmd);

Run setupInfo(CLI::App& cmd);     // info.cpp
Run setupDump(CLI::App& cmd);     // dump.cpp
Run setupCheck(CLI::App& cmd);    // check.cpp
Run setupRecord(CLI::App& cmd);   // record.cpp
Run setupReplay(CLI::App& cmd);   // replay.cpp
Run setupBisect(CLI::App& cmd);   // bisect.cpp
Run setupExtract(CLI::App& cmd);  // extract.cpp
Run setupDoctor(CLI::App& cmd);   // doctor.cpp
Run setupExport(CLI::App& cmd);   // export.cpp
Run setupRanks(CLI::App& cmd);    // ranks.cpp

}  // namespace kcap::tools
