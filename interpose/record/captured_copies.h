// What NCCL calls captured into CUDA graphs write, made readable after each
// launch of the graph (checkpoint mode).
//
// A collective on a capturing stream runs nothing: its kernels become nodes
// of the graph, and each launch of the graph writes the call's result anew.
// That result comes from other GPUs, so re-execution cannot recompute it, and
// it cannot be read after the graph either: later nodes may reuse the memory
// (decode graphs share one memory pool). So, right after the call's nodes,
// kcap captures one more node into the program's graph, a device-to-device
// copy of what the call wrote into device memory of its own (a "slot"), and
// reads the slot back after each launch of the graph, in stream order
// (written_readback.h). The program's own nodes and memory are untouched.
//
// Slots are shared between graphs: a call takes a slot no other call of its
// own capture holds (the smallest large enough), so that the slots of many
// graphs captured alike (a serving engine's decode graphs, one per batch
// size) take the memory of the largest, not the sum. A launch could
// overwrite a slot before the read-back after the slot's previous launch
// (of another graph sharing it, or of the same graph) has read it: when
// that launch was on another stream, the new launch first waits for that
// stream (an event recorded on it, after the read-back queued there); on
// the same stream, stream order suffices. Slots together take at most a budget of the device's memory,
// and never more than a fraction of what is free: past it a call gets no
// slot, and its Collective event says why. A slot lives as long as the
// process (a graph may be launched at any time).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kcap {

class CapturedCopies {
 public:
  // Captures, on `stream` (capturing), the copy of `size` bytes at `written`
  // into a slot, whose address it sets. Returns why it could not ("" on
  // success).
  std::string add(CUstream stream, uint64_t written, uint64_t size, uint64_t& slot);

  // The size of the slot that starts at `address`, if one does: a memcpy
  // node into it is one of kcap's.
  std::optional<uint64_t> slotAt(uint64_t address) const;

  // Before a graph whose copy nodes write `slots` is launched on `stream`:
  // orders the launch after the read-backs of the slots' previous launches
  // (see above). Hold the returned lock until this launch's read-backs are
  // queued, so that no other launch comes between. Returns a message once
  // if an earlier stream could not be waited for.
  [[nodiscard]] std::unique_lock<std::mutex> beforeLaunch(const std::vector<uint64_t>& slots, CUstream stream,
                                                          std::string& problem);

 private:
  struct Slot {
    uint64_t size = 0;
    CUcontext context = nullptr;  // whose memory it is: shared only within it
    CUevent ordering = nullptr;   // recorded on the last launch's stream when another stream launches next
    bool shareable = false;
    bool launched = false;
    CUstream lastStream = nullptr;
  };
  std::optional<uint64_t> reusable(uint64_t capture, CUcontext context, uint64_t size) const;

  mutable std::mutex mutex_;
  std::map<uint64_t, Slot> slots_;  // by address
  uint64_t bytes_ = 0;
  // The slots each recent capture took (a capture's calls never share one);
  // the oldest captures are forgotten past a bound, and a capture whose id
  // the driver does not give shares nothing.
  std::map<uint64_t, std::set<uint64_t>> takenBy_;
  std::deque<uint64_t> captures_;
  std::mutex launchMutex_;  // held from beforeLaunch until the read-backs are queued
};

}  // namespace kcap
