// Protocol-0 text arguments of the pickle machine: opcode names, STRING / UNICODE escapes, integers
// as Python's int() reads them, Python 2 module names.
#include "core/pickle_text.h"
#include "core/text.h"

#include <fmt/format.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <vector>

namespace ckpt {

// Python 3's _compat_pickle (3.11 and 3.13 agree): what the unpickler imports for a Python 2 name.
// NAME_MAPPING first (a module and name pair), then IMPORT_MAPPING (the module alone). ckpt applies them
// at every protocol (Python only below protocol 3, where the unmapped name would fail to import).
namespace {

struct NameMap {
  std::string_view module, name, module3, name3;
};

constexpr NameMap kNameMap[] = {
    {"UserDict", "IterableUserDict", "collections", "UserDict"},
    {"UserDict", "UserDict", "collections", "UserDict"},
    {"UserList", "UserList", "collections", "UserList"},
    {"UserString", "UserString", "collections", "UserString"},
    {"__builtin__", "basestring", "builtins", "str"},
    {"__builtin__", "intern", "sys", "intern"},
    {"__builtin__", "long", "builtins", "int"},
    {"__builtin__", "reduce", "functools", "reduce"},
    {"__builtin__", "unichr", "builtins", "chr"},
    {"__builtin__", "unicode", "builtins", "str"},
    {"__builtin__", "xrange", "builtins", "range"},
    {"_multiprocessing", "Connection", "multiprocessing.connection", "Connection"},
    {"_socket", "fromfd", "socket", "fromfd"},
    {"exceptions", "StandardError", "builtins", "Exception"},
    {"itertools", "ifilter", "builtins", "filter"},
    {"itertools", "ifilterfalse", "itertools", "filterfalse"},
    {"itertools", "imap", "builtins", "map"},
    {"itertools", "izip", "builtins", "zip"},
    {"itertools", "izip_longest", "itertools", "zip_longest"},
    {"multiprocessing", "AuthenticationError", "multiprocessing.context", "AuthenticationError"},
    {"multiprocessing", "BufferTooShort", "multiprocessing.context", "BufferTooShort"},
    {"multiprocessing", "ProcessError", "multiprocessing.context", "ProcessError"},
    {"multiprocessing", "TimeoutError", "multiprocessing.context", "TimeoutError"},
    {"multiprocessing.forking", "Popen", "multiprocessing.popen_fork", "Popen"},
    {"multiprocessing.process", "Process", "multiprocessing.context", "Process"},
    {"socket", "_socketobject", "socket", "SocketType"},
    {"urllib", "ContentTooShortError", "urllib.error", "ContentTooShortError"},
    {"urllib", "getproxies", "urllib.request", "getproxies"},
    {"urllib", "pathname2url", "urllib.request", "pathname2url"},
    {"urllib", "quote", "urllib.parse", "quote"},
    {"urllib", "quote_plus", "urllib.parse", "quote_plus"},
    {"urllib", "unquote", "urllib.parse", "unquote"},
    {"urllib", "unquote_plus", "urllib.parse", "unquote_plus"},
    {"urllib", "url2pathname", "urllib.request", "url2pathname"},
    {"urllib", "urlcleanup", "urllib.request", "urlcleanup"},
    {"urllib", "urlencode", "urllib.parse", "urlencode"},
    {"urllib", "urlopen", "urllib.request", "urlopen"},
    {"urllib", "urlretrieve", "urllib.request", "urlretrieve"},
    {"urllib2", "HTTPError", "urllib.error", "HTTPError"},
    {"urllib2", "URLError", "urllib.error", "URLError"},
    {"whichdb", "whichdb", "dbm", "whichdb"},
};

constexpr std::pair<std::string_view, std::string_view> kImportMap[] = {
    {"BaseHTTPServer", "http.server"},
    {"CGIHTTPServer", "http.server"},
    {"ConfigParser", "configparser"},
    {"Cookie", "http.cookies"},
    {"Dialog", "tkinter.dialog"},
    {"DocXMLRPCServer", "xmlrpc.server"},
    {"FileDialog", "tkinter.filedialog"},
    {"HTMLParser", "html.parser"},
    {"Queue", "queue"},
    {"ScrolledText", "tkinter.scrolledtext"},
    {"SimpleDialog", "tkinter.simpledialog"},
    {"SimpleHTTPServer", "http.server"},
    {"SimpleXMLRPCServer", "xmlrpc.server"},
    {"SocketServer", "socketserver"},
    {"StringIO", "io"},
    {"Tix", "tkinter.tix"},
    {"Tkconstants", "tkinter.constants"},
    {"Tkdnd", "tkinter.dnd"},
    {"Tkinter", "tkinter"},
    {"UserDict", "collections"},
    {"UserList", "collections"},
    {"UserString", "collections"},
    {"__builtin__", "builtins"},
    {"_abcoll", "collections.abc"},
    {"_elementtree", "xml.etree.ElementTree"},
    {"_winreg", "winreg"},
    {"anydbm", "dbm"},
    {"cPickle", "pickle"},
    {"cStringIO", "io"},
    {"commands", "subprocess"},
    {"cookielib", "http.cookiejar"},
    {"copy_reg", "copyreg"},
    {"dbhash", "dbm.bsd"},
    {"dbm", "dbm.ndbm"},
    {"dumbdbm", "dbm.dumb"},
    {"dummy_thread", "_dummy_thread"},
    {"exceptions", "builtins"},
    {"gdbm", "dbm.gnu"},
    {"htmlentitydefs", "html.entities"},
    {"httplib", "http.client"},
    {"markupbase", "_markupbase"},
    {"repr", "reprlib"},
    {"robotparser", "urllib.robotparser"},
    {"test.test_support", "test.support"},
    {"thread", "_thread"},
    {"tkColorChooser", "tkinter.colorchooser"},
    {"tkCommonDialog", "tkinter.commondialog"},
    {"tkFileDialog", "tkinter.filedialog"},
    {"tkFont", "tkinter.font"},
    {"tkMessageBox", "tkinter.messagebox"},
    {"tkSimpleDialog", "tkinter.simpledialog"},
    {"ttk", "tkinter.ttk"},
    {"urllib2", "urllib.request"},
    {"urlparse", "urllib.parse"},
    {"whichdb", "dbm"},
    {"xmlrpclib", "xmlrpc.client"},
};

}  // namespace

std::pair<std::string_view, std::string_view> python3_global(std::string_view module, std::string_view name) {
  for (const NameMap& m : kNameMap)
    if (m.module == module && m.name == name) return {m.module3, m.name3};
  for (const auto& [py2, py3] : kImportMap)
    if (module == py2) return {py3, name};
  return {module, name};
}


const char* opname(uint8_t op) {
  switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

// Decodes the body of a protocol-0 STRING ('...' or "..." with Python escapes).
std::string unescape_string(std::string_view body, const Cursor& c, uint64_t at) {
  if (body.size() < 2 || (body.front() != '\'' && body.front() != '"') || body.back() != body.front())
    c.fail_at(at, "STRING argument is not a quoted string");
  body = body.substr(1, body.size() - 2);
  std::string out;
  out.reserve(body.size());
  for (size_t k = 0; k < body.size(); ++k) {
    char ch = body[k];
    if (ch != '\\' || k + 1 == body.size()) {
      out += ch;
      continue;
    }
    char e = body[++k];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'x':
        if (k + 2 < body.size()) {
          out += static_cast<char>(std::strtol(std::string(body.substr(k + 1, 2)).c_str(), nullptr, 16));
          k += 2;
        }
        break;
      default: out += '\\'; out += e;
    }
  }
  return out;
}

// raw-unicode-escape: \uXXXX and \UXXXXXXXX become UTF-8, everything else is latin-1.
std::string raw_unicode_escape(std::string_view in) {
  std::string out;
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] == '\\' && k + 1 < in.size() && (in[k + 1] == 'u' || in[k + 1] == 'U')) {
      size_t n = in[k + 1] == 'u' ? 4 : 8;
      if (k + 2 + n <= in.size()) {
        std::string hex(in.substr(k + 2, n));
        char* end = nullptr;
        unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
        if (end == hex.c_str() + n && cp <= 0x10FFFF) {
          append_utf8(out, static_cast<uint32_t>(cp));
          k += 1 + n;
          continue;
        }
      }
    }
    append_utf8(out, static_cast<unsigned char>(in[k]));
  }
  return out;
}


