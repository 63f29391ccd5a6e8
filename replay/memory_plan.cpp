#include "memory_plan.h"

#include <algorithm>

namespace kcap::replay {

std::vector<RegionGroup> planGroups(std::vector<Region> regions, uint64_t granule) {
  std::vector<RegionGroup> groups;
  std::erase_if(regions, [](const Region& r) { return r.size == 0; });
  std::sort(regions.begin(), regions.end(), [](const Region& a, const Region& b) { return a.address < b.address; });
  const auto down = [granule](uint64_t a) { return a & ~(granule - 1); };
  const auto up = [granule](uint64_t a) { return (a + granule - 1) & ~(granule - 1); };
  for (const Region& region : regions) {
    const uint64_t start = down(region.address);
    const uint64_t end = up(region.address + region.size);
    // Join the previous group when this region starts inside it or in the
    // granule right after it.
    if (!groups.empty() && start <= groups.back().start + groups.back().size) {
      RegionGroup& group = groups.back();
      group.size = std::max(group.start + group.size, end) - group.start;
      group.regions.push_back(region);
      continue;
    }
    groups.push_back(RegionGroup{start, end - start, {region}});
  }
  return groups;
}

void AddressMap::add(uint64_t recordedStart, uint64_t size, uint64_t replayStart) {
  const Span span{recordedStart, size, replayStart};
  spans_.insert(std::upper_bound(spans_.begin(), spans_.end(), span,
                                 [](const Span& a, const Span& b) { return a.recorded < b.recorded; }),
                span);
}

std::optional<uint64_t> AddressMap::translate(uint64_t recorded) const {
  auto it = std::upper_bound(spans_.begin(), spans_.end(), recorded,
                             [](uint64_t address, const Span& s) { return address < s.recorded; });
  if (it == spans_.begin()) return std::nullopt;
  --it;
  if (recorded - it->recorded >= it->size) return std::nullopt;
  return it->replay + (recorded - it->recorded);
}

bool AddressMap::identity() const {
  return std::all_of(spans_.begin(), spans_.end(), [](const Span& s) { return s.recorded == s.replay; });
}

}  // namespace kcap::replay
