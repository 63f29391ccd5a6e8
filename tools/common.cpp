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

std::vector<size_t> Table::widths() const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) width[i] = std::max(width[i], cells[i].size());
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  return width;
}

std::string Table::renderRow(std::vector<std::string> cells, const std::vector<size_t>& widths,
                             const std::string& indent) const {
  cells.resize(header_.size());
  std::string line = indent;
  for (size_t i = 0; i < cells.size(); ++i) {
    const bool last = i + 1 == cells.size();
    const bool right = i < right_.size() && right_[i] == 'r';
    const size_t width = i < widths.size() ? widths[i] : 0;
    const size_t pad = width > cells[i].size() ? width - cells[i].size() : 0;
    if (right) line.append(pad, ' ');
    line += cells[i];
    if (!last) {
      if (!right) line.append(pad, ' ');
      line += "  ";
    }
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + '\n';
}

std::string Table::renderHeader(const std::vector<size_t>& widths, const std::string& indent) const {
  const bool shown = std::any_of(header_.begin(), header_.end(), [](const std::string& h) { return !h.empty(); });
  return shown ? renderRow(header_, widths, indent) : std::string();
}

std::string Table::render(const std::string& indent) const {
  const std::vector<size_t> width = widths();
  std::string out = renderHeader(width, indent);
  for (const auto& r : rows_) out += renderRow(r, width, indent);
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

namespace {

void writeJson(const Json& value, std::string& out) {
  switch (value.type()) {
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, member] : value.items()) {
        if (!first) out += ',';
        first = false;
        out += jsonString(key);
        out += ':';
        writeJson(member, out);
      }
      out += '}';
      return;
    }
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& element : value) {
        if (!first) out += ',';
        first = false;
        writeJson(element, out);
      }
      out += ']';
      return;
    }
    case Json::value_t::string:
      out += jsonString(value.get_ref<const Json::string_t&>());
      return;
    case Json::value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      return;
    case Json::value_t::number_integer:
      out += std::to_string(value.get<int64_t>());
      return;
    case Json::value_t::number_unsigned:
      out += std::to_string(value.get<uint64_t>());
      return;
    case Json::value_t::number_float: {
      const double number = value.get<double>();
      out += std::isfinite(number) ? strf("%.6g", number) : std::string("null");
      return;
    }
    case Json::value_t::null:
    case Json::value_t::binary:
    case Json::value_t::discarded:
      out += "null";
      return;
  }
}

}  // namespace

std::string jsonText(const Json& document) {
  std::string out;
  writeJson(document, out);
  return out;
}

void appendMember(Json& object, std::string key, Json value) {
  if (object.is_null()) object = Json::object();
  // The object's storage is a vector of members: appending to it directly
  // keeps a repeated key where operator[] would replace the earlier value.
  auto& members = static_cast<Json::object_t::Container&>(object.get_ref<Json::object_t&>());
  members.emplace_back(std::move(key), std::move(value));
}

}  // namespace kcap::tools
