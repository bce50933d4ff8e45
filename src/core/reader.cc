// The format table (detection order) and the torch.save readers: zip, legacy stream, tar, bare pickle.
// safetensors, sharded and DCP have files of their own. Where torch.load accepts a file that torch.save
// never writes (bytes after a zip, repeated zip names, other encodings of the legacy magic number, the
// tar format of torch <= 0.1.9), these readers accept it too and read what torch reads
// (testdata/gen_permissive.py proves each case against torch 1.13 and 2.6).
#include "core/reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/dcp.h"
#include "core/pt2.h"
#include "core/safetensors.h"
#include "core/hf_config.h"
#include "core/lightning_details.h"
#include "core/sharded.h"
#include "core/tar.h"
#include "core/torch_pickle.h"
#include "core/torchscript.h"
#include "core/vfs.h"
#include "core/zip.h"

namespace ckpt {
namespace {

std::string trimmed(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\0')) s.remove_suffix(1);
  return std::string(s);
}

// ---------------------------------------------------------------------------------------------------
// torch.save zip (1.6+): <prefix>/data.pkl, <prefix>/data/<key>, <prefix>/version, [byteorder, ...]
// As torch's PyTorchStreamReader: the prefix is the first central record's folder, every record must sit
// under it (get_all_records, which torch.load calls, refuses the archive otherwise), a version record
// must exist, and names are looked up through ZipReader::find (miniz's lookup, so a repeated or
// differently cased name resolves to the record torch reads).
constexpr uint64_t kLetGoMargin = 256 << 10;  // what stays mapped behind the reading of data.pkl

void read_torch_zip(Checkpoint& ck, const Input& in, const Limits& lim) {
  const ByteView file = in.file->view();
  auto directory = std::make_shared<const ZipReader>(file, lim);
  const ZipReader& zip = *directory;
  ck.zip = directory;
  if (zip.entries().empty()) file.fail(0, "zip archive has no entries");
  if (Pt2Layout l; is_pt2_archive(zip, &l)) return read_pt2(ck, zip, l, lim);
  const std::string first(zip.entries().front().name);
  const auto slash = first.find('/');
  if (slash == std::string::npos)
    file.fail(zip.entries().front().central_offset,
              fmt::format("zip entry '{}' is not under a folder, so this is not a torch.save archive", first));
  ck.prefix = first.substr(0, slash);
  const std::string pre = ck.prefix + "/";
  auto has = [&](const char* rec) { return zip.find(pre + rec) != nullptr; };
  for (const ZipEntry& e : zip.entries()) {
    // strncmp on the name as miniz hands it over (up to a NUL): case and every byte count here
    const std::string_view name = e.name.substr(0, e.name.find('\0'));
    if (name.substr(0, pre.size()) != pre)
      file.fail(e.central_offset,
                fmt::format("zip entry '{}' is not under '{}' as the first entry is (torch.load refuses such archives)",
                            std::string(name), pre));
  }

  if (has("model.json"))
    throw UnsupportedError(ck.path,
                           "TorchScript archive from torch <= 1.2 (model.json): not supported; re-save it with a newer torch");
  if (has(".data/extern_modules") || has(".data/python_version"))
    throw UnsupportedError(ck.path, "torch.package archive: not read, because it carries Python code to run");
  const ZipEntry* pkl_entry = zip.find(pre + "data.pkl");
  if (!pkl_entry) file.fail(0, fmt::format("zip archive has no {}data.pkl: not a torch.save or TorchScript file", pre));
  if (!has("version") && !has(".data/version"))
    file.fail(0, fmt::format("zip archive has no {}version record (torch.load refuses it)", pre));
  // torch.load's test: 'constants.pkl' in get_all_records(), names compared exactly
  const bool torchscript = std::any_of(zip.entries().begin(), zip.entries().end(),
                                       [&](const ZipEntry& e) { return e.name == pre + "constants.pkl"; });
  ck.container = Container::Zip;
  ck.format = torchscript ? Format::TorchScript : Format::TorchZip;

  for (const ZipEntry& e : zip.entries()) {
    std::string_view rel(e.name);
    if (rel.substr(0, pre.size()) != pre) continue;
    if (zip.repeats() && zip.find(e.name) != &e) continue;  // a repeated name: only the copy torch reads
    rel.remove_prefix(pre.size());
    if (rel == "data.pkl" || rel.substr(0, 5) == "data/" || rel.substr(0, 5) == "code/" || rel.substr(0, 10) == "constants/" ||
        rel.substr(0, 6) == "extra/" || rel.substr(0, 13) == "traced_inputs" || rel.find(".pkl") != std::string_view::npos ||
        e.uncompressed_size > 256 || e.method != 0)
      continue;
    ck.records.emplace_back(std::string(rel), trimmed(zip.stored(e).str(0, e.compressed_size)));
  }
  if (std::find_if(ck.records.begin(), ck.records.end(), [](auto& r) { return r.first == "byteorder"; }) == ck.records.end())
    ck.records.emplace_back("byteorder", "little");  // absent means little (torch < 2.1)

  if (torchscript) return read_torchscript(ck, zip, ck.prefix, lim);

  // torch's zip reader inflates a deflated record, so data.pkl may be one (tensor data may not: torch
  // maps or copies those bytes as they are stored).
  std::string inflated;
  ByteView pkl = zip.content(*pkl_entry, &inflated, lim.pickle_bytes);
  if (pkl.size() > lim.pickle_bytes)
    pkl.fail(0, fmt::format("data.pkl of {} bytes exceeds the limit of {}", pkl.size(), lim.pickle_bytes));
  ck.heap = std::make_shared<Heap>();
  if (pkl_entry->method != 0) {  // the values view the pickle's bytes: the heap keeps them
    const std::string_view kept = ck.heap->keep(std::move(inflated));
    pkl = ByteView(reinterpret_cast<const uint8_t*>(kept.data()), kept.size(), pkl.origin(), 0);
  }
  // data.pkl's pages leave this process's memory behind the machine as it reads, and again behind the
  // interpreter as it walks the state dict (the page cache keeps them: a value read again maps its page
  // back in): a state dict of a million entries never holds its whole pickle and its graph at once.
  const bool let_go = pkl_entry->method == 0 && in.file->mapped() && !in.file->remote();
  uint64_t let_go_to = 0;
  const std::function<void(uint64_t)> read_past = [&](uint64_t at) {
    const uint64_t to = std::min<uint64_t>(at > kLetGoMargin ? at - kLetGoMargin : 0, pkl.size());
    if (to <= let_go_to) return;
    in.file->release(pkl.data() + let_go_to, to - let_go_to);
    let_go_to = to;
  };
  Unpickled u = unpickle(pkl, 0, *ck.heap, lim, nullptr, false, nullptr, /*pack=*/true, let_go ? &read_past : nullptr);
  ck.heap->trim();  // the interpreter makes few values: the last block's unused pages (up to 4 MiB) go back
  ck.pickle_protocol = u.protocol;
  ck.globals = std::move(u.globals);
  ck.globals_from = u.framed ? nullptr : pkl.data();  // framed: the scan parses it as a file too
  ck.globals_main = ck.globals.size();

  {
    TorchInterpreter interp(ck, pkl, lim, zip_storage_locator(zip, pre + "data/", pkl));
    let_go_to = 0;
    if (let_go) {
      interp.set_read_past(&read_past);
      // The central directory's names are read from here on only to name a storage's member (errors,
      // `load`), which maps its page back in: a million-entry directory is 64 MB.
      const auto [cd_offset, cd_size] = zip.directory();
      in.file->release(file.data() + cd_offset, cd_size);
    }
    interp.interpret(u.root);
  }
  if (ck.format == Format::TorchZip && ck.content == Content::Lightning) ck.format = Format::Lightning;
  // Nothing reads the pickle's values from here on (Tensor::identity is only compared, never followed): the
  // heap goes, and data.pkl's pages leave this process's memory (the page cache keeps them; the security
  // scan reuses the globals recorded above, or maps them in again).
  ck.heap.reset();
  if (pkl_entry->method == 0 && in.file->mapped() && !in.file->remote()) in.file->release(pkl.data(), pkl.size());
}

// ---------------------------------------------------------------------------------------------------
// Legacy stream (torch < 1.6, or _use_new_zipfile_serialization=False):
//   pickle(magic 0x1950a86a20f9469cfc6c) pickle(protocol 1001) pickle(sys_info) pickle(object)
//   pickle([storage keys]) then per key: int64 LE element count, raw bytes
// torch compares values (magic_number != MAGIC_NUMBER, protocol_version != 1001), so any encoding of
// those numbers passes (is_legacy_magic); sys_info is read and ignored; the key list is iterated, so a
// tuple does as well as a list.
void read_legacy(Checkpoint& ck, const ByteView& file, const Limits& lim, Unpickled first) {
  ck.container = Container::Legacy;
  ck.format = Format::TorchLegacy;
  ck.heap = ck.heap ? ck.heap : std::make_shared<Heap>();
  Unpickled proto = unpickle(file, first.end, *ck.heap, lim);
  if (!is_legacy_protocol_version(proto.root, &file))
    file.fail(first.end, "legacy torch.save stream: protocol version is not 1001");
  ck.records.emplace_back("protocol_version", "1001");
  Unpickled sys = unpickle(file, proto.end, *ck.heap, lim);
  if (const Value* le = sys.root->get("little_endian"); le && le->kind == PKind::Bool)
    ck.records.emplace_back("byteorder", le->b ? "little" : "big");
  Unpickled obj = unpickle(file, sys.end, *ck.heap, lim);
  ck.pickle_protocol = obj.protocol;
  ck.globals = std::move(obj.globals);
  Unpickled keys = unpickle(file, obj.end, *ck.heap, lim);
  if (keys.root->kind != PKind::List && keys.root->kind != PKind::Tuple)
    file.fail(obj.end, "legacy torch.save stream: storage key list is not a list");

  // Storages are placed after the object pickle is read (below).
  TorchInterpreter interp(ck, file, lim, [](Storage&, const Value*) {});
  interp.interpret(obj.root);

  // Walk the raw storage records (8-byte count + bytes each) to place every storage and prove the
  // file is whole; the bytes themselves are not read.
  std::unordered_map<std::string, size_t> by_key;
  for (size_t k = 0; k < ck.storages.size(); ++k) by_key.emplace(ck.storages[k].key, k);
  uint64_t pos = keys.end;
  for (const Value* kv : keys.root->kids()) {
    std::string key = kv->is_str() ? std::string(kv->str()) : kv->is_int() ? std::to_string(kv->i) : "";
    auto it = by_key.find(key);
    if (it == by_key.end()) file.fail(pos, fmt::format("storage key '{}' is not used by any tensor", key));
    Storage& s = ck.storages[it->second];
    const int64_t count = file.le<int64_t>(pos);
    uint64_t nbytes;
    if (count < 0 || mul_overflows(static_cast<uint64_t>(count), s.dtype->itemsize, &nbytes))
      file.fail(pos, fmt::format("storage '{}' has a bad element count {}", key, count));
    if (static_cast<uint64_t>(count) != s.numel)
      file.fail(pos, fmt::format("storage '{}' holds {} elements but the pickle says {}", key, count, s.numel));
    file.sub(pos + 8, nbytes, "storage data");
    s.file_offset = pos + 8;
    s.present = true;
    pos += 8 + nbytes;
  }
  for (const Storage& s : ck.storages)
    if (!s.present) file.fail(pos, fmt::format("storage '{}' is missing from the stream", s.key));
}

// A bare pickle: Lightning / other objects saved with pickle.dump, or torch.save's stream.
void read_pickle(Checkpoint& ck, const Input& in, const Limits& lim) {
  const ByteView file = in.file->view();
  ck.heap = std::make_shared<Heap>();
  Unpickled u = unpickle(file, 0, *ck.heap, lim);
  switch (classify_legacy_magic(file, u, *ck.heap, lim)) {
    case LegacyMagic::Magic: return read_legacy(ck, file, lim, std::move(u));
    case LegacyMagic::Computed:
      file.fail(u.root->offset,
                fmt::format("legacy torch.save stream whose magic number is computed by a call to {}: ckpt does not run "
                            "pickled code, so it cannot know the number (torch would run the call)",
                            u.root->qualified().empty() ? std::string("an object") : u.root->qualified()));
    case LegacyMagic::WrongNumber:
      file.fail(u.root->offset,
                fmt::format("legacy torch.save stream: magic number {} is not 0x1950a86a20f9469cfc6c",
                            int_value_text(u.root, &file)
                                .value_or(u.root->kind == PKind::Float ? std::string("(a float)")
                                                                       : "'" + std::string(u.root->str().substr(0, 40)) +
                                                                             "' (text Python does not read as an int)")));
    case LegacyMagic::None: break;
  }
  ck.container = Container::Pickle;
  ck.format = Format::Pickle;
  ck.heap->trim();  // the interpreter makes few values: the last block's unused pages (up to 4 MiB) go back
  ck.pickle_protocol = u.protocol;
  ck.globals = std::move(u.globals);
  TorchInterpreter interp(ck, file, lim, [](Storage&, const Value*) {});  // a bare pickle holds no storage bytes
  interp.interpret(u.root);
  if (ck.content == Content::Lightning) ck.format = Format::Lightning;
}

bool looks_like_pickle(const ByteView& f) {
  if (f.size() < 2) return false;
  const uint8_t b = f.u8(0);
  if (b == 0x80) return f.u8(1) <= 5;
  // Protocol 0/1 pickles open with a container or value opcode; LONG1 / LONG4 and LONG text too, since
  // torch.load unpickles any such file looking for the legacy magic number (a text file that merely
  // starts with 'L' is not taken for one).
  const uint8_t c = f.u8(1);
  if (b == 'L') return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == ' ';
  return b == '(' || b == '}' || b == ']' || b == ')' || b == 'c' || b == 'N' || b == 'I' || b == 'V' || b == 'S' || b == 0x8a ||
         b == 0x8b;
}

}  // namespace

// Outside the anonymous namespace: the security scan asks too (reader.h).
static bool ident_line(std::string_view l) {
  if (l.empty()) return false;
  for (const char c : l)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

static std::string_view line_at(const ByteView& f, uint64_t at) {
  const std::string_view rest = f.str(at, std::min<uint64_t>(f.size() - at, 4096));
  const size_t nl = rest.find('\n');
  return nl == std::string_view::npos ? std::string_view() : rest.substr(0, nl);
}

InputError not_a_checkpoint_text(const std::string& path, const ByteView& f) {
  std::string_view head = f.str(0, std::min<uint64_t>(f.size(), 40));
  head = head.substr(0, head.find('\n'));
  return InputError(path, fmt::format("is text, not a PyTorch checkpoint (it begins '{}')", head));
}

bool looks_like_text(const ByteView& f) {
  if (f.empty()) return false;
  const uint64_t n = std::min<uint64_t>(f.size(), 512);
  for (uint64_t k = 0; k < n; ++k) {
    const uint8_t b = f.u8(k);
    if ((b < 0x20 && b != '\t' && b != '\n' && b != '\r' && b != '\f') || b == 0x7f || (k == 0 && b >= 0x80)) return false;
  }
  // Printable: text unless its first opcode can start a pickle that Python would go on reading.
  switch (f.u8(0)) {
    case '(': case ')': case ']': case '}': case 'N': case 'J': case 'K': case 'M': case 'G': case 'U': case 'C':
    case 'V': case 'P':
      return false;
    case 'I': case 'L': {
      std::string_view l = line_at(f, 1);
      if (!l.empty() && l.back() == 'L') l.remove_suffix(1);
      return l.empty() || l.find_first_not_of(" \t+-_0123456789abcdefoxABCDEFOX") != std::string_view::npos;
    }
    case 'F': return line_at(f, 1).find_first_not_of(" \t+-.0123456789eEinfatyINFATY") != std::string_view::npos;
    case 'S': {
      const std::string_view l = line_at(f, 1);
      return l.size() < 2 || (l.front() != '\'' && l.front() != '"');
    }
    case 'c': {  // GLOBAL: a module and a name Python could import
      const std::string_view m = line_at(f, 1);
      return !ident_line(m) || !ident_line(line_at(f, 1 + m.size() + 1));
    }
    case 'T': case 'X': case 'B':  // a 4-byte length past the end: Python stops there
      return f.size() < 5 || f.le<uint32_t>(1) > f.size() - 5;
    default: return true;  // no opcode, or one that cannot come first (INST without a MARK, SETITEM, ...)
  }
}

namespace {

// The names a user or framework loads with torch.load / pickle.load (a Trainer's optimizer.pt,
// scheduler.pt, rng_state*.pth, training_args.bin; a second copy of the weights).
bool pickle_name(std::string_view name) {
  std::string n(name);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::string_view ext : {".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".pt2", ".ptl"})
    if (n.size() > ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0) return true;
  return false;
}

// What a folder's file is to torch.load, in the format table's order (zip, tar, safetensors, text,
// pickle); nullopt: no side file. Protocols 0 and 1 carry no signature, so a file that no name marks is
// taken for one only when Python would unpickle it to its STOP.
std::optional<SideKind> side_kind(const ByteView& v, bool named, const Limits& lim) {
  if (looks_like_zip(v)) return SideKind::Zip;
  if (named && looks_like_tar(v)) return SideKind::Tar;
  if (looks_like_safetensors(v) || looks_like_text(v) || !looks_like_pickle(v))
    return named ? std::optional<SideKind>(SideKind::Other) : std::nullopt;
  if (named || (v.u8(0) == 0x80 && v.u8(1) >= 2)) return SideKind::Pickle;
  try {
    Heap heap;
    unpickle(v, 0, heap, lim);
    return SideKind::Pickle;
  } catch (const InputError&) { return std::nullopt; }
}

// The names of the folder's files that `ck`'s reader read as the model.
std::set<std::string> model_files(const Checkpoint* ck) {
  std::set<std::string> out;
  if (!ck) return out;
  for (const ScanFile& f : ck->scan_files) out.insert(vfs::filename(f.path));
  if (ck->format == Format::Sharded) out.insert(vfs::filename(ck->path));
  for (const std::string& f : ck->dcp.data_files) out.insert(f);
  return out;
}

}  // namespace

bool is_model_folder(const std::string& dir) {
  return is_dcp_dir(dir) || !find_index(dir).empty() || !hf_single_weights(dir).empty();
}

Operand classify(const std::string& path) {
  switch (vfs::kind(path)) {
    case vfs::Kind::Missing: return Operand::Missing;
    case vfs::Kind::Dir: return is_model_folder(path) ? Operand::Model : Operand::Folder;
    case vfs::Kind::File:
    case vfs::Kind::Unknown: break;
  }
  return Operand::File;
}

FolderFiles folder_side_files(const std::string& dir, const Checkpoint* ck, const Limits& limits) {
  FolderFiles out;
  out.folder = true;
  const bool remote = vfs::is_url(dir);
  const std::set<std::string> skip = model_files(ck);
  uint64_t seen = 0;
  for (const vfs::Entry& e : vfs::list(dir)) {
    if (e.dir || e.size == 0 || skip.count(e.name)) continue;  // size 0: empty, or no regular file
    const bool named = pickle_name(e.name);
    if (remote && !named) continue;  // a remote file is looked at only when its name says pickle
    if (++seen > kMaxFolderFiles) {
      ++out.left_out;
      continue;
    }
    SideFile f{vfs::join(dir, e.name), e.name, e.size, SideKind::Other, nullptr, ""};
    try {
      f.file = vfs::open(f.path);
      const std::optional<SideKind> kind = side_kind(f.file->view(), named, limits);
      if (!kind) continue;
      f.kind = *kind;
      f.size = f.file->size();
    } catch (const InputError& x) {
      if (!named) continue;
      f.error = x.render();
    }
    if (f.kind == SideKind::Other) f.file.reset();
    out.files.push_back(std::move(f));
  }
  return out;
}

namespace {

Checkpoint read_input(const Input& in, const Limits& limits);

// A directory that is not DCP: the sharded checkpoint whose index is in it, or a Hugging Face model
// folder's single weights file (model.safetensors, else pytorch_model.bin, beside config.json).
// What a format reader calls back for a part in another format (input.h): a sharded set's shard read
// whole, a DCP chunk's torch.save blob.
Checkpoint read_whole(const std::string& path, std::shared_ptr<MappedFile> file, const Limits& lim) {
  return read_weights(path, std::move(file), lim);
}
Checkpoint read_blob(std::shared_ptr<MappedFile> blob, const Limits& lim) { return read_checkpoint(std::move(blob), lim); }

void read_sharded_dir(Checkpoint& ck, const Input& in, const Limits& lim) {
  const std::string index = find_index(in.path);
  if (!index.empty()) return read_sharded(ck, Input{index, nullptr}, lim, read_whole);
  const std::string weights = hf_single_weights(in.path);
  if (weights.empty())
    throw InputError(in.path,
                     "is a directory with no *.index.json (sharded checkpoint) and no config.json with model.safetensors or "
                     "pytorch_model.bin (Hugging Face model folder) in it");
  ck = read_input(Input{weights, nullptr}, lim);
  ck.scan_files.push_back({weights, vfs::filename(weights)});
}

// Any other path: its bytes decide, through the rest of the table.
void read_file(Checkpoint& ck, const Input& in, const Limits& lim) { ck = read_input(Input{in.path, vfs::open(in.path)}, lim); }

[[noreturn]] void read_empty(Checkpoint&, const Input& in, const Limits&) { throw InputError(in.path, "file is empty"); }

[[noreturn]] void read_text(Checkpoint&, const Input& in, const Limits&) { throw not_a_checkpoint_text(in.path, in.file->view()); }

struct Reader {
  const char* name;
  bool (*sniff)(const Input&);
  void (*read)(Checkpoint&, const Input&, const Limits&);
};

// The detection order. Path entries first (an input that is only a path); a path that none of them
// takes is mapped, and a mapped file is told apart by its first bytes.
constexpr Reader kReaders[] = {
    {"sharded index", [](const Input& in) { return !in.file && is_index_path(in.path); },
     [](Checkpoint& ck, const Input& in, const Limits& lim) { read_sharded(ck, in, lim, read_whole); }},
    {"dcp", [](const Input& in) { return !in.file && is_dcp_dir(in.path); },
     [](Checkpoint& ck, const Input& in, const Limits& lim) { read_dcp(ck, in, lim, read_blob); }},
    {"sharded directory", [](const Input& in) { return !in.file && vfs::is_dir(in.path); }, read_sharded_dir},
    {"file", [](const Input& in) { return !in.file; }, read_file},
    {"empty", [](const Input& in) { return in.file->size() == 0; }, read_empty},
    {"torch.save zip", [](const Input& in) { return looks_like_zip(in.file->view()); }, read_torch_zip},
    // torch.load tries tarfile.open before unpickling: a valid first tar header (checksum) makes a tar.
    {"tar", [](const Input& in) { return looks_like_tar(in.file->view()); }, read_torch_tar},
    {"safetensors", [](const Input& in) { return looks_like_safetensors(in.file->view()); }, read_safetensors},
    // Text whose first byte starts no pickle Python would read on (a script, notes): not a checkpoint.
    {"text", [](const Input& in) { return looks_like_text(in.file->view()); }, read_text},
    // Legacy torch.save streams too: their first pickle is the magic number.
    {"pickle", [](const Input& in) { return looks_like_pickle(in.file->view()); }, read_pickle},
};

Checkpoint read_input(const Input& in, const Limits& limits) {
  for (const Reader& r : kReaders) {
    if (!r.sniff(in)) continue;
    Checkpoint ck;
    if (in.file) {
      ck.file = in.file;
      ck.path = in.path;
      ck.file_size = in.file->size();
    }
    r.read(ck, in, limits);
    if (!ck.training.scalars.empty()) read_training_scalars(ck, limits);
    return ck;
  }
  throw InputError(in.path, "", 0,
                   fmt::format("not a PyTorch checkpoint (first byte 0x{:02x} starts no known format)", in.file->view().u8(0)));
}

}  // namespace


namespace {

// The config.json of a Hugging Face model read as one: the folder's own, or the one beside an index, a
// safetensors file or a pytorch_model*.bin (a config beside other files is not theirs).
void attach_hf_config(Checkpoint& ck, const std::string& path, const Limits& limits) {
  if (path == "-") return;
  if (vfs::is_dir(path)) {
    ck.hf = read_hf_config(path, limits);
    return;
  }
  if (ck.format != Format::Sharded && ck.format != Format::Safetensors && vfs::filename(path).rfind("pytorch_model", 0) != 0)
    return;
  const std::string dir = vfs::parent(path);
  ck.hf = read_hf_config(dir.empty() ? "." : dir, limits);
}

}  // namespace

Checkpoint read_checkpoint(std::shared_ptr<MappedFile> file, const Limits& limits) {
  std::string path = file->path();
  Checkpoint ck = read_input(Input{path, std::move(file)}, limits);
  attach_hf_config(ck, path, limits);
  ck.path = vfs::display(ck.path);  // a signed URL's signature is never shown
  return ck;
}

Checkpoint read_checkpoint(const std::string& path, const Limits& limits) {
  Checkpoint ck = read_input(Input{path, nullptr}, limits);
  attach_hf_config(ck, path, limits);
  if (vfs::is_dir(path)) ck.side = folder_side_files(path, &ck, limits);
  ck.path = vfs::display(ck.path);
  return ck;
}

Checkpoint read_weights(const std::string& path, const Limits& limits) { return read_input(Input{path, nullptr}, limits); }

Checkpoint read_weights(const std::string& path, std::shared_ptr<MappedFile> file, const Limits& limits) {
  return read_input(Input{path, std::move(file)}, limits);
}

}  // namespace ckpt
