#include "launch_table.h"

#include <algorithm>

#include "event_visitor.h"
#include "trace_reader.h"

namespace kcap::format {

namespace {

// A copy of one struct as its own message, allocated at its size (a
// builder's default first segment is 8 KiB: a million launches would take
// gigabytes).
template <typename Reader>
std::shared_ptr<capnp::MallocMessageBuilder> copyOf(Reader reader) {
  const auto words = static_cast<capnp::uint>(std::min<uint64_t>(reader.totalSize().wordCount + 1, 1u << 28));
  auto message = std::make_shared<capnp::MallocMessageBuilder>(words, capnp::AllocationStrategy::FIXED_SIZE);
  message->setRoot(reader);
  return message;
}

}  // namespace

std::string launchKernelName(schema::Launch::Reader launch) {
  std::string name = launch.getKernelName().cStr();
  if (!name.empty()) return name;
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string digits;
  uint64_t value = launch.getFunction();
  do {
    digits.insert(digits.begin(), kDigits[value & 15]);
    value >>= 4;
  } while (value != 0);
  return "<function 0x" + digits + ">";
}

std::optional<schema::Launch::Reader> LaunchRecord::launch() const {
  if (!launchMessage) return std::nullopt;
  return launchMessage->getRoot<schema::Launch>().asReader();
}

std::optional<schema::LaunchEnd::Reader> LaunchRecord::end() const {
  if (!endMessage) return std::nullopt;
  return endMessage->getRoot<schema::LaunchEnd>().asReader();
}

const LaunchRecord* LaunchTable::find(uint64_t launchIndex) const {
  const auto it = byIndex_.find(launchIndex);
  return it == byIndex_.end() ? nullptr : &launches_[it->second];
}

bool LaunchTable::add(schema::Event::Reader event) {
  return visitEvent(event, Overloaded{
                               [&](schema::Launch::Reader l) {
                                 LaunchRecord r;
                                 r.seq = event.getSeq();
                                 r.launchIndex = l.getLaunchIndex();
                                 r.timeNs = event.getTimeNs();
                                 r.threadId = event.getThreadId();
                                 r.kernelName = launchKernelName(l);
                                 r.function = l.getFunction();
                                 r.stream = l.getStream();
                                 r.device = l.getDevice();
                                 r.perThreadStream = l.getPerThreadStream();
                                 r.capturing = l.getCapturing();
                                 r.grid[0] = l.getGridX(), r.grid[1] = l.getGridY(), r.grid[2] = l.getGridZ();
                                 r.block[0] = l.getBlockX(), r.block[1] = l.getBlockY(), r.block[2] = l.getBlockZ();
                                 r.sharedMemBytes = l.getSharedMemBytes();
                                 if (l.getEnded()) {  // its outcome in the launch itself: no launchEnd follows
                                   r.ended = true;
                                   r.endSeq = r.seq;
                                   r.endTimeNs = r.timeNs + l.getCallNs();
                                   r.result = l.getResult();
                                 }
                                 if (keepMessages_) {
                                   r.launchMessage = copyOf(l);
                                 }
                                 byIndex_[r.launchIndex] = launches_.size();
                                 launches_.push_back(std::move(r));
                                 return true;
                               },
                               [&](schema::LaunchEnd::Reader e) {
                                 const auto it = byIndex_.find(e.getLaunchIndex());
                                 if (it == byIndex_.end()) {
                                   ++orphanEnds_;
                                   return true;
                                 }
                                 LaunchRecord& r = launches_[it->second];
                                 r.ended = true;
                                 r.endSeq = event.getSeq();
                                 r.endTimeNs = event.getTimeNs();
                                 r.result = e.getResult();
                                 if (keepMessages_) {
                                   r.endMessage = copyOf(e);
                                 }
                                 return true;
                               },
                               [&](schema::KernelTiming::Reader t) {
                                 const auto it = byIndex_.find(t.getLaunchIndex());
                                 if (it == byIndex_.end()) {
                                   ++orphanTimings_;
                                 } else if (t.getEndNs() < t.getStartNs()) {
                                   ++badTimings_;
                                 } else {
                                   LaunchRecord& r = launches_[it->second];
                                   r.timed = true;
                                   r.gpuStartNs = t.getStartNs();
                                   r.gpuEndNs = t.getEndNs();
                                 }
                                 return true;
                               },
                               [](const auto&) { return false; },
                           });
}

LaunchTable readLaunchTable(TraceReader& reader, bool keepMessages) {
  LaunchTable table(keepMessages);
  reader.forEachEvent([&](const EventRef& ref) {
    table.add(ref.event);
    return true;
  });
  return table;
}

}  // namespace kcap::format
