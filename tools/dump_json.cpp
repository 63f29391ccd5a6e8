// kcap dump --json: an event as one line of JSON (capnp::JsonCodec), Data
// fields and content hashes as hex strings, untrusted text made valid UTF-8.
#include "dump_json.h"

#include <capnp/compat/json.h>

#include "common.h"
#include "event_visitor.h"

namespace kcap::tools {
namespace {

uint8_t hexDigit(char c) {
  if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<uint8_t>(c - 'A' + 10);
  KJ_FAIL_REQUIRE("not a hex digit", c);
}

// capnp's Handler bases have no virtual destructor; the handlers below are
// members of JsonEncoder and never deleted through a base pointer.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"

// Data as a hex string ("00ff..."), not an array of numbers.
class HexDataHandler final : public capnp::JsonCodec::Handler<capnp::Data> {
 public:
  void encode(const capnp::JsonCodec&, capnp::Data::Reader input, capnp::JsonValue::Builder output) const override {
    output.setString(hexBytes(input.begin(), input.size()));
  }
  capnp::Orphan<capnp::Data> decode(const capnp::JsonCodec&, capnp::JsonValue::Reader input,
                                    capnp::Orphanage orphanage) const override {
    auto text = input.getString();
    KJ_REQUIRE(text.size() % 2 == 0, "odd number of hex digits");
    auto orphan = orphanage.newOrphan<capnp::Data>(static_cast<capnp::uint>(text.size() / 2));
    auto bytes = orphan.get();
    for (size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<uint8_t>(hexDigit(text[2 * i]) << 4 | hexDigit(text[2 * i + 1]));
    }
    return orphan;
  }
};

// A content hash as its 32 hex digits, as TraceReader and Hash128::hex() print it.
class HashHandler final : public capnp::JsonCodec::Handler<schema::Hash128> {
 public:
  void encode(const capnp::JsonCodec&, schema::Hash128::Reader input, capnp::JsonValue::Builder output) const override {
    output.setString(format::Hash128{input.getHigh(), input.getLow()}.hex());
  }
  void decode(const capnp::JsonCodec&, capnp::JsonValue::Reader input, schema::Hash128::Builder output) const override {
    auto text = input.getString();
    KJ_REQUIRE(text.size() == 32, "a Hash128 is 32 hex digits");
    uint64_t words[2] = {0, 0};
    for (size_t i = 0; i < 32; ++i) words[i / 16] = words[i / 16] << 4 | hexDigit(text[i]);
    output.setHigh(words[0]);
    output.setLow(words[1]);
  }
};

// Text is untrusted: invalid UTF-8 would make the line invalid JSON. Bytes that
// are not part of valid UTF-8 become the code point of the same value.
class TextHandler final : public capnp::JsonCodec::Handler<capnp::Text> {
 public:
  void encode(const capnp::JsonCodec&, capnp::Text::Reader input, capnp::JsonValue::Builder output) const override {
    std::string_view text(input.cStr(), input.size());
    bool valid = true;
    for (size_t i = 0; i < text.size() && valid;) {
      size_t n = utf8Length(text, i);
      valid = n != 0;
      i += n;
    }
    if (valid) {
      output.setString(input);
      return;
    }
    std::string fixed;
    for (size_t i = 0; i < text.size();) {
      size_t n = utf8Length(text, i);
      if (n) {
        fixed.append(text.substr(i, n));
        i += n;
      } else {
        auto c = static_cast<unsigned char>(text[i++]);
        fixed.push_back(static_cast<char>(0xc0 | (c >> 6)));
        fixed.push_back(static_cast<char>(0x80 | (c & 0x3f)));
      }
    }
    output.setString(fixed);
  }
  capnp::Orphan<capnp::Text> decode(const capnp::JsonCodec&, capnp::JsonValue::Reader input,
                                    capnp::Orphanage orphanage) const override {
    return orphanage.newOrphanCopy(input.getString());
  }
};

#pragma GCC diagnostic pop

}  // namespace

struct JsonEventEncoder::Codec {
  HexDataHandler data;
  HashHandler hash;
  TextHandler text;
  capnp::JsonCodec codec;
  Codec() {
    codec.addTypeHandler(data);
    codec.addTypeHandler(hash);
    codec.addTypeHandler(text);
  }
};

JsonEventEncoder::JsonEventEncoder() : codec_(std::make_unique<Codec>()) {}
JsonEventEncoder::~JsonEventEncoder() = default;

void JsonEventEncoder::encode(std::string& out, const schema::Event::Reader& e) const {
  kj::String json = codec_->codec.encode(e);
  out += withoutTerminalControls(std::string_view(json.cStr(), json.size()));
  if (!eventTypeName(e)) {
    // A union member this schema does not know: say so, so that a consumer
    // does not mistake the event for an empty one.
    if (!out.empty() && out.back() == '}') out.pop_back();
    out += strf(",\"unknownEvent\":%u}", static_cast<unsigned>(format::eventKind(e)));
  }
  out += '\n';
}

}  // namespace kcap::tools
