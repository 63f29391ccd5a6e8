#include "record/graph_reach.h"

#include <algorithm>
#include <cstring>

namespace kcap {

const uint8_t* packHostRows(const void* source, const HostRows& rows, std::vector<uint8_t>& packed) {
  const auto* bytes = static_cast<const uint8_t*>(source);
  const uint64_t slices = std::max<uint64_t>(rows.depth, 1);
  const uint64_t height = std::max<uint64_t>(rows.height, 1);
  const uint64_t width = rows.width != 0 ? rows.width : rows.size;
  const uint64_t slicePitch = rows.pitch * rows.sliceHeight;
  const bool rowsApart = height > 1 && rows.pitch != width;
  const bool slicesApart = slices > 1 && slicePitch != width * height;
  if (!rowsApart && !slicesApart) {
    return bytes;
  }
  packed.resize(width * height * slices);
  uint8_t* out = packed.data();
  for (uint64_t z = 0; z < slices; ++z) {
    for (uint64_t y = 0; y < height; ++y, out += width) {
      std::memcpy(out, bytes + z * slicePitch + y * rows.pitch, width);
    }
  }
  return packed.data();
}

void GraphReach::define(uint64_t exec, std::vector<GraphNodeReach> nodes, bool paired) {
  std::lock_guard lock(mutex_);
  Exec& entry = execs_[exec];
  std::unordered_map<uint64_t, size_t> handles;
  for (size_t i = 0; i < nodes.size(); ++i) {
    handles.emplace(nodes[i].handle, i);
  }
  if (paired) {
    // Every handle that named the node at position i still does.
    for (const auto& [handle, index] : entry.byHandle) {
      if (index < nodes.size()) handles.emplace(handle, index);
    }
  }
  memoryNodes_ -= entry.memory.size();
  entry.memory.clear();
  for (const GraphNodeReach& node : nodes) {
    if (node.allocates != 0) entry.memory.push_back({node.allocates, node.allocationSize, node.allocationDevice});
    if (node.frees != 0) entry.memory.push_back({node.frees, 0, -1});
  }
  memoryNodes_ += entry.memory.size();
  entry.nodes = std::move(nodes);
  entry.byHandle = std::move(handles);
}

void GraphReach::update(uint64_t exec, uint64_t node, GraphNodeReach reach) {
  std::lock_guard lock(mutex_);
  const auto found = execs_.find(exec);
  if (found == execs_.end()) return;
  const auto at = found->second.byHandle.find(node);
  if (at == found->second.byHandle.end()) return;
  GraphNodeReach& before = found->second.nodes[at->second];
  reach.handle = before.handle;
  // An allocation or free node's parameters cannot change: it stays what it was.
  reach.allocates = before.allocates;
  reach.allocationSize = before.allocationSize;
  reach.allocationDevice = before.allocationDevice;
  reach.frees = before.frees;
  before = std::move(reach);
}

std::vector<GraphNodeReach> GraphReach::of(uint64_t exec) const {
  std::lock_guard lock(mutex_);
  const auto found = execs_.find(exec);
  return found != execs_.end() ? found->second.nodes : std::vector<GraphNodeReach>{};
}

std::vector<GraphMemoryChange> GraphReach::memoryOf(uint64_t exec) const {
  if (memoryNodes_.load(std::memory_order_relaxed) == 0) return {};
  std::lock_guard lock(mutex_);
  const auto found = execs_.find(exec);
  return found != execs_.end() ? found->second.memory : std::vector<GraphMemoryChange>{};
}

}  // namespace kcap
