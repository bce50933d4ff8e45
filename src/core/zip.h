// A zip reader that trusts only the central directory, as PyTorch's own reader does: torch.save and
// TorchScript archives are written by miniz with sizes and CRCs zeroed in the local headers (flag 0x08,
// data descriptors), so the local headers are read only to find where an entry's data begins.
//
//   [local header 30 B | name | extra ("FB" padding to 64-byte alignment)] [data] ... per entry
//   [central directory: 46 B + name + extra + comment per entry]
//   [zip64 end of central directory record, 56 B]   (when an offset, size or count overflows 32 bits)
//   [zip64 locator, 20 B]
//   [end of central directory, 22 B + comment]
//
// Zip64: a central-directory field holding 0xFFFFFFFF (0xFFFF for counts) is replaced by the next
// 8-byte value of the extra field 0x0001, in the order: uncompressed, compressed, local offset.
//
// Where torch.load is lenient, this reader is lenient the same way (torch reads zips with miniz):
//  - Bytes may follow the end record. It is found as miniz finds it: the last signature with 22 bytes
//    after it, scanning backwards in 4 KiB blocks no further than 69584 bytes from the end (and, as in
//    miniz, not at all past a first step back that would start below offset 0: see find_eocd).
//  - Names may repeat. entries() keeps every record; find() answers as miniz's mz_zip_reader_locate_file
//    does: a binary search over the records heap-sorted by ASCII-lowercased name, so the copy it returns
//    depends on the order of the records (neither "the first" nor "the last"), and case does not matter.
//    Without repeated names a hash table of the case-folded names answers instead (the same record, in
//    O(1), with no sort: an archive of a million tensors is a million records).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/bytes.h"
#include "core/error.h"

namespace ckpt {

struct ZipEntry {
  std::string_view name;  // points into the mapped file's central directory
  uint16_t method = 0;  // 0 stored, 8 deflated
  uint16_t flags = 0;
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t local_header_offset = 0;
  uint64_t central_offset = 0;  // where this entry's central record starts (for errors)
};

class ZipReader {
 public:
  // Parses the central directory of `file`. Throws InputError on anything malformed.
  ZipReader(ByteView file, const Limits& limits);

  // Every central directory record, in directory order, duplicates included.
  const std::vector<ZipEntry>& entries() const { return entries_; }
  // The record torch reads for `name` (miniz's lookup: case-blind, and for a repeated name the copy its
  // binary search lands on), or nullptr.
  const ZipEntry* find(std::string_view name) const;
  // Whether two records share a name (ASCII case aside): without repeats, find(e.name) is &e for every e.
  bool repeats() const { return repeats_; }
  // Offset in the file where the entry's bytes begin (reads and checks its local header: the local
  // name must equal the central one).
  uint64_t data_offset(const ZipEntry& e) const;
  // The entry's stored bytes as a view named after the entry (no copy). Stored entries only.
  ByteView stored(const ZipEntry& e) const;
  // The entry's content: a view for stored entries, an inflated copy (bounded by `max_bytes`) for
  // deflated ones; `storage` keeps the copy alive.
  ByteView content(const ZipEntry& e, std::string* storage, uint64_t max_bytes) const;
  const ByteView& file() const { return file_; }
  // Where the central directory lies in the file: offset and length.
  std::pair<uint64_t, uint64_t> directory() const { return {cd_offset_, cd_size_}; }

 private:
  ByteView file_;
  uint64_t cd_offset_ = 0, cd_size_ = 0;
  std::vector<ZipEntry> entries_;
  std::vector<uint64_t> slots_;  // no repeats: open-addressed hash table: index into entries_ | the hash's top 32 bits << 32
  std::vector<uint32_t> sorted_;  // repeats: indices into entries_, in miniz's heap-sorted order
  bool repeats_ = false;
};

// True when the bytes start like a zip local file header.
bool looks_like_zip(const ByteView& file);

// The end records: where the central directory lies and how many records it holds.
struct ZipEnd {
  uint64_t eocd = 0;  // the end record's offset in the view read
  uint64_t count = 0, cd_size = 0, cd_offset = 0;
};
// Reads the end records from `f`, the zip's bytes from offset `at` to its end (the whole zip: at 0; a
// remote file's last bytes, fetched before anything else). Throws InputError for what ZipReader refuses;
// nullopt when the zip64 end record lies before the view.
std::optional<ZipEnd> read_zip_end(const ByteView& f, uint64_t at);
// Reads the central-directory record at `c` (the i-th, the directory starting at `cd_offset`), zip64
// fields resolved; throws InputError as ZipReader does.
ZipEntry read_central_record(Cursor& c, uint64_t i, uint64_t cd_offset);

}  // namespace ckpt
