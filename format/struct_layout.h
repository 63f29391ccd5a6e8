// Reading a struct by its layout, as Cap'n Proto's generated code does, for
// the walks over every event (the field check, the content walk) that know
// each field's pointer slot from plans made once per struct type.
#pragma once

#include <cstddef>
#include <cstdint>

#include <capnp/any.h>
#include <capnp/schema.h>

namespace kcap::format {

struct SchemaHash {
  size_t operator()(const capnp::StructSchema& schema) const { return schema.hashCode(); }
};

// Which member of a struct's union is stored: the discriminant at `offset`
// (in 16-bit units of the data section, little-endian). Past a shorter data
// section (an older writer's struct) it reads 0, the default.
inline uint16_t unionDiscriminant(capnp::AnyStruct::Reader object, uint32_t offset) {
  const auto data = object.getDataSection();
  const size_t at = 2 * static_cast<size_t>(offset);
  if (at + 2 > data.size()) return 0;
  return static_cast<uint16_t>(data[at] | static_cast<uint16_t>(data[at + 1] << 8));
}

}  // namespace kcap::format
