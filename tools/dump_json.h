// kcap dump --json: one JSON object per event (JSON Lines).
#pragma once

#include <memory>
#include <string>

#include "kcap.capnp.h"

namespace kcap::tools {

class JsonEventEncoder {
 public:
  JsonEventEncoder();
  ~JsonEventEncoder();
  JsonEventEncoder(const JsonEventEncoder&) = delete;
  JsonEventEncoder& operator=(const JsonEventEncoder&) = delete;

  // Appends the event's JSON and a newline to `out`. A union member this
  // schema does not know is named ("unknownEvent"), so that a consumer does
  // not take the event for an empty one.
  void encode(std::string& out, const schema::Event::Reader& e) const;

 private:
  struct Codec;
  std::unique_ptr<Codec> codec_;
};

}  // namespace kcap::tools
