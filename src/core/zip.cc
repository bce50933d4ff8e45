#include "core/zip.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <optional>

namespace ckpt {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kEocdSize = 22;
constexpr uint64_t kLocatorSize = 20;
constexpr uint64_t kZip64EocdSize = 56;
constexpr uint64_t kCentralSize = 46;
constexpr uint64_t kLocalSize = 30;

// miniz's mz_zip_reader_locate_header_sig, which torch uses: read 4 KiB blocks backwards from the end
// (each next block starts 4093 bytes earlier, so they overlap by 3), take the last end-record signature
// that has 22 bytes after it, and give up after a block that starts 65557 or more bytes before the end
// (so at most 69584 bytes are searched). Its step back is computed unsigned: from a block that starts
// between 1 and 4092, the next read lands at a wrapped (negative) offset and fails, so torch refuses
// such a file even when the record is further back. The end record's comment length is not checked.
uint64_t find_eocd(const ByteView& f) {
  if (f.size() < kEocdSize) f.fail(0, fmt::format("file of {} bytes is too short for a zip end record", f.size()));
  constexpr uint64_t kBlock = 4096, kStep = kBlock - 3, kReach = 0xFFFF + kEocdSize;
  const uint64_t size = f.size();
  uint64_t cur = size > kBlock ? size - kBlock : 0;
  for (;;) {
    const uint64_t n = std::min(kBlock, size - cur);
    for (uint64_t i = n - 4 + 1; i-- > 0;) {
      if (f.le<uint32_t>(cur + i) == kEocdSig && size - (cur + i) >= kEocdSize) return cur + i;
    }
    if (cur == 0 || size - cur >= kReach || cur < kStep) break;
    cur -= kStep;
  }
  f.fail(size - kEocdSize, "no zip end-of-central-directory record (truncated or not a zip)");
}

// ASCII lowercase, as miniz's MZ_TOLOWER.
uint8_t lower(char c) {
  const auto u = static_cast<uint8_t>(c);
  return u >= 'A' && u <= 'Z' ? static_cast<uint8_t>(u - 'A' + 'a') : u;
}

// mz_zip_reader_filename_less: case-blind, a prefix sorts first.
bool name_less(std::string_view l, std::string_view r) {
  const size_t n = std::min(l.size(), r.size());
  size_t k = 0;
  uint8_t a = 0, b = 0;
  for (; k < n; ++k) {
    a = lower(l[k]);
    b = lower(r[k]);
    if (a != b) break;
  }
  return k == n ? l.size() < r.size() : a < b;
}

// FNV-1a of the ASCII-lowercased name: names equal to miniz's compare hash alike.
uint64_t folded_hash(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (const char c : name) h = (h ^ lower(c)) * 1099511628211ull;
  return h ^ (h >> 29);
}

// mz_zip_filename_compare: <0, 0, >0 as `l` sorts before, with, after `r`.
int name_compare(std::string_view l, std::string_view r) {
  const size_t n = std::min(l.size(), r.size());
  for (size_t k = 0; k < n; ++k) {
    const uint8_t a = lower(l[k]), b = lower(r[k]);
    if (a != b) return static_cast<int>(a) - static_cast<int>(b);
  }
  return static_cast<int>(static_cast<unsigned>(l.size()) - static_cast<unsigned>(r.size()));
}

// mz_zip_reader_sort_central_dir_offsets_by_filename, step for step: a heap sort, which is not stable,
// so where equal names end up (and so which one the binary search meets first) is miniz's to decide.
void miniz_heap_sort(std::vector<uint32_t>& idx, const std::vector<ZipEntry>& entries) {
  const uint64_t size = idx.size();
  if (size <= 1) return;
  auto less = [&](uint32_t a, uint32_t b) { return name_less(entries[a].name, entries[b].name); };
  auto sift = [&](uint64_t root, uint64_t end) {
    for (;;) {
      uint64_t child = (root << 1) + 1;
      if (child >= end) break;
      child += (child + 1 < end) && less(idx[child], idx[child + 1]);
      if (!less(idx[root], idx[child])) break;
      std::swap(idx[root], idx[child]);
      root = child;
    }
  };
  for (uint64_t start = (size - 2) >> 1;; --start) {
    sift(start, size);
    if (start == 0) break;
  }
  for (uint64_t end = size - 1; end > 0; --end) {
    std::swap(idx[end], idx[0]);
    sift(0, end);
  }
}

}  // namespace

