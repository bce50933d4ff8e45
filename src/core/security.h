// The security scan: every pickle in a file (zip *.pkl members, each pickle of a legacy stream, a bare
// pickle, and torch.save blobs nested in them through torch.storage._load_from_bytes) is run through the
// inert VM, which records every global it names; nothing is executed. Here: the scan, which returns what
// it saw, and the classing of globals as known-safe, unknown or dangerous. The findings made of them
// (dangerous-global, unknown-global, pickle-parse-divergence, scan-incomplete) are findings.cc's.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/pickle.h"

namespace ckpt {

enum class GlobalClass { Safe, Unknown, Dangerous };

// By name alone: Safe when on the allowlist (allowlist.h), Dangerous when on a denylist category or a
// dotted name, Unknown otherwise. The verdict on a file is judge_global's, which also sees the use.
GlobalClass classify_global(std::string_view module, std::string_view name);

// The verdict on one global as the pickle used it: a global that is called or built with state
// (REDUCE, NEWOBJ, NEWOBJ_EX, OBJ, INST, BUILD, or passed to an allowed callable that calls that
// argument) and is not on the allowlist is Dangerous, whatever the opcode; one that is changed in
// place (BUILD, APPEND, SETITEM on the imported object) is Dangerous even when allowed; one only named
// is Unknown unless allowed.
struct GlobalVerdict {
  GlobalClass cls = GlobalClass::Unknown;
  std::string how;  // "called by REDUCE at +0x30", "" when only named
  const char* category = nullptr;  // deny_category's phrase, or why no scanner can name it
  // Dangerous though never called: a denylisted object (os.system, builtins.eval) handed to the code
  // that loads the file.
  bool named_only = false;
};
GlobalVerdict judge_global(const GlobalRef& g);

// One pickle's globals in the order named; a malformed pickle's up to where it broke.
struct ScannedPickle {
  std::string member;  // where the pickle is: "archive/data.pkl", "<blob's label>:archive/data.pkl", "" = the file
  std::vector<GlobalRef> globals;
};

// What kept the scan from reading a pickle the way a loader would.
struct ScanProblem {
  enum class Kind { RenamedMember, Malformed, NotScanned };
  Kind kind = Kind::Malformed;
  std::string where;  // Malformed: "<member>+0x1a3"; RenamedMember, NotScanned: the member's name, label-prefixed
  std::string member;  // Malformed: the pickle's member ("" = the file); RenamedMember: the central directory's name
  std::string detail;  // Malformed: the parser's message; RenamedMember: the local header's name; NotScanned: why
  std::optional<uint64_t> offset = std::nullopt;  // Malformed: where the parser stopped in the pickle, when it knows
};

// A member of a torch.export / AOTInductor archive that holds native code: loading the package
// (torch._inductor.aoti_load_package) dlopens or builds it.
struct NativeCode {
  std::string member;  // label-prefixed member name
  std::string kind;  // ".so", ".cpp", ".o", ".cubin", "ELF", ...
};

// A pickle that parses one way from bytes (pickle.loads, and most scanners) and another read from a file
// object (torch.load's io.BytesIO of data.pkl; pickle.load of a file that Python reads unbuffered
// there): a read crosses a FRAME's end with bytes of the frame left, which the C unpickler reading a
// file skips. No pickle writer splits an opcode across a FRAME's end.
struct ParseDivergence {
  std::string member;  // as ScannedPickle::member
  uint64_t frame_at = 0;  // the FRAME opcode whose bytes the file parse leaves unread
  uint64_t dropped_at = 0;  // the read that leaves them
  std::vector<GlobalRef> bytes_only;  // globals (with their use) only the bytes parse names
  std::vector<GlobalRef> file_only;  // only the file parse
};

struct PickleScan {
  std::vector<ScannedPickle> pickles;  // in the order scanned
  std::vector<ParseDivergence> divergences;  // pickles whose bytes and file parses name other globals
  std::vector<ScanProblem> problems;  // in the order met
  std::vector<NativeCode> native;  // in archive order
};

// Scans every pickle of `file`. In a torch.export archive (.pt2) that includes the pickles inside its
// members: nested torch.save zips (sample inputs, torch 2.6's serialized_*.pt, use_pickle weights) and
// bare pickles (pickled constants), to a bounded depth and count; members holding native code are
// listed in `native`. Throws InputError only when the container itself is broken. `read`, the
// checkpoint a reader made of the same mapping, lends the globals of the pickle it already ran.
// What a scan looks at. Full (check): every pickle, and every zip member's local header (a name that
// differs from the directory's is zip-name-mismatch), read with pread (MappedFile::copy_out) so that no
// page of tensor data is mapped in. Pickles (summary): the pickles only.
// A remote file (MappedFile::remote) is always scanned as Pickles.
enum class ScanScope : uint8_t { Full, Pickles };

// With `read`, the reader's checkpoint of this file: its zip directory and its data.pkl globals are
// taken, not parsed again.
PickleScan scan_pickles(const MappedFile& file, const Limits& limits, const Checkpoint* read = nullptr,
                        ScanScope scope = ScanScope::Full);

}  // namespace ckpt
