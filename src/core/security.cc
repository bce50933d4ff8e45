#include "core/security.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <unordered_set>

#include "core/allowlist.h"
#include "core/mapped_file.h"
#include "core/reader.h"
#include "core/safetensors.h"
#include "core/tar.h"
#include "core/zip.h"

namespace ckpt {

GlobalClass classify_global(std::string_view module, std::string_view name) {
  if (allowed_global(module, name)) return GlobalClass::Safe;
  if (name.find('.') != std::string_view::npos || deny_category(module, name)) return GlobalClass::Dangerous;
  return GlobalClass::Unknown;
}

namespace {

const AllowEntry* allowed_qualified(std::string_view q) {
  const size_t dot = q.rfind('.');
  return dot == std::string_view::npos ? nullptr : allowed_global(q.substr(0, dot), q.substr(dot + 1));
}

std::string use_text(const GlobalRef& g) {
  const std::string_view op = g.use_opcode ? g.use_opcode : "";
  const std::string at = fmt::format("{} at +0x{:x}", op, g.use_offset);
  if (g.use & kUseMutated) return fmt::format("changed in place by {}", at);
  if (op == "BUILD") return fmt::format("its __setstate__ run by {}", at);
  if (op == "NEWOBJ" || op == "NEWOBJ_EX" || op == "OBJ" || op == "INST") return fmt::format("instantiated by {}", at);
  return fmt::format("called by {}", at);
}

}  // namespace

GlobalVerdict judge_global(const GlobalRef& g) {
  GlobalVerdict v;
  const AllowEntry* allow = g.computed ? nullptr : allowed_global(g.module, g.name);
  v.category = g.computed ? "is computed at load time, so no scanner can say what it is" : deny_category(g.module, g.name);
  if (!v.category && g.name.find('.') != std::string::npos)
    v.category = "is a dotted name: Python resolves it attribute by attribute, reaching anything";
  if (g.use & kUseMutated) {
    v.cls = GlobalClass::Dangerous;
    v.how = use_text(g);
    return v;
  }
  // builtins.getattr used for nothing but allowed Enum member lookups (allowed_member_lookup).
  if (g.use == kUseMemberLookup && !g.computed && g.passed_to.empty()) {
    v.cls = GlobalClass::Safe;
    return v;
  }
  bool called = (g.use & (kUseCalled | kUseBuilt)) != 0;
  if (called) v.how = use_text(g);
  for (const auto& [callee, pos] : g.passed_to) {
    if (called) break;
    const AllowEntry* c = allowed_qualified(callee);
    if (c && pos < 8 && (c->calls_args >> pos) & 1) {
      called = true;
      v.how = fmt::format("called by {}, which calls its argument {}", callee, pos);
    }
  }
  if (allow) v.cls = GlobalClass::Safe;
  else if (called) v.cls = GlobalClass::Dangerous;
  else if (!g.computed && !g.file_parse && deny_category(g.module, g.name)) {
    // A checkpoint has no reason to carry os.system or builtins.eval: the loader gets the object itself.
    v.cls = GlobalClass::Dangerous;
    v.named_only = true;
    v.how = "handed to the loading code uncalled";
  } else v.cls = GlobalClass::Unknown;
  return v;
}


namespace {

class Scanner {
 public:
  Scanner(const Limits& lim, const Checkpoint* read, ScanScope scope, const MappedFile* file)
      : lim_(lim), read_(read), scope_(scope), file_(file) {}

  void file(const ByteView& v, const std::string& label, int depth) {
    if (depth > kMaxDepth) {
      scan_.problems.push_back(
          {ScanProblem::Kind::NotScanned, label, label, fmt::format("it is nested more than {} archives deep", kMaxDepth)});
      return;
    }
    if (looks_like_zip(v)) return zip(v, label, depth);
    if (looks_like_safetensors(v)) return;  // JSON and raw bytes: no pickle, nothing to import
    if (depth == 0 && looks_like_text(v)) throw not_a_checkpoint_text(v.origin() ? v.origin()->file : label, v);
    if (looks_like_tar(v) && tar(v, label, depth)) return;
    stream(v, label, depth);
  }

  PickleScan take() { return std::move(scan_); }

