#include "common.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <iostream>
#include <new>
#include <unordered_map>

#include <capnp/dynamic.h>
#include <kj/exception.h>

#include "container.h"
#include "errors.h"

namespace kcap::tools {

int guarded(const std::string& path, const std::function<int()>& body) {
  try {
    return body();
  } catch (const format::FormatError& e) {
    std::cerr << terminalSafe(e.what()) << "\n";  // "PATH: ...": names the file already
  } catch (const kj::Exception& e) {
    std::cerr << terminalSafe(path) << ": malformed trace data: " << terminalSafe(e.getDescription().cStr()) << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << path << ": out of memory while reading the trace\n";
  }
  return kExitTrace;
}

std::optional<std::pair<uint64_t, uint64_t>> parseLaunchRange(std::string_view text) {
  const size_t dots = text.find("..");
  if (dots == std::string_view::npos) return std::nullopt;
  const auto number = [](std::string_view digits) -> std::optional<uint64_t> {
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    return value;
  };
  const auto first = number(text.substr(0, dots)), last = number(text.substr(dots + 2));
  if (!first || !last || *last < *first) return std::nullopt;
  return std::make_pair(*first, *last);
}

// ---- text -------------------------------------------------------------------

std::string strf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out;
  if (n > 0) {
    out.resize(static_cast<size_t>(n) + 1);
    std::vsnprintf(out.data(), out.size(), fmt, args);
    out.resize(static_cast<size_t>(n));
  }
  va_end(args);
  return out;
}

std::string hex(uint64_t value) { return strf("0x%llx", static_cast<unsigned long long>(value)); }

std::string hexBytes(const uint8_t* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 15]);
  }
  return out;
}

std::string humanSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return strf("%llu B", static_cast<unsigned long long>(bytes));
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  v /= 1024.0;
  while (v >= 1024.0 && unit + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++unit;
  }
  return strf(v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, kUnits[unit]);
}

std::string withCommas(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string versionText(int32_t v) {
  if (v <= 0) return "unknown";
  return strf("%d.%d", v / 1000, (v % 1000) / 10);
}

std::string uuidText(capnp::Data::Reader uuid) {
  if (uuid.size() == 0) return "-";
  std::string h = hexBytes(uuid.begin(), uuid.size());
  if (uuid.size() != 16) return h;
  return "GPU-" + h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" +
         h.substr(20);
}

std::string dim3Text(uint32_t x, uint32_t y, uint32_t z) { return strf("(%u,%u,%u)", x, y, z); }

// The code point of one valid UTF-8 sequence (utf8Length said it is one).
static unsigned codePoint(std::string_view sequence) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(sequence[i]); };
  switch (sequence.size()) {
    case 2:
      return (byte(0) & 0x1fu) << 6 | (byte(1) & 0x3fu);
    case 3:
      return (byte(0) & 0x0fu) << 12 | (byte(1) & 0x3fu) << 6 | (byte(2) & 0x3fu);
    case 4:
      return (byte(0) & 0x07u) << 18 | (byte(1) & 0x3fu) << 12 | (byte(2) & 0x3fu) << 6 | (byte(3) & 0x3fu);
    default:
      return byte(0);
  }
}

// Code points that a terminal or a viewer acts on rather than shows: the C1
// controls (U+0080-U+009F; a terminal reads U+009B as CSI and U+009D as OSC,
// as it does ESC [ and ESC ]), and the bidirectional embeddings, overrides
// and isolates, which reorder what is displayed so that one name can look
// like another.
static bool terminalControl(unsigned cp) {
  return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

// Appends \uNNNN for `sequence`, one valid UTF-8 sequence of two or more
// bytes, when it is a terminal control; says whether it did.
static bool escapedTerminalControl(std::string_view sequence, std::string& out) {
  if (sequence.size() < 2 || !terminalControl(codePoint(sequence))) return false;
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", codePoint(sequence));
  out += buf;
  return true;
}

// Escapes quotes, backslashes, newlines, tabs and carriage returns; writes any
// other control character or byte that is not valid UTF-8 with `badByte`, a
// printf format taking the byte's value; terminal controls outside ASCII
// (terminalControl) as \uNNNN. With `keepQuotes`, quotes and backslashes stay
// as they are (messages, which are not parsed back).
static std::string escapeText(std::string_view text, const char* badByte, bool keepQuotes = false) {
  std::string out;
  out.reserve(text.size() + 2);
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"':
        out += keepQuotes ? "\"" : "\\\"";
        ++i;
        continue;
      case '\\':
        out += keepQuotes ? "\\" : "\\\\";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      default:
        break;
    }
    size_t n = utf8Length(text, i);
    if (escapedTerminalControl(text.substr(i, n), out)) {
      i += n;
      continue;
    }
    if (c < 0x20 || c == 0x7f || n == 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, badByte, c);
      out += buf;
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string terminalSafe(std::string_view text) { return escapeText(text, "\\x%02x", true); }

std::string withoutTerminalControls(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size();) {
    const size_t n = std::max<size_t>(utf8Length(json, i), 1);
    if (!escapedTerminalControl(json.substr(i, n), out)) out.append(json.substr(i, n));
    i += n;
  }
  return out;
}

