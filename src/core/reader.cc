// The format table (detection order) and the torch.save readers: zip, legacy stream, bare pickle.
// safetensors, sharded and DCP have files of their own.
#include "core/reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include "core/dcp.h"
#include "core/safetensors.h"
#include "core/sharded.h"
#include "core/torch_pickle.h"
#include "core/torchscript.h"
#include "core/zip.h"

namespace ckpt {
namespace {

std::string trimmed(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\0')) s.remove_suffix(1);
  return std::string(s);
}

// ---------------------------------------------------------------------------------------------------
// torch.save zip (1.6+): <prefix>/data.pkl, <prefix>/data/<key>, <prefix>/version, [byteorder, ...]
void read_torch_zip(Checkpoint& ck, const Input& in, const Limits& lim) {
  const ByteView file = in.file->view();
  ZipReader zip(file, lim);
  if (zip.entries().empty()) file.fail(0, "zip archive has no entries");
  const std::string first(zip.entries().front().name);
  const auto slash = first.find('/');
  if (slash == std::string::npos)
    file.fail(zip.entries().front().central_offset,
              fmt::format("zip entry '{}' is not under a folder, so this is not a torch.save archive", first));
  ck.prefix = first.substr(0, slash);
  const std::string pre = ck.prefix + "/";
  auto has = [&](const char* rec) { return zip.find(pre + rec) != nullptr; };

  if (has("model.json"))
    throw UnsupportedError(ck.path,
                           "TorchScript archive from torch <= 1.2 (model.json): not supported; re-save it with a newer torch");
  if (has(".data/extern_modules") || has(".data/python_version"))
    throw UnsupportedError(ck.path, "torch.package archive: not read, because it carries Python code to run");
  const ZipEntry* pkl_entry = zip.find(pre + "data.pkl");
  if (!pkl_entry) file.fail(0, fmt::format("zip archive has no {}data.pkl: not a torch.save or TorchScript file", pre));
  const bool torchscript = has("constants.pkl");
  ck.container = Container::Zip;
  ck.format = torchscript ? Format::TorchScript : Format::TorchZip;

  for (const ZipEntry& e : zip.entries()) {
    std::string_view rel(e.name);
    if (rel.substr(0, pre.size()) != pre) continue;
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

  ByteView pkl = zip.stored(*pkl_entry);
  if (pkl.size() > lim.pickle_bytes)
    pkl.fail(0, fmt::format("data.pkl of {} bytes exceeds the limit of {}", pkl.size(), lim.pickle_bytes));
  ck.heap = std::make_shared<Heap>();
  Unpickled u = unpickle(pkl, 0, *ck.heap, lim);
  ck.pickle_protocol = u.protocol;
  ck.globals = std::move(u.globals);
  ck.globals_from = u.framed ? nullptr : pkl.data();  // framed: the scan parses it as a file too
  ck.globals_main = ck.globals.size();

  TorchInterpreter interp(ck, pkl, lim, zip_storage_locator(zip, pre + "data/", pkl));
  interp.interpret(u.root);
  if (ck.format == Format::TorchZip && ck.content == Content::Lightning) ck.format = Format::Lightning;
}

// ---------------------------------------------------------------------------------------------------
// Legacy stream (torch < 1.6, or _use_new_zipfile_serialization=False):
//   pickle(magic 0x1950a86a20f9469cfc6c) pickle(protocol 1001) pickle(sys_info) pickle(object)
//   pickle([storage keys]) then per key: int64 LE element count, raw bytes
void read_legacy(Checkpoint& ck, const ByteView& file, const Limits& lim, Unpickled first) {
  ck.container = Container::Legacy;
  ck.format = Format::TorchLegacy;
  ck.heap = ck.heap ? ck.heap : std::make_shared<Heap>();
  Unpickled proto = unpickle(file, first.end, *ck.heap, lim);
  if (!proto.root->is_int() || proto.root->i != 1001)
    file.fail(first.end, "legacy torch.save stream: protocol version is not 1001");
  ck.records.emplace_back("protocol_version", "1001");
  Unpickled sys = unpickle(file, proto.end, *ck.heap, lim);
  if (const Value* le = sys.root->get("little_endian"); le && le->kind == PKind::Bool)
    ck.records.emplace_back("byteorder", le->b ? "little" : "big");
  Unpickled obj = unpickle(file, sys.end, *ck.heap, lim);
  ck.pickle_protocol = obj.protocol;
  ck.globals = std::move(obj.globals);
  Unpickled keys = unpickle(file, obj.end, *ck.heap, lim);
  if (keys.root->kind != PKind::List) file.fail(obj.end, "legacy torch.save stream: storage key list is not a list");

  // Storages are placed after the object pickle is read (below).
  TorchInterpreter interp(ck, file, lim, [](Storage&, const Value*) {});
  interp.interpret(obj.root);

  // Walk the raw storage records (8-byte count + bytes each) to place every storage and prove the
  // file is whole; the bytes themselves are not read.
  std::unordered_map<std::string, size_t> by_key;
  for (size_t k = 0; k < ck.storages.size(); ++k) by_key.emplace(ck.storages[k].key, k);
  uint64_t pos = keys.end;
  for (const Value* kv : keys.root->items) {
    std::string key = kv->is_str() ? std::string(kv->s) : kv->is_int() ? std::to_string(kv->i) : "";
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
  if (is_legacy_magic(u.root)) return read_legacy(ck, file, lim, std::move(u));
  ck.container = Container::Pickle;
  ck.format = Format::Pickle;
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
  // Protocol 0/1 pickles open with a container or value opcode.
  return b == '(' || b == '}' || b == ']' || b == ')' || b == 'c' || b == 'N' || b == 'I' || b == 'V' || b == 'S';
}

// A directory that is not DCP: the sharded checkpoint whose index is in it.
void read_sharded_dir(Checkpoint& ck, const Input& in, const Limits& lim) {
  const std::string index = find_index(in.path);
  if (index.empty()) throw InputError(in.path, "is a directory with no *.index.json (sharded checkpoint) in it");
  read_sharded(ck, Input{index, nullptr}, lim);
}

// Any other path: its bytes decide, through the rest of the table.
void read_file(Checkpoint& ck, const Input& in, const Limits& lim) { ck = read_checkpoint(MappedFile::open(in.path), lim); }

[[noreturn]] void read_empty(Checkpoint&, const Input& in, const Limits&) { throw InputError(in.path, "file is empty"); }

[[noreturn]] void read_tar(Checkpoint&, const Input& in, const Limits&) {
  throw UnsupportedError(in.path, "tar checkpoint from torch <= 0.1.9: not supported; re-save it with torch.save");
}

struct Reader {
  const char* name;
  bool (*sniff)(const Input&);
  void (*read)(Checkpoint&, const Input&, const Limits&);
};

// The detection order. Path entries first (an input that is only a path); a path that none of them
// takes is mapped, and a mapped file is told apart by its first bytes.
constexpr Reader kReaders[] = {
    {"sharded index", [](const Input& in) { return !in.file && is_index_path(in.path); }, read_sharded},
    {"dcp", [](const Input& in) { return !in.file && is_dcp_dir(in.path); }, read_dcp},
    {"sharded directory",
     [](const Input& in) {
       std::error_code ec;
       return !in.file && std::filesystem::is_directory(in.path, ec);
     },
     read_sharded_dir},
    {"file", [](const Input& in) { return !in.file; }, read_file},
    {"empty", [](const Input& in) { return in.file->size() == 0; }, read_empty},
    {"torch.save zip", [](const Input& in) { return looks_like_zip(in.file->view()); }, read_torch_zip},
    {"tar", [](const Input& in) { return in.file->size() > 262 && in.file->view().str(257, 5) == "ustar"; }, read_tar},
    {"safetensors", [](const Input& in) { return looks_like_safetensors(in.file->view()); }, read_safetensors},
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
    return ck;
  }
  throw InputError(in.path, "", 0,
                   fmt::format("not a PyTorch checkpoint (first byte 0x{:02x} starts no known format)", in.file->view().u8(0)));
}

}  // namespace

Checkpoint read_checkpoint(std::shared_ptr<MappedFile> file, const Limits& limits) {
  std::string path = file->path();
  return read_input(Input{std::move(path), std::move(file)}, limits);
}

Checkpoint read_checkpoint(const std::string& path, const Limits& limits) { return read_input(Input{path, nullptr}, limits); }

}  // namespace ckpt