 private:
  // A bare pickle is one pickle; torch's legacy stream is five back to back (magic number, protocol
  // version, sys_info, the object, the storage keys), and torch reads on whenever the first one's value
  // may equal the magic number, however written (LONG1, LONG text, a computed int). Python reading a
  // file resumes after the last FRAME when that lies past STOP, so both places are scanned.
  void stream(const ByteView& v, const std::string& label, int depth) {
    struct Next {
      uint64_t at;
      int index;
    };
    std::vector<Next> todo{{0, 0}};
    std::unordered_set<uint64_t> seen;
    int budget = 16;
    while (!todo.empty() && budget > 0) {
      const Next n = todo.back();
      todo.pop_back();
      if (n.at >= v.size() || !seen.insert(n.at).second) continue;
      --budget;
      Unpickled u;
      if (!pickle(v, n.at, label, depth, &u)) continue;
      if (n.index == 0 && !may_be_magic(root_kind_)) continue;
      if (n.index + 1 >= 5) continue;
      todo.push_back({u.end, n.index + 1});
      if (u.frame_end > u.end) todo.push_back({u.frame_end, n.index + 1});
    }
  }

  // Whether a first pickle's value may compare equal to torch's legacy magic number.
  static bool may_be_magic(PKind k) { return k == PKind::Int || k == PKind::BigInt || k == PKind::Object; }

  // A tar checkpoint of torch <= 0.1.9: the pickles torch.load unpickles there, in its order. False when
  // no pickle could be found (torch then falls back to reading the file as a stream).
  bool tar(const ByteView& v, const std::string& label, int depth) {
    TarPickles t;
    try {
      t = torch_tar_pickles(v, lim_);
    } catch (const InputError&) { return false; }
    for (const TarPickle& p : t.pickles) pickle(p.data, p.start, prefixed(label, p.member), depth);
    if (!t.stopped.empty() && !t.pickles.empty())
      scan_.problems.push_back(
          {ScanProblem::Kind::Malformed, prefixed(label, t.pickles.back().member), t.pickles.back().member, t.stopped});
    return !t.pickles.empty();
  }

  void zip(const ByteView& v, const std::string& label, int depth) {
    // The reader's directory of the file itself: one pass over it.
    std::optional<ZipReader> own;
    const ZipReader& z = depth == 0 && read_ && read_->zip ? *read_->zip : own.emplace(v, lim_);
    // Inside an export archive every nested zip is looked into too: the scan stays on the safe side of
    // what a loader of the package might read.
    if (depth == 0 && is_export_archive(z)) export_ = true;
    const bool pt2 = export_;
    // The file's own local headers are read with copy_out: the 30 bytes before each tensor, read through
    // the mapping, would map in a folio of its data (up to 2 MiB each, MappedFile::copy_out).
    const HeaderReader headers(v, depth == 0 ? file_ : nullptr);
    for (const ZipEntry& e : z.entries()) {
      if (scope_ == ScanScope::Pickles && !pt2 && !ends_with(e.name, ".pkl")) continue;  // tensor data: untouched
      // Scanners that read local headers see another name than loaders that read the directory.
      const uint64_t h = e.local_header_offset;
      const uint16_t n = headers.le<uint16_t>(h + 26);
      const std::string where = prefixed(label, std::string(e.name));
      const std::string local = headers.str(h + 30, n);
      if (local != e.name) scan_.problems.push_back({ScanProblem::Kind::RenamedMember, where, std::string(e.name), local});
      std::string_view name = e.name;
      const bool pkl = ends_with(name, ".pkl");
      // Read where the local header says the data is, whatever name it carries: that is what torch loads.
      const uint64_t data = h + 30 + n + headers.le<uint16_t>(h + 28);
      if (pt2) native_code(name, where, v, data, e);
      if (!pkl && !pt2) continue;
      ByteView raw = v.sub(data, e.compressed_size, "zip member data");
      if (pkl && e.method == 0 && reused(raw, where)) continue;
      if (!pkl && !worth_a_look(name, raw, e)) continue;
      std::string storage;
      ByteView content = raw;
      if (e.method != 0) {
        ZipEntry copy = e;
        if (pkl) {
          content = z.content(copy, &storage, std::min(lim_.pickle_bytes, lim_.inflate_bytes));
        } else {
          // Members found by their name or kind are inflated within one budget for the whole file.
          const uint64_t cap = std::min(lim_.inflate_bytes, inflate_left_);
          try {
            content = z.content(copy, &storage, cap);
          } catch (const InputError& x) {
            scan_.problems.push_back({ScanProblem::Kind::NotScanned, where, where,
                                      fmt::format("it could not be inflated within the scan's budget: {}", x.what())});
            continue;
          }
          inflate_left_ -= std::min<uint64_t>(inflate_left_, storage.size());
        }
      }
      content = content.as_member(std::string(e.name));
      if (pkl) pickle(content, 0, where, depth);
      else member(name, content, where, depth);
    }
  }