std::string printable(std::string_view text, bool quote) {
  std::string out = escapeText(text, "\\x%02x");
  return quote ? "\"" + out + "\"" : out;
}

std::string word(std::string_view text) {
  bool quote = text.empty() || text.find_first_of(" \"'") != std::string_view::npos;
  return printable(text, quote);
}

std::string bareProblem(const std::string& path, const std::string& message) {
  std::string_view m(message);
  std::string prefix = path + ": ";
  if (m.substr(0, prefix.size()) != prefix) return message;
  m.remove_prefix(prefix.size());
  static constexpr std::string_view kAt = "at byte ";
  if (m.substr(0, kAt.size()) == kAt) {
    size_t colon = m.find(": ");
    if (colon != std::string_view::npos) m.remove_prefix(colon + 2);
  }
  return std::string(m);
}

Table::Table(std::vector<std::string> header, std::string rightAligned)
    : header_(std::move(header)), right_(std::move(rightAligned)) {}

void Table::row(std::vector<std::string> cells) {
  cells.resize(header_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::render(const std::string& indent) const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) width[i] = std::max(width[i], cells[i].size());
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line = indent;
    for (size_t i = 0; i < cells.size(); ++i) {
      bool last = i + 1 == cells.size();
      bool right = i < right_.size() && right_[i] == 'r';
      size_t pad = width[i] - cells[i].size();
      if (right) line.append(pad, ' ');
      line += cells[i];
      if (!last) {
        if (!right) line.append(pad, ' ');
        line += "  ";
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  bool showHeader = std::any_of(header_.begin(), header_.end(), [](const std::string& h) { return !h.empty(); });
  if (showHeader) emit(header_);
  for (const auto& r : rows_) emit(r);
  return out;
}

// ---- JSON -------------------------------------------------------------------

size_t utf8Length(std::string_view text, size_t at) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char c = byte(at);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || at + n > text.size()) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((byte(at + i) & 0xc0) != 0x80) return 0;
  }
  // Reject overlong forms, surrogates and code points past U+10FFFF.
  if (n == 2 && c < 0xc2) return 0;
  if (n == 3 && ((c == 0xe0 && byte(at + 1) < 0xa0) || (c == 0xed && byte(at + 1) >= 0xa0))) return 0;
  if (n == 4 && ((c == 0xf0 && byte(at + 1) < 0x90) || c > 0xf4 || (c == 0xf4 && byte(at + 1) >= 0x90))) return 0;
  return n;
}

std::string jsonString(std::string_view text) {
  // Trace text is untrusted: a control character or a byte that is not part
  // of valid UTF-8 becomes the code point of the same value, so every
  // document stays valid JSON.
  return "\"" + escapeText(text, "\\u%04x") + "\"";
}

void JsonWriter::key(std::string_view k) {
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
  if (k.data() != nullptr) {
    out_ += jsonString(k);
    out_ += ':';
  }
}

