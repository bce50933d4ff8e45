// A tar reader that lists members as Python's tarfile does, because torch.load reads the tar checkpoints
// of torch <= 0.1.9 with tarfile.open(mode="r:") (torch/serialization.py, legacy_load).
//
//   [header 512 B][data, padded to a multiple of 512] ... [512 zero bytes] ...
//   header:  0 name[100]   100 mode[8]   108 uid[8]   116 gid[8]   124 size[12]   136 mtime[12]
//          148 chksum[8]   156 type[1]   157 linkname[100]   257 magic[6] "ustar\0" (GNU "ustar ")
//          263 version[2]  265 uname[32] 297 gname[32]       329 devmajor[8]  337 devminor[8]
//          345 prefix[155] (ustar: the name is prefix + "/" + name; v7 headers have no magic at all)
//   numbers: octal text ended by NUL or space (int(text, 8) after strip()), or base-256 big-endian
//            when the first byte is 0x80 (0xFF: negative)
//   chksum:  the sum of the header's bytes with the chksum field read as 8 spaces (unsigned, or signed
//            bytes, either is accepted)
//   type 'L' / 'K': GNU long name / link name; the data is the next header's name / link name
//   type 'x' / 'X': PAX records "<len> <key>=<value>\n" ('path' and 'size') for the next member;
//   type 'g': PAX records for every later member
//
// Like tarfile: the first header must be valid for the file to be a tar at all; a later header that is
// all zeros, short or invalid (bad checksum, bad number) ends the archive without an error, so members
// after it do not exist for torch either; data running past the end of the file, or a bad header right
// after a GNU / PAX record, is an error. Regular files ('0', '\0', '7') and types tarfile does not know
// have data; directories, links and devices do not (their size field is not skipped).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/bytes.h"
#include "core/error.h"

namespace ckpt {

struct TarMember {
  std::string name;  // as tarfile names it: GNU long name / PAX path / ustar prefix applied
  char type = '0';  // the typeflag byte of its own header
  uint64_t header = 0;  // offset of its first header block (a GNU / PAX record before it included)
  uint64_t data = 0;  // offset of its data in the file
  uint64_t size = 0;  // bytes of data
  // Data torch can extract as a file: regular members and types tarfile does not know (it extracts
  // those as files too). Directories, links, devices and fifos are not.
  bool is_file() const;
};

// True when the first 512 bytes are a tar header tarfile accepts (checksum and numbers valid, not all
// zeros): what makes torch.load read a file as a tar checkpoint.
bool looks_like_tar(const ByteView& file);

// Every member in file order, as tarfile lists them (duplicates kept). Throws InputError (file, offset)
// for what tarfile raises on: a first header that is not valid, data past the end, a bad header after a
// GNU / PAX record, more members than limits.zip_entries, a GNU long name or PAX block over
// limits.string_bytes.
std::vector<TarMember> tar_members(const ByteView& file, const Limits& limits = Limits{});

// The member tarfile's getmember(name) returns: the last one of that name; nullptr if none.
const TarMember* find_tar_member(const std::vector<TarMember>& members, std::string_view name);

// A member's data as a view named after the member (errors read "model.pt: storages+0x10: ...").
ByteView tar_member_data(const ByteView& file, const TarMember& m);

}  // namespace ckpt