  // torch.export.save / package_pt2 (an `archive_format` record), torch 2.6's torch.export.save
  // (`serialized_exported_program.json`), or an AOTInductor package. Only there are members other than
  // *.pkl loaded as pickles (torch.load of nested blobs, pickle.loads of constants); a torch.save zip's
  // data/ records are raw storages that may start with any byte.
  static bool is_export_archive(const ZipReader& z) {
    for (const ZipEntry& e : z.entries())
      if (e.name == "archive_format" || ends_with(e.name, "/archive_format") || e.name == "serialized_exported_program.json")
        return true;
    return false;
  }

  static bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
  }

  static std::string_view base_name(std::string_view name) {
    const size_t slash = name.rfind('/');
    return slash == std::string_view::npos ? name : name.substr(slash + 1);
  }

  // Members torch loads with torch.load or pickle.loads by their name: scanned whatever their bytes.
  static bool pickle_named(std::string_view name) {
    const std::string_view b = base_name(name);
    for (std::string_view ext : {".pt", ".pth", ".pickle", ".pkl"})
      if (ends_with(b, ext)) return true;
    return b.rfind("custom_obj_", 0) == 0 || b.rfind("opaque_obj_", 0) == 0;
  }

  // Whether a member of an export archive may hold a pickle: by name, or (weights stored with
  // use_pickle carry no extension) by a zip or protocol-2+ pickle signature. JSON, text records and
  // native code are not looked into.
  static bool worth_a_look(std::string_view name, const ByteView& raw, const ZipEntry& e) {
    if (pickle_named(name)) return true;
    if (e.method != 0) return !ends_with(name, ".json") && e.uncompressed_size > 0;  // unknown until inflated
    if (raw.size() < 2) return false;
    return looks_like_zip(raw) || (raw.u8(0) == 0x80 && raw.u8(1) >= 2 && raw.u8(1) <= 5);
  }

  // One member of an export archive: a nested torch.save zip or a pickle (a legacy torch.save stream,
  // as torch.load reads bytes that are no zip). A member found only by its signature whose bytes do
  // not parse as a pickle naming a global is raw tensor data: it leaves no trace in the scan.
  void member(std::string_view name, const ByteView& content, const std::string& where, int depth) {
    // The archive's own members cost bytes of the file each; members of nested archives are counted.
    if (depth > 0 && ++nested_ > kMaxNested) {
      if (nested_ == kMaxNested + 1)
        scan_.problems.push_back({ScanProblem::Kind::NotScanned, where, where,
                                  fmt::format("the file's members hold more than {} nested archives and pickles; "
                                              "neither this one nor the ones after it were scanned",
                                              kMaxNested)});
      return;
    }
    const bool named = pickle_named(name);
    const size_t pickles = scan_.pickles.size(), problems = scan_.problems.size();
    if (looks_like_zip(content)) {
      try {
        file(content, where, depth + 1);
      } catch (const InputError& e) {
        scan_.problems.resize(problems);
        scan_.problems.push_back(
            {ScanProblem::Kind::NotScanned, where, where, fmt::format("it is a nested zip that does not parse: {}", e.what())});
      }
      return;
    }
    if (!named && (content.size() < 2 || content.u8(0) != 0x80)) return;
    stream(content, where, depth + 1);
    if (named) return;
    const bool any = std::any_of(scan_.pickles.begin() + static_cast<std::ptrdiff_t>(pickles), scan_.pickles.end(),
                                 [](const ScannedPickle& p) { return !p.globals.empty(); });
    if (!any) {
      scan_.pickles.resize(pickles);
      scan_.problems.resize(problems);
    }
  }