bool looks_like_zip(const ByteView& file) { return file.size() >= 4 && file.le<uint32_t>(0) == kLocalSig; }

std::optional<ZipEnd> read_zip_end(const ByteView& f, uint64_t at) {
  const uint64_t eocd = find_eocd(f);  // in the view
  ZipEnd z;
  z.eocd = eocd;
  z.count = f.le<uint16_t>(eocd + 10);
  z.cd_size = f.le<uint32_t>(eocd + 12);
  z.cd_offset = f.le<uint32_t>(eocd + 16);
  if (f.le<uint16_t>(eocd + 4) != 0 || f.le<uint16_t>(eocd + 6) != 0) f.fail(eocd, "multi-disk zip archives are not supported");

  const bool wants64 = z.count == 0xFFFF || z.cd_size == 0xFFFFFFFF || z.cd_offset == 0xFFFFFFFF;
  if (eocd >= kLocatorSize && f.le<uint32_t>(eocd - kLocatorSize) == kZip64LocatorSig) {
    const uint64_t loc = eocd - kLocatorSize;
    const uint64_t z64_at = f.le<uint64_t>(loc + 8);  // an offset in the file
    if (z64_at > at + loc || at + loc - z64_at < kZip64EocdSize)
      f.fail(loc, fmt::format("zip64 locator points to 0x{:x}, not before the locator", z64_at));
    if (z64_at < at) return std::nullopt;
    const uint64_t z64 = z64_at - at;
    if (f.le<uint32_t>(z64) != kZip64EocdSig) f.fail(z64, "zip64 end record signature missing");
    z.count = f.le<uint64_t>(z64 + 32);
    z.cd_size = f.le<uint64_t>(z64 + 40);
    z.cd_offset = f.le<uint64_t>(z64 + 48);
  } else if (wants64) {
    f.fail(eocd, "end record needs zip64 but there is no zip64 locator");
  }
  uint64_t cd_end;
  if (add_overflows(z.cd_offset, z.cd_size, &cd_end) || cd_end > at + f.size())
    f.fail(eocd, fmt::format("central directory [0x{:x}, +{}) lies outside the {}-byte file", z.cd_offset, z.cd_size, at + f.size()));
  return z;
}

ZipEntry read_central_record(Cursor& c, uint64_t i, uint64_t cd_offset) {
  const uint64_t rec = c.pos();
  if (c.le<uint32_t>() != kCentralSig) c.fail_at(rec, fmt::format("central directory record {} has a bad signature", i));
  ZipEntry e;
  e.central_offset = cd_offset + rec;
  c.le<uint16_t>();  // version made by
  c.le<uint16_t>();  // version needed
  e.flags = c.le<uint16_t>();
  e.method = c.le<uint16_t>();
  c.le<uint32_t>();  // time, date
  e.crc32 = c.le<uint32_t>();
  e.compressed_size = c.le<uint32_t>();
  e.uncompressed_size = c.le<uint32_t>();
  const uint16_t name_len = c.le<uint16_t>();
  const uint16_t extra_len = c.le<uint16_t>();
  const uint16_t comment_len = c.le<uint16_t>();
  c.le<uint16_t>();  // disk start
  c.le<uint16_t>();  // internal attributes
  c.le<uint32_t>();  // external attributes
  e.local_header_offset = c.le<uint32_t>();
  e.name = c.take_str(name_len, "entry name");
  Cursor extra(c.take(extra_len, "extra field"));
  c.take(comment_len, "entry comment");

  bool need_u = e.uncompressed_size == 0xFFFFFFFF, need_c = e.compressed_size == 0xFFFFFFFF, need_o = e.local_header_offset == 0xFFFFFFFF;
  while (extra.remaining() >= 4) {
    const uint16_t id = extra.le<uint16_t>();
    Cursor field(extra.take(extra.le<uint16_t>(), "extra field record"));
    if (id != 0x0001) continue;
    if (need_u) {
      e.uncompressed_size = field.le<uint64_t>();
      need_u = false;
    }
    if (need_c) {
      e.compressed_size = field.le<uint64_t>();
      need_c = false;
    }
    if (need_o) {
      e.local_header_offset = field.le<uint64_t>();
      need_o = false;
    }
  }
  if (need_u || need_c || need_o) c.fail_at(rec, fmt::format("entry '{}' needs a zip64 extra field but has none", e.name));
  if (e.method != 0 && e.method != 8)
    c.fail_at(rec, fmt::format("entry '{}' uses compression method {} (only stored and deflated are read)", e.name, e.method));
  if (e.method == 0 && e.compressed_size != e.uncompressed_size)
    c.fail_at(rec, fmt::format("stored entry '{}' has compressed size {} != uncompressed size {}", e.name, e.compressed_size,
                               e.uncompressed_size));
  uint64_t end;
  if (add_overflows(e.local_header_offset, e.compressed_size, &end) || end > cd_offset)
    c.fail_at(rec, fmt::format("entry '{}' at 0x{:x} with {} bytes runs past the central directory", e.name, e.local_header_offset,
                               e.compressed_size));
  return e;
}

