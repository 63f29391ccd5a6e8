#include "name_pattern.h"

#include <limits>
#include <utility>

namespace kcap {
namespace {

constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

bool isPunctuation(unsigned char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}

// A byte as an error message shows it.
std::string shown(unsigned char c) {
  if (c >= 0x20 && c < 0x7f) {
    return std::string(1, static_cast<char>(c));
  }
  static const char* const digits = "0123456789abcdef";
  return std::string("\\x") + digits[c >> 4] + digits[c & 15];
}

}  // namespace

NamePatternError::NamePatternError(size_t position, const std::string& problem)
    : std::runtime_error("at position " + std::to_string(position) + ": " + problem), position_(position) {}

// Parses a pattern into a tree (recursing once per level of group nesting,
// which is bounded), counting the states each part compiles to as it goes, then
// emits the tree as a program laid out to fall through: each part's code
// continues at the instruction after it.
class NamePatternCompiler {
 public:
  using Op = NamePattern::Op;
  using ByteSet = NamePattern::ByteSet;

  NamePatternCompiler(std::string_view source, NamePattern& out) : source_(source), out_(out) {}

  void compile() {
    const uint32_t root = parseAlternation(0);
    if (at_ < source_.size()) {
      throw NamePatternError(at_, "unmatched )");  // the only byte an alternation stops at
    }
    limit(nodes_[root].states + 1, 0);
    emit(root);
    push(Op::kMatch);
  }

 private:
  enum class Kind : uint8_t { kEmpty, kByte, kSet, kBegin, kEnd, kConcat, kAlternation, kRepeat };
  struct Node {
    Kind kind = Kind::kEmpty;
    uint32_t value = 0;  // kByte: the byte; kSet: the set's index
    uint32_t min = 0;    // kRepeat
    uint32_t max = 0;    // kRepeat; kUnbounded for no upper bound
    uint64_t states = 0;
    std::vector<uint32_t> children;
  };
  // What one escape or class member stands for: a byte or a set of them.
  struct Atom {
    bool isSet = false;
    unsigned char byte = 0;
    ByteSet set{};
  };

  static void add(ByteSet& set, unsigned char c) { set[c >> 6] |= uint64_t{1} << (c & 63); }
  static void addRange(ByteSet& set, unsigned char low, unsigned char high) {
    for (unsigned c = low; c <= high; ++c) {
      add(set, static_cast<unsigned char>(c));
    }
  }
  static ByteSet complement(ByteSet set) {
    for (uint64_t& word : set) {
      word = ~word;
    }
    return set;
  }
  static void merge(ByteSet& into, const ByteSet& from) {
    for (size_t i = 0; i < into.size(); ++i) {
      into[i] |= from[i];
    }
  }

  void limit(uint64_t states, size_t position) const {
    if (states > NamePattern::kMaxStates) {
      throw NamePatternError(
          position, "the pattern is too large (more than " + std::to_string(NamePattern::kMaxStates) + " states)");
    }
  }

  uint32_t node(Node n) {
    nodes_.push_back(std::move(n));
    return static_cast<uint32_t>(nodes_.size() - 1);
  }

  uint32_t leaf(Kind kind, uint32_t value = 0) {
    Node n;
    n.kind = kind;
    n.value = value;
    n.states = kind == Kind::kEmpty ? 0 : 1;
    return node(std::move(n));
  }

  uint32_t setNode(const ByteSet& set) {
    size_t members = 0;
    unsigned last = 0;
    for (unsigned c = 0; c < 256; ++c) {
      if ((set[c >> 6] >> (c & 63)) & 1) {
        ++members;
        last = c;
      }
    }
    if (members == 1) {
      return leaf(Kind::kByte, last);
    }
    out_.sets_.push_back(set);
    return leaf(Kind::kSet, static_cast<uint32_t>(out_.sets_.size() - 1));
  }

  uint32_t atomNode(const Atom& atom) { return atom.isSet ? setNode(atom.set) : leaf(Kind::kByte, atom.byte); }

  // alternation := concatenation ('|' concatenation)*
  uint32_t parseAlternation(size_t depth) {
    const size_t start = at_;
    Node n;
    n.kind = Kind::kAlternation;
    n.children.push_back(parseConcatenation(depth));
    while (at_ < source_.size() && source_[at_] == '|') {
      ++at_;
      n.children.push_back(parseConcatenation(depth));
    }
    if (n.children.size() == 1) {
      return n.children.front();
    }
    n.states = 2 * (n.children.size() - 1);  // a split and a jump for each branch but the last
    for (const uint32_t child : n.children) {
      n.states += nodes_[child].states;
    }
    limit(n.states, start);
    return node(std::move(n));
  }