  // Native code shipped in an export archive, by extension or an ELF / Mach-O / PE signature.
  void native_code(std::string_view name, const std::string& where, const ByteView& v, uint64_t data, const ZipEntry& e) {
    const std::string_view b = base_name(name);
    for (std::string_view ext : {".so", ".dll", ".dylib", ".o", ".a", ".cpp", ".cc", ".cxx", ".c", ".cu", ".cubin", ".fatbin",
                                 ".ptx", ".hsaco", ".spv"}) {
      if (ends_with(b, ext)) {
        scan_.native.push_back({where, std::string(ext)});
        return;
      }
    }
    if (e.method != 0 || e.compressed_size < 4 || data > v.size() || v.size() - data < 4) return;
    const std::string_view head = v.str(data, 4);
    if (head ==
        "\x7f"
        "ELF")
      scan_.native.push_back({where, "ELF"});
    else if (head == "\xcf\xfa\xed\xfe" || head == "\xce\xfa\xed\xfe") scan_.native.push_back({where, "Mach-O"});
    else if (head.substr(0, 2) == "MZ") scan_.native.push_back({where, "PE"});
  }

  // The reader already ran this stored pickle: take its globals, unless it nests a torch.save blob
  // (whose bytes only a second run sees).
  bool reused(const ByteView& raw, const std::string& member) {
    if (!read_ || raw.data() != read_->globals_from || read_->globals_main > read_->globals.size()) return false;
    const auto first = read_->globals.begin(), last = first + static_cast<std::ptrdiff_t>(read_->globals_main);
    if (std::any_of(first, last, [](const GlobalRef& g) { return g.module == "torch.storage" && g.name == "_load_from_bytes"; }))
      return false;
    scan_.pickles.push_back({member, std::vector<GlobalRef>(first, last)});
    return true;
  }

  static std::string prefixed(const std::string& label, const std::string& member) {
    return label.empty() ? member : label + ":" + member;
  }

  // Scans one pickle; false when it did not parse to its end (the globals before the error are kept).
  // A pickle with a FRAME (or one that does not parse from bytes) is parsed a second time as Python's C
  // unpickler reads a file object (`as_file`); where the two parses name other globals, the pickle was
  // made to show scanners one thing and torch.load another (diverged()).
  bool pickle(const ByteView& v, uint64_t start, const std::string& member, int depth, Unpickled* out = nullptr,
              bool as_file = false) {
    Heap heap;
    std::vector<GlobalRef> seen;
    Unpickled u;
    std::optional<FrameDrop> dropped;
    const auto mark_file_parse = [&] {
      if (as_file)
        for (GlobalRef& g : seen) g.file_parse = true;
    };
    try {
      u = unpickle(v, start, heap, lim_, &seen, as_file, &dropped);
      seen = std::move(u.globals);
      dropped = u.dropped;
      mark_file_parse();
    } catch (const InputError& e) {
      mark_file_parse();
      if (as_file) file_dropped_ = dropped;
      const size_t mine = scan_.pickles.size();
      scan_.pickles.push_back({member, std::move(seen)});
      // Bytes that do not parse may still parse as Python reads a file object (a lying FRAME).
      const size_t mark = scan_.problems.size();
      if (!as_file) {
        const size_t theirs = scan_.pickles.size();
        const bool parsed = pickle(v, start, member, depth, out, true);
        diverged(member, mine, theirs);
        if (parsed) {
          scan_.problems.resize(mark);
          return true;
        }
      }
      scan_.problems.resize(mark);
      scan_.problems.push_back(
          {ScanProblem::Kind::Malformed, fmt::format("{}+0x{:x}", member, e.offset()), member, e.what(), e.offset()});
      return false;
    }
    const size_t mine = scan_.pickles.size();
    scan_.pickles.push_back({member, std::move(seen)});
    nested(u, member, depth);
    if (as_file) file_dropped_ = dropped;  // after the nested blobs' own parses
    const PKind kind = u.root ? u.root->kind : PKind::None;
    uint64_t resume = u.frame_end;
    // With a FRAME, Python reading a file object may parse other opcodes than from bytes: scan that too.
    if (u.framed && !as_file) {
      Unpickled f;
      const size_t theirs = scan_.pickles.size();
      if (pickle(v, start, member, depth, &f, true)) resume = std::max(resume, f.frame_end);
      diverged(member, mine, theirs);
    }
    if (out) {
      out->root = nullptr;  // the heap dies here: only the offsets and the kind of the root travel
      out->end = u.end;
      out->frame_end = resume;
      root_kind_ = kind;
    }
    return true;
  }