namespace {

// Big integers as base-1e9 limbs, little-endian: value = value * base + digit.
void limbs_muladd(std::vector<uint32_t>& limbs, uint64_t base, uint64_t digit) {
  uint64_t carry = digit;
  for (uint32_t& l : limbs) {
    const uint64_t y = static_cast<uint64_t>(l) * base + carry;
    l = static_cast<uint32_t>(y % 1000000000);
    carry = y / 1000000000;
  }
  for (; carry; carry /= 1000000000) limbs.push_back(static_cast<uint32_t>(carry % 1000000000));
}

// Magnitude in base-1e9 limbs (little-endian) to decimal text.
std::string limbs_decimal(const std::vector<uint32_t>& limbs, bool neg) {
  size_t top = limbs.size();
  while (top > 1 && limbs[top - 1] == 0) --top;
  std::string out = std::to_string(limbs[top - 1]);
  for (size_t k = top - 1; k-- > 0;) out += fmt::format("{:09d}", limbs[k]);
  return neg && out != "0" ? "-" + out : out;
}

}  // namespace

std::string bigint_decimal_text(std::string_view b) {
  if (!b.empty() && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9'))) {  // from text LONG / INT
    std::string t(b);
    if (!t.empty() && t.back() == 'L') t.pop_back();
    return t;
  }
  // Two's-complement little-endian bytes -> magnitude in base 1e9 limbs.
  std::vector<uint8_t> mag(b.begin(), b.end());
  const bool neg = !mag.empty() && (mag.back() & 0x80);
  if (neg) {  // negate: invert and add one
    int carry = 1;
    for (auto& x : mag) {
      int y = static_cast<uint8_t>(~x) + carry;
      x = static_cast<uint8_t>(y);
      carry = y >> 8;
    }
  }
  std::vector<uint32_t> limbs{0};
  for (size_t k = mag.size(); k-- > 0;) limbs_muladd(limbs, 256, mag[k]);
  return limbs_decimal(limbs, neg);
}


