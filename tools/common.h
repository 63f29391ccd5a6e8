// Helpers shared by the `kcap` subcommands: text formatting, aligned tables, a
// small JSON writer, schema reflection for enum and event names, and a walk
// over every Content an event references.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <capnp/schema.h>

#include "kcap.capnp.h"
#include "trace_reader.h"

namespace kcap::tools {

// Exit codes of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitTrace = 1;  // cannot open, not a trace, damaged
inline constexpr int kExitUsage = 2;

// Runs `body`, turning the errors a trace can cause into a message on stderr
// that names `path`, and exit code 1.
int guarded(const std::string& path, const std::function<int()>& body);

// ---- text -------------------------------------------------------------------

std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string hex(uint64_t value);                           // "0x7f3a00000000"
std::string hexBytes(const uint8_t* data, size_t size);    // "00ff..."
std::string humanSize(uint64_t bytes);                     // "512 B", "1.5 KiB", "2.00 GiB"
std::string withCommas(uint64_t value);                    // "12,345,678"
std::string versionText(int32_t cudaVersion);              // 12080 -> "12.8"; 0 -> "unknown"
std::string uuidText(capnp::Data::Reader uuid);            // nvidia-smi style "GPU-xxxxxxxx-xxxx-..."
std::string dim3Text(uint32_t x, uint32_t y, uint32_t z);  // "(128,1,1)"
// Makes untrusted text printable on one line: control bytes and bytes that are
// not valid UTF-8 are escaped (\xNN), as are '"' and '\\'; with `quote` the
// result is double-quoted.
std::string printable(std::string_view text, bool quote = false);
// As printable, but quotes and backslashes are left alone: for messages that
// may carry trace text (a FormatError's), printed for a person to read.
std::string terminalSafe(std::string_view text);
// JSON text from another encoder (valid UTF-8, C0 already escaped) with the
// terminal controls outside ASCII (C1, bidirectional overrides) written as
// \uNNNN: they can only stand inside strings, where the escape means the same.
std::string withoutTerminalControls(std::string_view json);
// printable(), quoted when the text is empty or holds spaces or quotes: for a
// value that must stay one word (argv elements, key=value fields).
std::string word(std::string_view text);
// Length of the valid UTF-8 sequence starting at text[at], or 0 if none.
size_t utf8Length(std::string_view text, size_t at);
// A problem message without the "PATH: " or "PATH: at byte N: " prefix that
// some reader messages carry (the caller prints the offset itself).
std::string bareProblem(const std::string& path, const std::string& message);

// "A..B" (decimal launch indices, A <= B) as {A, B}; nullopt otherwise.
// The --range of replay, bisect and extract.
std::optional<std::pair<uint64_t, uint64_t>> parseLaunchRange(std::string_view text);

// Column-aligned text table. Cells of columns marked right-aligned are padded
// on the left. The last column is never padded. A header of empty strings is
// not printed (for key/value lists).
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::string rightAligned = "");
  void row(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  std::string render(const std::string& indent = "  ") const;

 private:
  std::vector<std::string> header_;
  std::string right_;  // 'r' at position i: column i right-aligned
  std::vector<std::vector<std::string>> rows_;
};

// ---- JSON -------------------------------------------------------------------

std::string jsonString(std::string_view text);  // quoted, escaped

// Builds one JSON document. Inside objects every call names its key; inside
// arrays pass a default-constructed key ({}), which writes none. (An empty but
// non-null key, e.g. "" from trace data, is a key.)
class JsonWriter {
 public:
  JsonWriter& beginObject(std::string_view key = {});
  JsonWriter& endObject();
  JsonWriter& beginArray(std::string_view key = {});
  JsonWriter& endArray();
  JsonWriter& value(std::string_view key, std::string_view text);
  JsonWriter& value(std::string_view key, const char* text) { return value(key, std::string_view(text)); }
  JsonWriter& value(std::string_view key, const std::string& text) { return value(key, std::string_view(text)); }
  JsonWriter& value(std::string_view key, uint64_t number);
  JsonWriter& value(std::string_view key, int64_t number);
  JsonWriter& value(std::string_view key, uint32_t number) { return value(key, uint64_t{number}); }
  JsonWriter& value(std::string_view key, int32_t number) { return value(key, int64_t{number}); }
  JsonWriter& value(std::string_view key, double number);
  JsonWriter& value(std::string_view key, bool flag);
  JsonWriter& null(std::string_view key);
  const std::string& str() const { return out_; }

 private:
  void key(std::string_view key);
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written yet
};

// ---- schema reflection -------------------------------------------------------

// The name of an enumerant, or "unknown(N)" for a value this schema lacks.
std::string enumName(capnp::EnumSchema schema, uint16_t value);
template <typename E>
std::string enumName(E value) {
  return enumName(capnp::Schema::from<E>(), static_cast<uint16_t>(value));
}

// The union member an event holds ("launch", "memcpy", ...) or nullptr when it
// is a member this schema does not know (a newer writer).
const char* eventTypeName(schema::Event::Reader event);
const char* eventTypeName(uint16_t which);
std::vector<std::string> eventTypeNames();  // every known member, schema order

// Calls fn(path, content) for every Content the event references, wherever it
// sits (launch.pre[i].content, moduleLoad.image, memcpy.data, ...). Found by
// reflection, so Content fields added to the schema later are covered too.
// `path` names the field, e.g. "launch.pre[2].content".
void forEachContent(schema::Event::Reader event,
                    const std::function<void(const std::string& path, schema::Content::Reader content)>& fn);

}  // namespace kcap::tools
