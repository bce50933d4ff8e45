// Protocol-0 text arguments of the pickle machine (core/pickle.cc): what CPython's C unpickler makes of
// the lines after INT, LONG, PUT, GET, STRING and UNICODE.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/bytes.h"

namespace ckpt {

// The opcode's name as pickletools spells it, or nullptr for a byte that is no opcode.
const char* opname(uint8_t op);

// Decodes the body of a protocol-0 STRING ('...' or "..." with Python escapes); `at` names the place.
std::string unescape_string(std::string_view body, const Cursor& c, uint64_t at);

// raw-unicode-escape (protocol-0 UNICODE): \uXXXX and \UXXXXXXXX become UTF-8, other bytes latin-1.
std::string raw_unicode_escape(std::string_view in);

// An integer as Python's PyLong_FromString(line, NULL, base) reads a line (base 10: PUT, GET; base 0:
// LONG and INT's fallback): surrounding whitespace, a sign, for base 0 a 0x / 0o / 0b prefix and no
// leading zeros before other digits, single underscores between digits. The line ends at its first
// NUL, as the C string Python hands over does. A value past 64 bits comes back as decimal text.
struct PyInt {
  int64_t value = 0;
  std::string big;  // decimal text when the value does not fit in int64
};
std::optional<PyInt> py_int(std::string_view line, int base);

// The digits of an int literal as Python's int() walks them, once the sign and prefix are gone: single
// '_' between digits, none leading or trailing. `digit(c)` takes each other character in order and returns
// false to refuse it. False for an empty text, a misplaced '_' or a refused character.
template <class Digit>
bool py_digits(std::string_view t, Digit&& digit) {
  bool last_digit = false;
  for (const char c : t) {
    if (c == '_') {
      if (!last_digit) return false;
      last_digit = false;
      continue;
    }
    if (!digit(c)) return false;
    last_digit = true;
  }
  return last_digit;
}

// INT's argument as load_int reads it: C strtol(line, base 0) when it consumes the whole line (so "010"
// is 8), otherwise py_int(line, 0). `exact` is set when strtol took the whole line (the only case where
// "00" / "01" are the booleans).
std::optional<PyInt> py_int_opcode(std::string_view line, bool* exact);

// A pickled big integer's payload in decimal: text from LONG / INT as it stands (a trailing L dropped), the
// two's-complement little-endian bytes of LONG1 / LONG4 converted.
std::string bigint_decimal_text(std::string_view payload);

}  // namespace ckpt
