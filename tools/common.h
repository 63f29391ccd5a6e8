// Helpers shared by the `kcap` subcommands: text formatting, aligned tables,
// JSON output, and the schema names of format/schema_names.h.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kcap.capnp.h"
#include "schema_names.h"
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
//
// A table printed row by row as its rows become known takes its widths up
// front: from a table of rows as wide as any it will print (widths()), then
// renderHeader() once and renderRow() per row. A cell wider than its column
// pushes the rest of its line right.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::string rightAligned = "");
  void row(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  std::string render(const std::string& indent = "  ") const;

  // Each column's width: its widest cell, header included.
  std::vector<size_t> widths() const;
  // The header line ("" for a header of empty strings) and one row's line,
  // each ending in '\n', with the columns `widths` wide.
  std::string renderHeader(const std::vector<size_t>& widths, const std::string& indent = "  ") const;
  std::string renderRow(std::vector<std::string> cells, const std::vector<size_t>& widths,
                        const std::string& indent = "  ") const;

 private:
  std::vector<std::string> header_;
  std::string right_;  // 'r' at position i: column i right-aligned
  std::vector<std::vector<std::string>> rows_;
};

// ---- JSON -------------------------------------------------------------------

std::string jsonString(std::string_view text);  // quoted, escaped

// Documents are built as nlohmann::ordered_json, whose objects keep their
// members in the order they were added.
using Json = nlohmann::ordered_json;

// One document on one line (no line break at the end), as compact as
// nlohmann's dump() but with the escaping of jsonString for every string and
// key: text from a trace is untrusted, and its terminal controls outside ASCII
// (C1, bidirectional overrides) and bytes that are not valid UTF-8 must come
// out escaped, which dump() does not do. Numbers that are not integers are
// written with six significant digits ("%.6g"); non-finite ones as null.
std::string jsonText(const Json& document);

// Adds `key: value` to an object even when `key` is already there (keys that
// come from trace data, such as recorded environment variables, may repeat;
// each is kept, in order, as it was recorded).
void appendMember(Json& object, std::string key, Json value);

// ---- schema reflection -------------------------------------------------------

using format::enumName;
using format::eventTypeName;
using format::eventTypeNames;
using format::forEachContent;

}  // namespace kcap::tools
