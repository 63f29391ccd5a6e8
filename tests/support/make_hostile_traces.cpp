// kcap_make_hostile_traces RECORDED OUTDIR: writes the hostile-trace corpus
// (hostile_traces.h) into OUTDIR, the event-level cases as edits of
// RECORDED, and lists what each file aims at.
#include <cstdio>
#include <exception>

#include "hostile_traces.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s RECORDED.kcap OUTDIR\n", argv[0]);
    return 2;
  }
  try {
    for (const auto& c : kcap::test::writeHostileTraces(argv[2], argv[1])) {
      std::printf("%-36s %s\n", c.name.c_str(), c.what.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kcap_make_hostile_traces: %s\n", e.what());
    return 1;
  }
  return 0;
}