  // concatenation := piece*, up to '|', ')' or the end
  uint32_t parseConcatenation(size_t depth) {
    const size_t start = at_;
    Node n;
    n.kind = Kind::kConcat;
    while (at_ < source_.size() && source_[at_] != '|' && source_[at_] != ')') {
      const uint32_t piece = parsePiece(depth);
      n.states += nodes_[piece].states;
      limit(n.states, start);
      n.children.push_back(piece);
    }
    if (n.children.empty()) {
      return leaf(Kind::kEmpty);
    }
    if (n.children.size() == 1) {
      return n.children.front();
    }
    return node(std::move(n));
  }

  static bool isQuantifier(char c) { return c == '*' || c == '+' || c == '?' || c == '{'; }

  // piece := atom quantifier? where quantifier := ('*' | '+' | '?' | '{' counts '}') '?'?
  uint32_t parsePiece(size_t depth) {
    const char first = source_[at_];
    const uint32_t atom = parseAtom(depth);
    if (at_ >= source_.size() || !isQuantifier(source_[at_])) {
      return atom;
    }
    const size_t position = at_;
    if (first == '^' || first == '$') {  // a group of them, (^)*, may repeat
      throw NamePatternError(position, "nothing to repeat (^ and $ take no quantifier)");
    }
    Node n;
    n.kind = Kind::kRepeat;
    switch (source_[at_++]) {
      case '*':
        n.min = 0;
        n.max = kUnbounded;
        break;
      case '+':
        n.min = 1;
        n.max = kUnbounded;
        break;
      case '?':
        n.min = 0;
        n.max = 1;
        break;
      default:
        parseCounts(position, n.min, n.max);
        break;
    }
    if (at_ < source_.size() && source_[at_] == '?') {
      ++at_;  // lazy: the same yes or no
    }
    if (at_ < source_.size() && isQuantifier(source_[at_])) {
      throw NamePatternError(at_, "a quantifier cannot follow another (group the first: (a*)*)");
    }
    const uint64_t child = nodes_[atom].states;
    if (n.max == kUnbounded) {
      n.states = n.min == 0 ? child + 2 : uint64_t{n.min} * child + 1;
    } else {
      n.states = uint64_t{n.min} * child + uint64_t{n.max - n.min} * (child + 1);
    }
    limit(n.states, position);
    n.children.push_back(atom);
    return node(std::move(n));
  }

  // After '{' at `open`: n}, n,} or n,m}, counts up to kMaxRepeat.
  void parseCounts(size_t open, uint32_t& min, uint32_t& max) {
    const auto malformed = [&]() {
      return NamePatternError(open, "expected {n}, {n,} or {n,m} (a literal brace is \\{)");
    };
    const auto number = [&]() {
      if (at_ >= source_.size() || source_[at_] < '0' || source_[at_] > '9') {
        throw malformed();
      }
      uint32_t value = 0;
      while (at_ < source_.size() && source_[at_] >= '0' && source_[at_] <= '9') {
        value = value * 10 + static_cast<uint32_t>(source_[at_++] - '0');
        if (value > NamePattern::kMaxRepeat) {
          throw NamePatternError(open, "repetition count above " + std::to_string(NamePattern::kMaxRepeat));
        }
      }
      return value;
    };
    min = number();
    max = min;
    if (at_ < source_.size() && source_[at_] == ',') {
      ++at_;
      max = at_ < source_.size() && source_[at_] == '}' ? kUnbounded : number();
    }
    if (at_ >= source_.size() || source_[at_] != '}') {
      throw malformed();
    }
    ++at_;
    if (max < min) {
      throw NamePatternError(open, "invalid repetition {" + std::to_string(min) + "," + std::to_string(max) +
                                       "}: the maximum is below the minimum");
    }
  }

  uint32_t parseAtom(size_t depth) {
    const size_t position = at_;
    const auto c = static_cast<unsigned char>(source_[at_++]);
    switch (c) {
      case '(': {
        if (depth + 1 > NamePattern::kMaxNesting) {
          throw NamePatternError(position,
                                 "groups nested more than " + std::to_string(NamePattern::kMaxNesting) + " deep");
        }
        if (at_ < source_.size() && source_[at_] == '?') {
          if (at_ + 1 >= source_.size() || source_[at_ + 1] != ':') {
            throw NamePatternError(position,
                                   "(? other than (?: is not supported (lookaround, named "
                                   "groups and flags are not part of the syntax)");
          }
          at_ += 2;
        }
        const uint32_t inner = parseAlternation(depth + 1);
        if (at_ >= source_.size() || source_[at_] != ')') {
          throw NamePatternError(position, "missing ) for this (");
        }
        ++at_;
        return inner;
      }
      case '[':
        return setNode(parseClass(position));
      case '.': {
        ByteSet set{};
        add(set, '\n');
        return setNode(complement(set));
      }
      case '^':
        return leaf(Kind::kBegin);
      case '$':
        return leaf(Kind::kEnd);
      case '\\':
        return atomNode(parseEscape(position));
      case '*':
      case '+':
      case '?':
      case '{':
        throw NamePatternError(position, std::string("nothing to repeat before ") + static_cast<char>(c) +
                                             " (a literal one is \\" + static_cast<char>(c) + ")");
      default:
        return leaf(Kind::kByte, c);
    }
  }