  // The bytes parse (scan_.pickles[bytes]) against the file parse (scan_.pickles[file]) of one pickle:
  // the two read the same opcodes until a read crosses a FRAME's end with bytes of the frame left
  // (file_dropped_), so they can only differ from there. Where they name other globals, or the same
  // ones at other places or used otherwise, the verdict takes both: the file parse's globals are judged
  // as fully as the bytes parse's, and a pickle-parse-divergence finding says why.
  void diverged(const std::string& member, size_t bytes, size_t file) {
    if (file >= scan_.pickles.size() || !file_dropped_) return;
    std::vector<GlobalRef>& a = scan_.pickles[bytes].globals;
    std::vector<GlobalRef>& b = scan_.pickles[file].globals;
    const auto same = [](const GlobalRef& x, const GlobalRef& y) {
      return x.module == y.module && x.name == y.name && x.offset == y.offset && x.use == y.use &&
             x.use_offset == y.use_offset && x.computed == y.computed && x.passed_to == y.passed_to;
    };
    if (a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), same)) return;
    ParseDivergence d;
    d.member = member;
    d.frame_at = file_dropped_->frame;
    d.dropped_at = file_dropped_->read;
    const auto only = [&](const std::vector<GlobalRef>& xs, const std::vector<GlobalRef>& ys, std::vector<GlobalRef>& to) {
      for (const GlobalRef& x : xs)
        if (std::none_of(ys.begin(), ys.end(), [&](const GlobalRef& y) { return same(x, y); })) to.push_back(x);
    };
    for (GlobalRef& g : b) g.file_parse = false;
    only(a, b, d.bytes_only);
    only(b, a, d.file_only);
    scan_.divergences.push_back(std::move(d));
  }

  // torch.storage._load_from_bytes(b"...") holds a whole torch.save blob: scan it too.
  void nested(const Unpickled& u, const std::string& member, int depth) {
    for (const Value* v : u.nested_loads) {
      const Value* a = v->args();
      if (a && a->kind == PKind::Tuple && !a->kids().empty() && a->kids()[0]->kind == PKind::Bytes) {
        auto blob = MappedFile::from_memory(std::string(a->kids()[0]->str()), "");
        file(blob->view(), fmt::format("{}+0x{:x}", member, v->offset), depth + 1);
      }
    }
  }

  // A hostile archive nests zips in zips: depth and count are bounded, and what is left is reported.
  static constexpr int kMaxDepth = 4;
  static constexpr size_t kMaxNested = 256;

  const Limits& lim_;
  const Checkpoint* read_ = nullptr;
  ScanScope scope_ = ScanScope::Full;
  const MappedFile* file_ = nullptr;  // the file scanned (its view is depth 0's)
  size_t nested_ = 0;
  bool export_ = false;
  uint64_t inflate_left_ = 4 * lim_.inflate_bytes;
  PKind root_kind_ = PKind::None;
  std::optional<FrameDrop> file_dropped_;  // the last file parse's Unpickled::dropped
  PickleScan scan_;
};

}  // namespace

PickleScan scan_pickles(const MappedFile& file, const Limits& limits, const Checkpoint* read, ScanScope scope) {
  // A remote file is scanned for its pickles only: the check of every member's local header would cost
  // one range request per member of a file of any size.
  if (file.remote()) scope = ScanScope::Pickles;
  Scanner s(limits, read && read->file.get() == &file ? read : nullptr, scope, &file);
  s.file(file.view(), "", 0);
  return s.take();
}

}  // namespace ckpt