ZipReader::ZipReader(ByteView file, const Limits& limits) : file_(std::move(file)) {
  const ByteView& f = file_;
  const std::optional<ZipEnd> end = read_zip_end(f, 0);  // the whole file: the zip64 record is always in view
  const uint64_t count = end->count, cd_size = end->cd_size, cd_offset = end->cd_offset;
  if (count > limits.zip_entries || count > UINT32_MAX)
    f.fail(end->eocd, fmt::format("{} zip entries exceed the limit of {}", count, std::min<uint64_t>(limits.zip_entries, UINT32_MAX)));
  if (count > cd_size / kCentralSize)
    f.fail(end->eocd, fmt::format("{} zip entries cannot fit in a {}-byte central directory", count, cd_size));

  entries_.reserve(count);
  cd_offset_ = cd_offset;
  cd_size_ = cd_size;
  Cursor c(f.sub(cd_offset, cd_size, "central directory"));
  for (uint64_t i = 0; i < count; ++i) entries_.push_back(read_central_record(c, i, cd_offset));
  // Entries may not share bytes: each local header starts after the previous entry's header and data.
  std::vector<const ZipEntry*> by_offset;
  by_offset.reserve(entries_.size());
  for (const ZipEntry& e : entries_) by_offset.push_back(&e);
  // (as written: in strictly increasing order, which a writer's directory already is)
  if (std::adjacent_find(by_offset.begin(), by_offset.end(), [](const ZipEntry* a, const ZipEntry* b) {
        return a->local_header_offset >= b->local_header_offset;
      }) != by_offset.end())
    std::sort(by_offset.begin(), by_offset.end(),
              [](const ZipEntry* a, const ZipEntry* b) { return a->local_header_offset < b->local_header_offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const ZipEntry& a = *by_offset[k - 1];
    const ZipEntry& b = *by_offset[k];
    if (a.local_header_offset + kLocalSize + a.name.size() + a.compressed_size > b.local_header_offset)
      f.fail(b.central_offset, fmt::format("zip entries '{}' and '{}' overlap at 0x{:x}", std::string(a.name),
                                           std::string(b.name), b.local_header_offset));
  }
  // Repeated names stay: a scanner sees every record, and find() picks the one torch reads.
  // The index find() uses: a hash table of case-folded names, which also finds repeated names. Where no
  // two names are equal (ASCII case aside), miniz's binary search can only land on the one record of a
  // name, so the table answers as miniz does. Repeats are rare (a hand-made or appended archive): only
  // then are the records heap-sorted as miniz sorts them, for find() to search them as miniz does.
  slots_.assign(std::max<size_t>(size_t{16}, std::bit_ceil(entries_.size() * 2)), UINT64_MAX);
  const size_t mask = slots_.size() - 1;
  for (size_t i = 0; i < entries_.size() && !repeats_; ++i) {
    const uint64_t h = folded_hash(entries_[i].name);
    for (size_t at = h & mask;; at = (at + 1) & mask) {
      const uint64_t s = slots_[at];
      if (s == UINT64_MAX) {
        slots_[at] = i | (h >> 32 << 32);
        break;
      }
      if ((s >> 32) == (h >> 32) && name_compare(entries_[static_cast<uint32_t>(s)].name, entries_[i].name) == 0) {
        repeats_ = true;
        break;
      }
    }
  }
  if (repeats_) {
    slots_.clear();
    sorted_.resize(entries_.size());
    for (size_t i = 0; i < entries_.size(); ++i) sorted_[i] = static_cast<uint32_t>(i);
    miniz_heap_sort(sorted_, entries_);
  }
}

// mz_zip_locate_file_binary_search over the heap-sorted records.
const ZipEntry* ZipReader::find(std::string_view name) const {
  if (!repeats_) {
    const size_t mask = slots_.size() - 1;
    const uint64_t h = folded_hash(name);
    for (size_t at = h & mask; slots_[at] != UINT64_MAX; at = (at + 1) & mask) {
      const uint64_t s = slots_[at];
      if ((s >> 32) != (h >> 32)) continue;
      const ZipEntry& e = entries_[static_cast<uint32_t>(s)];
      if (e.name == name || name_compare(e.name, name) == 0) return &e;
    }
    return nullptr;
  }
  int64_t lo = 0, hi = static_cast<int64_t>(sorted_.size()) - 1;
  while (lo <= hi) {
    const int64_t mid = lo + ((hi - lo) >> 1);
    const ZipEntry& e = entries_[sorted_[static_cast<size_t>(mid)]];
    const int c = name_compare(e.name, name);
    if (c == 0) return &e;
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return nullptr;
}

uint64_t ZipReader::data_offset(const ZipEntry& e) const {
  const ByteView& f = file_;
  const uint64_t h = e.local_header_offset;
  if (f.le<uint32_t>(h) != kLocalSig) f.fail(h, fmt::format("local header of '{}' has a bad signature", e.name));
  const uint16_t name_len = f.le<uint16_t>(h + 26);
  const uint16_t extra_len = f.le<uint16_t>(h + 28);
  // A local name that differs from the directory's is read past as torch's miniz does; the security
  // scan reports it (zip-name-mismatch).
  const uint64_t data = h + kLocalSize + name_len + extra_len;
  f.sub(data, e.compressed_size, "entry data");
  return data;
}

ByteView ZipReader::stored(const ZipEntry& e) const {
  if (e.method != 0)
    file_.fail(e.local_header_offset, fmt::format("entry '{}' is deflated where stored data is required", e.name));
  return file_.sub(data_offset(e), e.compressed_size).as_member(std::string(e.name));
}

ByteView ZipReader::content(const ZipEntry& e, std::string* storage, uint64_t max_bytes) const {
  if (e.method == 0) return stored(e);
  ByteView in = file_.sub(data_offset(e), e.compressed_size);
  if (e.uncompressed_size > max_bytes)
    in.fail(0,
            fmt::format("deflated entry '{}' declares {} bytes, over the limit of {}", e.name, e.uncompressed_size, max_bytes));
  storage->assign(e.uncompressed_size, '\0');
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) in.fail(0, "cannot initialise inflate");
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(std::min<uint64_t>(in.size(), UINT32_MAX));
  zs.next_out = reinterpret_cast<Bytef*>(storage->data());
  zs.avail_out = static_cast<uInt>(storage->size());
  const int rc = inflate(&zs, Z_FINISH);
  const uint64_t produced = zs.total_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || produced != e.uncompressed_size)
    in.fail(zs.total_in,
            fmt::format("deflated entry '{}' does not inflate to its declared {} bytes", e.name, e.uncompressed_size));
  auto origin = std::make_shared<Origin>(Origin{file_.origin() ? file_.origin()->file : "", std::string(e.name)});
  return ByteView(reinterpret_cast<const uint8_t*>(storage->data()), storage->size(), origin, 0);
}

}  // namespace ckpt