namespace {

bool py_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}


}  // namespace

std::optional<PyInt> py_int(std::string_view line, int base) {
  if (const size_t nul = line.find('\0'); nul != std::string_view::npos) line = line.substr(0, nul);
  size_t k = 0;
  while (k < line.size() && py_space(line[k])) ++k;
  size_t end = line.size();
  while (end > k && py_space(line[end - 1])) --end;
  std::string_view t = line.substr(k, end - k);
  bool neg = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    neg = t[0] == '-';
    t.remove_prefix(1);
  }
  bool prefixed = false;
  if (base == 0) {
    base = 10;
    if (t.size() >= 2 && t[0] == '0') {
      const char p = static_cast<char>(t[1] | 0x20);
      if (p == 'x' || p == 'o' || p == 'b') {
        base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
        t.remove_prefix(2);
        prefixed = true;
      }
    }
    // Base 0 refuses leading zeros ("010"), but not zeros alone ("00", "0_0").
    if (!prefixed && t.size() > 1 && t[0] == '0' && t.find_first_not_of("0_") != std::string_view::npos) return std::nullopt;
  }
  if (prefixed && !t.empty() && t[0] == '_') t.remove_prefix(1);  // "0x_1f"
  if (t.empty() || t.front() == '_' || t.back() == '_') return std::nullopt;  // refused before any digit's work
  std::vector<uint32_t> limbs{0};
  uint64_t small = 0;
  bool fits = true;
  const bool digits = py_digits(t, [&](char c) {
    const int d = digit_value(c);
    if (d >= base) return false;
    if (fits && small <= (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) small = small * base + d;
    else fits = false;
    limbs_muladd(limbs, static_cast<uint64_t>(base), static_cast<uint64_t>(d));
    return true;
  });
  if (!digits) return std::nullopt;
  PyInt out;
  if (fits && (small <= static_cast<uint64_t>(INT64_MAX) || (neg && small == static_cast<uint64_t>(INT64_MAX) + 1))) {
    out.value = neg ? static_cast<int64_t>(0 - small) : static_cast<int64_t>(small);
    return out;
  }
  out.big = limbs_decimal(limbs, neg);
  return out;
}

std::optional<PyInt> py_int_opcode(std::string_view line, bool* exact) {
  *exact = false;
  // strtol(s, &end, 0) over the C string (which ends at a NUL), then end must be the line's end.
  std::string s(line.substr(0, line.find('\0')));
  if (s.size() == line.size()) {
    errno = 0;
    char* endp = nullptr;
    const long long x = std::strtoll(s.c_str(), &endp, 0);
    if (errno == 0 && endp == s.c_str() + s.size() && endp != s.c_str()) {
      *exact = true;
      return PyInt{x, {}};
    }
  }
  return py_int(line, 0);
}

}  // namespace ckpt