JsonWriter& JsonWriter::beginObject(std::string_view k) {
  key(k);
  out_ += '{';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  out_ += '}';
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::beginArray(std::string_view k) {
  key(k);
  out_ += '[';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  out_ += ']';
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view k, std::string_view text) {
  key(k);
  out_ += jsonString(text);
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view k, uint64_t number) {
  key(k);
  out_ += std::to_string(number);
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view k, int64_t number) {
  key(k);
  out_ += std::to_string(number);
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view k, double number) {
  key(k);
  out_ += std::isfinite(number) ? strf("%.6g", number) : std::string("null");
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view k, bool flag) {
  key(k);
  out_ += flag ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null(std::string_view k) {
  key(k);
  out_ += "null";
  return *this;
}

// ---- schema reflection -------------------------------------------------------

std::string enumName(capnp::EnumSchema schema, uint16_t value) {
  auto enumerants = schema.getEnumerants();
  for (auto e : enumerants) {
    if (e.getOrdinal() == value) return e.getProto().getName().cStr();
  }
  return strf("unknown(%u)", static_cast<unsigned>(value));
}

namespace {

struct EventUnion {
  std::vector<const char*> names;  // by discriminant value; nullptr where none
  EventUnion() {
    for (auto field : capnp::Schema::from<schema::Event>().getUnionFields()) {
      uint16_t d = field.getProto().getDiscriminantValue();
      if (names.size() <= d) names.resize(d + 1u, nullptr);
      names[d] = field.getProto().getName().cStr();
    }
  }
};

const EventUnion& eventUnion() {
  static const EventUnion u;
  return u;
}

// Whether values of this struct type can hold a Content somewhere below.
class ContentWalker {
 public:
  ContentWalker() : content_(capnp::Schema::from<schema::Content>().getProto().getId()) {}

  void walk(capnp::DynamicStruct::Reader s, std::string& path,
            const std::function<void(const std::string&, schema::Content::Reader)>& fn) {
    for (auto field : s.getSchema().getNonUnionFields()) visitField(s, field, path, fn);
    KJ_IF_MAYBE (active, s.which()) {
      visitField(s, *active, path, fn);
    }
  }

 private:
  bool mayHold(capnp::StructSchema schema) {
    uint64_t id = schema.getProto().getId();
    if (id == content_) return true;
    auto it = memo_.find(id);
    if (it != memo_.end()) return it->second;
    memo_[id] = false;  // cycle guard
    bool result = false;
    for (auto field : schema.getFields()) {
      if (mayHold(field.getType())) {
        result = true;
        break;
      }
    }
    memo_[id] = result;
    return result;
  }

  bool mayHold(capnp::Type type) {
    if (type.isStruct()) return mayHold(type.asStruct());
    if (type.isList()) return mayHold(type.asList().getElementType());
    return false;
  }

  void visitField(capnp::DynamicStruct::Reader s, capnp::StructSchema::Field field, std::string& path,
                  const std::function<void(const std::string&, schema::Content::Reader)>& fn) {
    capnp::Type type = field.getType();
    if (!mayHold(type)) return;
    bool isGroup = field.getProto().isGroup();
    if (!isGroup && !s.has(field)) return;
    size_t mark = path.size();
    if (!path.empty()) path += '.';
    path += field.getProto().getName().cStr();
    visitValue(s.get(field), type, path, fn);
    path.resize(mark);
  }

  void visitValue(capnp::DynamicValue::Reader value, capnp::Type type, std::string& path,
                  const std::function<void(const std::string&, schema::Content::Reader)>& fn) {
    if (type.isStruct()) {
      auto s = value.as<capnp::DynamicStruct>();
      if (type.asStruct().getProto().getId() == content_) {
        fn(path, s.as<schema::Content>());
      } else {
        walk(s, path, fn);
      }
    } else if (type.isList()) {
      auto list = value.as<capnp::DynamicList>();
      capnp::Type element = type.asList().getElementType();
      for (unsigned i = 0; i < list.size(); ++i) {
        size_t mark = path.size();
        path += strf("[%u]", i);
        visitValue(list[i], element, path, fn);
        path.resize(mark);
      }
    }
  }

  uint64_t content_;
  std::unordered_map<uint64_t, bool> memo_;
};

}  // namespace

const char* eventTypeName(uint16_t which) {
  const auto& names = eventUnion().names;
  return which < names.size() ? names[which] : nullptr;
}

const char* eventTypeName(schema::Event::Reader event) { return eventTypeName(static_cast<uint16_t>(event.which())); }

std::vector<std::string> eventTypeNames() {
  std::vector<std::string> out;
  for (const char* n : eventUnion().names) {
    if (n) out.emplace_back(n);
  }
  return out;
}

void forEachContent(schema::Event::Reader event,
                    const std::function<void(const std::string&, schema::Content::Reader)>& fn) {
  static thread_local ContentWalker walker;
  std::string path;
  walker.walk(capnp::toDynamic(event), path, fn);
}

}  // namespace kcap::tools