  // After '\' at `position`, in a class or not.
  Atom parseEscape(size_t position) {
    if (at_ >= source_.size()) {
      throw NamePatternError(position, "\\ at the end of the pattern");
    }
    const auto c = static_cast<unsigned char>(source_[at_++]);
    Atom atom;
    switch (c) {
      case 'd':
      case 'D':
      case 'w':
      case 'W':
      case 's':
      case 'S': {
        atom.isSet = true;
        const char lower = static_cast<char>(c | 0x20);
        if (lower == 'd' || lower == 'w') {
          addRange(atom.set, '0', '9');
        }
        if (lower == 'w') {
          addRange(atom.set, 'a', 'z');
          addRange(atom.set, 'A', 'Z');
          add(atom.set, '_');
        }
        if (lower == 's') {
          for (const unsigned char space : {'\t', '\n', '\f', '\r', ' '}) {
            add(atom.set, space);
          }
        }
        if (c != static_cast<unsigned char>(lower)) {
          atom.set = complement(atom.set);
        }
        return atom;
      }
      case 'f':
        atom.byte = '\f';
        return atom;
      case 'n':
        atom.byte = '\n';
        return atom;
      case 'r':
        atom.byte = '\r';
        return atom;
      case 't':
        atom.byte = '\t';
        return atom;
      case 'v':
        atom.byte = '\v';
        return atom;
      case 'x': {
        unsigned value = 0;
        for (int i = 0; i < 2; ++i) {
          const char h = at_ < source_.size() ? source_[at_] : '\0';
          const int digit = h >= '0' && h <= '9'   ? h - '0'
                            : h >= 'a' && h <= 'f' ? h - 'a' + 10
                            : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                   : -1;
          if (digit < 0) {
            throw NamePatternError(position, "\\x needs two hex digits (\\xHH)");
          }
          value = value * 16 + static_cast<unsigned>(digit);
          ++at_;
        }
        atom.byte = static_cast<unsigned char>(value);
        return atom;
      }
      default:
        if (isPunctuation(c)) {
          atom.byte = c;
          return atom;
        }
        throw NamePatternError(position, "\\" + shown(c) +
                                             " is not supported (backreferences, \\b, \\p, \\A, \\z and the like "
                                             "are not part of the syntax)");
    }
  }

  // After '[' at `open`: the members up to ']'.
  ByteSet parseClass(size_t open) {
    bool negated = false;
    if (at_ < source_.size() && source_[at_] == '^') {
      negated = true;
      ++at_;
    }
    if (at_ < source_.size() && source_[at_] == ']') {
      throw NamePatternError(at_, "] first in a class (a literal ] is \\], and a class cannot be empty)");
    }
    ByteSet set{};
    while (true) {
      if (at_ >= source_.size()) {
        throw NamePatternError(open, "missing ] for this [");
      }
      if (source_[at_] == ']') {
        ++at_;
        break;
      }
      const size_t first = at_;
      const Atom low = classMember();
      if (at_ + 1 < source_.size() && source_[at_] == '-' && source_[at_ + 1] != ']') {
        ++at_;
        const Atom high = classMember();
        if (low.isSet || high.isSet) {
          throw NamePatternError(first, "a range cannot begin or end with a class like \\d");
        }
        if (low.byte > high.byte) {
          throw NamePatternError(
              first, "invalid range " + shown(low.byte) + "-" + shown(high.byte) + " (its end is below its start)");
        }
        addRange(set, low.byte, high.byte);
      } else if (low.isSet) {
        merge(set, low.set);
      } else {
        add(set, low.byte);
      }
    }
    return negated ? complement(set) : set;
  }

  Atom classMember() {
    const size_t position = at_;
    const auto c = static_cast<unsigned char>(source_[at_++]);
    if (c == '[') {
      throw NamePatternError(position,
                             "[ in a class (a literal [ is \\[; POSIX classes like [:alpha:] are not part of "
                             "the syntax)");
    }
    if (c == '\\') {
      return parseEscape(position);
    }
    Atom atom;
    atom.byte = c;
    return atom;
  }

  size_t push(Op op, uint32_t x = 0, uint32_t y = 0) {
    out_.program_.push_back({op, x, y});
    return out_.program_.size() - 1;
  }
  uint32_t here() const { return static_cast<uint32_t>(out_.program_.size()); }

