#include "core/tar.h"
#include "core/pickle_text.h"  // py_digits

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

namespace ckpt {
namespace {

constexpr uint64_t kBlock = 512;

// str.strip()'s whitespace among ASCII (tarfile decodes number fields as ASCII).
bool py_space(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

// The bytes of a field up to its first NUL (tarfile's nts).
std::string_view nts(std::string_view field) {
  const size_t nul = field.find('\0');
  return nul == std::string_view::npos ? field : field.substr(0, nul);
}

// int(text, 8) on a stripped ASCII text: sign, optional 0o prefix, octal digits with single '_' between
// them. Saturates far beyond any file size instead of overflowing.
std::optional<int64_t> octal(std::string_view t) {
  bool neg = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    neg = t[0] == '-';
    t.remove_prefix(1);
  }
  bool prefix = false;
  if (t.size() >= 2 && t[0] == '0' && (t[1] == 'o' || t[1] == 'O')) {
    t.remove_prefix(2);
    prefix = true;
  }
  if (prefix && !t.empty() && t[0] == '_') t.remove_prefix(1);
  uint64_t v = 0;
  const bool digits = py_digits(t, [&v](char c) {
    if (c < '0' || c > '7') return false;
    v = v > (uint64_t{1} << 58) ? uint64_t{1} << 62 : (v << 3) | static_cast<uint64_t>(c - '0');
    return true;
  });
  if (!digits) return std::nullopt;
  return neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
}

// tarfile's nti: base-256 when the first byte is 0x80 (0xFF: negative), else int(nts(field).strip(), 8)
// ("" is 0). nullopt where tarfile raises InvalidHeaderError.
std::optional<int64_t> nti(std::string_view field) {
  const auto first = static_cast<uint8_t>(field[0]);
  if (first == 0x80 || first == 0xFF) {  // at most 11 bytes after the marker: 88 bits
    unsigned __int128 n = 0;
    for (size_t k = 1; k < field.size(); ++k) n = (n << 8) | static_cast<uint8_t>(field[k]);
    const __int128 v = first == 0xFF ? static_cast<__int128>(n) - (static_cast<__int128>(1) << (8 * (field.size() - 1)))
                                     : static_cast<__int128>(n);
    const __int128 cap = static_cast<__int128>(1) << 62;  // no file is this large
    return static_cast<int64_t>(v > cap ? cap : v < -cap ? -cap : v);
  }
  std::string_view t = nts(field);
  for (char c : t)
    if (static_cast<uint8_t>(c) >= 0x80) return std::nullopt;
  while (!t.empty() && py_space(static_cast<uint8_t>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && py_space(static_cast<uint8_t>(t.back()))) t.remove_suffix(1);
  if (t.empty()) return 0;
  return octal(t);
}

std::string_view field(const ByteView& h, uint64_t off, uint64_t len) { return h.str(off, len); }

// One 512-byte header, decoded as tarfile's TarInfo.frombuf decodes it.
struct Header {
  std::string name, linkname;
  char type = '0';
  int64_t size = 0;
};

enum class HeaderState { Ok, End, Invalid, Short };

// frombuf: a short block (EmptyHeaderError / TruncatedHeaderError), all zeros (EOFHeaderError), a bad
// checksum or number (InvalidHeaderError).
HeaderState read_header(const ByteView& f, uint64_t at, Header* h, std::string* why) {
  if (at >= f.size() || f.size() - at < kBlock) {
    *why = "a header shorter than 512 bytes";
    return HeaderState::Short;
  }
  const ByteView b = f.sub(at, kBlock, "tar header");
  const uint8_t* p = b.data();
  if (std::all_of(p, p + kBlock, [](uint8_t c) { return c == 0; })) {
    *why = "a block of zeros";
    return HeaderState::End;
  }
  const auto chksum = nti(field(b, 148, 8));
  uint64_t unsigned_sum = 256;
  int64_t signed_sum = 256;
  for (uint64_t k = 0; k < kBlock; ++k) {
    if (k >= 148 && k < 156) continue;
    unsigned_sum += p[k];
    signed_sum += static_cast<int8_t>(p[k]);
  }
  if (!chksum || (*chksum != static_cast<int64_t>(unsigned_sum) && *chksum != signed_sum)) {
    *why = chksum ? fmt::format("checksum {} where the header sums to {}", *chksum, unsigned_sum)
                  : "a checksum that is not a number";
    return HeaderState::Invalid;
  }
  static constexpr std::pair<uint64_t, uint64_t> kNumbers[] = {{100, 8},  {108, 8}, {116, 8}, {124, 12},
                                                               {136, 12}, {329, 8}, {337, 8}};
  for (const auto& [off, len] : kNumbers) {
    const auto v = nti(field(b, off, len));
    if (!v) {
      *why = fmt::format("a field at +{} that is not a number", off);
      return HeaderState::Invalid;
    }
    if (off == 124) h->size = *v;
  }
  h->name = std::string(nts(field(b, 0, 100)));
  h->linkname = std::string(nts(field(b, 157, 100)));
  h->type = static_cast<char>(p[156]);
  if (h->type == '\0' && !h->name.empty() && h->name.back() == '/') h->type = '5';  // v7 directory
  if (h->type == '5')
    while (!h->name.empty() && h->name.back() == '/') h->name.pop_back();
  const std::string_view prefix = nts(field(b, 345, 155));
  if (!prefix.empty() && h->type != 'L' && h->type != 'K' && h->type != 'S') h->name = std::string(prefix) + "/" + h->name;
  return HeaderState::Ok;
}

bool is_regular(char type) { return type == '0' || type == '\0' || type == '7' || type == 'S'; }
// tarfile.SUPPORTED_TYPES
bool is_supported(char type) { return std::string_view("01234567LKS").find(type) != std::string_view::npos || type == '\0'; }
bool has_data(char type) { return is_regular(type) || !is_supported(type); }

uint64_t padded(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

// PAX records "<len> <keyword>=<value>\n", as tarfile's regex (\d+) ([^=]+)= reads them.
void pax_records(const ByteView& data, std::map<std::string, std::string>* out, uint64_t at) {
  const std::string_view s = data.str(0, data.size());
  size_t pos = 0;
  while (pos < s.size()) {
    size_t k = pos;
    while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
    if (k == pos || k >= s.size() || s[k] != ' ') break;
    const size_t kw = k + 1;
    const size_t eq = s.find('=', kw);
    if (eq == std::string_view::npos || eq == kw) break;
    uint64_t length = 0;
    for (size_t d = pos; d < k; ++d)
      length = std::min<uint64_t>(length * 10 + static_cast<uint64_t>(s[d] - '0'), uint64_t{1} << 40);
    if (length == 0) data.fail(pos, fmt::format("PAX record of length 0 in the extended header at 0x{:x}", at));
    const uint64_t value_end = std::min<uint64_t>(pos + length, s.size() + 1) - 1;  // the record's newline
    const std::string key(s.substr(kw, eq - kw));
    (*out)[key] = eq + 1 <= value_end ? std::string(s.substr(eq + 1, value_end - (eq + 1))) : std::string();
    if (length > s.size() - pos) break;
    pos += length;
  }
}

// int(value) for a PAX number; tarfile uses 0 when that fails.
int64_t pax_number(std::string_view v) {
  while (!v.empty() && py_space(static_cast<uint8_t>(v.front()))) v.remove_prefix(1);
  while (!v.empty() && py_space(static_cast<uint8_t>(v.back()))) v.remove_suffix(1);
  bool neg = false;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    neg = v[0] == '-';
    v.remove_prefix(1);
  }
  uint64_t n = 0;
  const bool digits = py_digits(v, [&n](char c) {
    if (c < '0' || c > '9') return false;
    constexpr uint64_t kMost = uint64_t{1} << 62;  // past any file: the size check refuses it
    n = n > kMost / 10 ? kMost : std::min<uint64_t>(n * 10 + static_cast<uint64_t>(c - '0'), kMost);
    return true;
  });
  if (!digits) return 0;
  return neg ? -static_cast<int64_t>(n) : static_cast<int64_t>(n);
}

void apply_pax(const std::map<std::string, std::string>& pax, TarMember* m, int64_t* size) {
  for (const auto& [k, v] : pax) {
    if (k == "path" || k == "GNU.sparse.name") {
      m->name = v;
      if (k == "path")
        while (!m->name.empty() && m->name.back() == '/') m->name.pop_back();
    } else if (k == "size" || k == "GNU.sparse.size" || k == "GNU.sparse.realsize") {
      *size = pax_number(v);
    }
  }
}

class Lister {
 public:
  Lister(const ByteView& f, const Limits& lim) : f_(f), lim_(lim) {}

  std::vector<TarMember> run() {
    uint64_t at = 0;
    for (;;) {
      if (out_.size() >= lim_.zip_entries)
        f_.fail(at, fmt::format("more than {} tar members (limit zip-entries)", lim_.zip_entries));
      TarMember m;
      int64_t size = 0;
      uint64_t next = 0;
      if (!member(at, at, &m, &size, &next, 0)) break;
      out_.push_back(std::move(m));
      at = next;
    }
    return std::move(out_);
  }

 private:
  // Reads the member whose first header is at `at` (GNU / PAX records followed to the member they
  // describe). False at the end of the archive. `start` is where this member's first record began.
  bool member(uint64_t start, uint64_t at, TarMember* m, int64_t* size, uint64_t* next, int chained) {
    Header h;
    std::string why;
    const HeaderState st = read_header(f_, at, &h, &why);
    if (st != HeaderState::Ok) {
      if (at == 0) f_.fail(0, fmt::format("not a tar archive: the first header has {}", why));
      if (chained) f_.fail(at, fmt::format("tar header after the GNU / PAX record at 0x{:x} has {}", start, why));
      return false;  // tarfile ends the archive here
    }
    if (h.size < 0) f_.fail(at + 124, fmt::format("tar member '{}' has a negative size {}", h.name, h.size));
    const uint64_t data = at + kBlock;
    const uint64_t hsize = static_cast<uint64_t>(h.size);
    if (h.type == 'L' || h.type == 'K' || h.type == 'x' || h.type == 'X' || h.type == 'g') {
      if (chained > 64) f_.fail(at, "more than 64 GNU / PAX records in a row");
      if (hsize > lim_.string_bytes)
        f_.fail(at + 124, fmt::format("tar {} record of {} bytes exceeds the limit of {}", h.type, hsize, lim_.string_bytes));
      if (hsize > f_.size() - data || padded(hsize) > f_.size() - data)
        f_.fail(at + 124, fmt::format("tar {} record of {} bytes at 0x{:x} runs past the end of the {}-byte file", h.type, hsize,
                                      at, f_.size()));
      const ByteView body = f_.sub(data, hsize, "tar record");
      if (h.type == 'L' || h.type == 'K') {
        const std::string text(nts(body.str(0, body.size())));
        if (!member(start, data + padded(hsize), m, size, next, chained + 1)) return false;
        if (h.type == 'L') {
          m->name = text;
          if (m->type == '5')
            while (!m->name.empty() && m->name.back() == '/') m->name.pop_back();
        }
        m->header = start;
        return true;
      }
      if (h.type == 'g') {
        pax_records(body, &global_, at);
        return member(start, data + padded(hsize), m, size, next, chained + 1);
      }
      std::map<std::string, std::string> pax = global_;  // an extended header adds to the global records
      pax_records(body, &pax, at);
      if (!member(start, data + padded(hsize), m, size, next, chained + 1)) return false;
      const int64_t before = *size;
      apply_pax(pax, m, size);
      if (*size < 0) f_.fail(at, fmt::format("PAX size of '{}' is negative", m->name));
      if (*size != before) {  // the extended header replaces the size: the next header moves too
        m->size = static_cast<uint64_t>(*size);
        *next = m->data + (has_data(m->type) ? padded(m->size) : 0);
        check_data(*m);
      }
      m->header = start;
      return true;
    }
    if (h.type == 'S') f_.fail(at, fmt::format("tar member '{}' is a GNU sparse file: not read", h.name));
    m->name = h.name;
    m->type = h.type;
    m->header = start;
    m->data = data;
    m->size = hsize;
    *size = h.size;
    *next = data + (has_data(h.type) ? padded(hsize) : 0);
    if (has_data(h.type)) check_data(*m);
    // Global PAX records apply to every later member (the header's own size already placed the next one).
    int64_t gsize = *size;
    apply_pax(global_, m, &gsize);
    if (gsize >= 0) m->size = static_cast<uint64_t>(gsize);
    return true;
  }

  // tarfile moves to the next header by reading the byte before it: data (and its padding) past the
  // end of the file is "unexpected end of data".
  void check_data(const TarMember& m) {
    if (m.size == 0) return;
    if (m.data > f_.size() || m.size > f_.size() - m.data || padded(m.size) > f_.size() - m.data)
      f_.fail(m.header + 124,
              fmt::format("tar member '{}' at 0x{:x}: its {} bytes (padded to {}) run past the end of the {}-byte file", m.name,
                          m.header, m.size, padded(m.size), f_.size()));
  }

  const ByteView& f_;
  const Limits& lim_;
  std::map<std::string, std::string> global_;
  std::vector<TarMember> out_;
};

}  // namespace

bool TarMember::is_file() const { return has_data(type); }

bool looks_like_tar(const ByteView& file) {
  Header h;
  std::string why;
  return read_header(file, 0, &h, &why) == HeaderState::Ok;
}

std::vector<TarMember> tar_members(const ByteView& file, const Limits& limits) { return Lister(file, limits).run(); }

const TarMember* find_tar_member(const std::vector<TarMember>& members, std::string_view name) {
  for (auto it = members.rbegin(); it != members.rend(); ++it)
    if (it->name == name) return &*it;
  return nullptr;
}

ByteView tar_member_data(const ByteView& file, const TarMember& m) {
  return file.sub(m.data, m.size, "tar member data").as_member(m.name);
}

}  // namespace ckpt