  void emit(uint32_t id) {
    const Node& n = nodes_[id];
    switch (n.kind) {
      case Kind::kEmpty:
        break;
      case Kind::kByte:
        push(Op::kByte, n.value);
        break;
      case Kind::kSet:
        push(Op::kSet, n.value);
        break;
      case Kind::kBegin:
        push(Op::kBegin);
        break;
      case Kind::kEnd:
        push(Op::kEnd);
        break;
      case Kind::kConcat:
        for (const uint32_t child : n.children) {
          emit(child);
        }
        break;
      case Kind::kAlternation: {
        std::vector<size_t> jumps;
        for (size_t i = 0; i < n.children.size(); ++i) {
          if (i + 1 == n.children.size()) {
            emit(n.children[i]);
            break;
          }
          const size_t split = push(Op::kSplit, here() + 1);
          emit(n.children[i]);
          jumps.push_back(push(Op::kJump));
          out_.program_[split].y = here();
        }
        for (const size_t jump : jumps) {
          out_.program_[jump].x = here();
        }
        break;
      }
      case Kind::kRepeat: {
        const uint32_t child = n.children.front();
        const uint32_t copies = n.max == kUnbounded && n.min > 0 ? n.min - 1 : n.min;
        for (uint32_t i = 0; i < copies; ++i) {
          emit(child);
        }
        if (n.max == kUnbounded && n.min == 0) {
          const size_t loop = push(Op::kSplit, here() + 1);
          emit(child);
          push(Op::kJump, static_cast<uint32_t>(loop));
          out_.program_[loop].y = here();
        } else if (n.max == kUnbounded) {
          const uint32_t body = here();
          emit(child);
          push(Op::kSplit, body, here() + 1);
        } else {
          // Each optional copy may be skipped to the end: once one is
          // left out, so are those after it.
          std::vector<size_t> splits;
          for (uint32_t i = n.min; i < n.max; ++i) {
            splits.push_back(push(Op::kSplit, here() + 1));
            emit(child);
          }
          for (const size_t split : splits) {
            out_.program_[split].y = here();
          }
        }
        break;
      }
    }
  }

  std::string_view source_;
  NamePattern& out_;
  size_t at_ = 0;
  std::vector<Node> nodes_;
};

NamePattern::NamePattern(std::string_view source) { NamePatternCompiler(source, *this).compile(); }

bool NamePattern::search(std::string_view name) const {
  const size_t size = program_.size();
  // mark[pc] == position + 1: pc is already on the list for that position.
  std::vector<uint64_t> mark(size, 0);
  std::vector<uint32_t> current;
  std::vector<uint32_t> next;
  std::vector<uint32_t> pending;
  current.reserve(size);
  next.reserve(size);
  pending.reserve(2 * size + 1);  // each state, once marked, pushes at most two

  // Adds the byte-consuming states reachable from `start` at `position`
  // without consuming a byte to `list`; true if the match state is reachable.
  const auto follow = [&](std::vector<uint32_t>& list, uint32_t start, size_t position) {
    const uint64_t stamp = uint64_t{position} + 1;
    pending.push_back(start);
    while (!pending.empty()) {
      const uint32_t pc = pending.back();
      pending.pop_back();
      if (mark[pc] == stamp) {
        continue;
      }
      mark[pc] = stamp;
      const Instruction& instruction = program_[pc];
      switch (instruction.op) {
        case Op::kByte:
        case Op::kSet:
          list.push_back(pc);
          break;
        case Op::kSplit:
          pending.push_back(instruction.y);
          pending.push_back(instruction.x);
          break;
        case Op::kJump:
          pending.push_back(instruction.x);
          break;
        case Op::kBegin:
          if (position == 0) {
            pending.push_back(pc + 1);
          }
          break;
        case Op::kEnd:
          if (position == name.size()) {
            pending.push_back(pc + 1);
          }
          break;
        case Op::kMatch:
          pending.clear();
          return true;
      }
    }
    return false;
  };

  if (follow(current, 0, 0)) {
    return true;
  }
  // A program that begins with ^ cannot start a match later.
  const bool anchored = program_.front().op == Op::kBegin;
  for (size_t position = 0; position < name.size(); ++position) {
    if (anchored && current.empty()) {
      return false;
    }
    const auto byte = static_cast<unsigned char>(name[position]);
    next.clear();
    for (const uint32_t pc : current) {
      const Instruction& instruction = program_[pc];
      const bool takes = instruction.op == Op::kByte ? instruction.x == byte
                                                     : ((sets_[instruction.x][byte >> 6] >> (byte & 63)) & 1) != 0;
      if (takes && follow(next, pc + 1, position + 1)) {
        return true;
      }
    }
    if (!anchored && follow(next, 0, position + 1)) {  // a match starting at the next byte
      return true;
    }
    current.swap(next);
  }
  return false;
}

}  // namespace kcap
