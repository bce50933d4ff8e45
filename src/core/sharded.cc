#include "core/sharded.h"

#include "core/fast_json.h"

#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>
#include <span>
#include <system_error>
#include <thread>

#include "core/keys.h"
#include "core/safetensors.h"
#include "core/tar.h"
#include "core/zip.h"
#include "core/threads.h"
#include "core/vfs.h"

namespace ckpt {

bool is_index_path(const std::string& path) { return path.size() > 11 && path.compare(path.size() - 11, 11, ".index.json") == 0; }

std::string find_index(const std::string& dir) {
  std::vector<std::string> found;  // names, sorted
  try {
    for (const vfs::Entry& e : vfs::list(dir))
      if (!e.dir && is_index_path(e.name)) found.push_back(e.name);
  } catch (const InputError&) {
    return "";  // not a directory that can be listed: no index in it
  }
  // Prefer safetensors when a directory carries both (as transformers does).
  for (const auto& f : found)
    if (f.find("safetensors") != std::string::npos) return vfs::join(dir, f);
  return found.empty() ? std::string() : vfs::join(dir, found.front());
}

namespace {

// A weight_map value must name a file beside the index.
bool beside(const std::string& shard) {
  return !shard.empty() && shard.find('/') == std::string::npos && shard.find('\\') == std::string::npos && shard != "." &&
         shard != "..";
}

void not_beside(const ByteView& v, const std::string& tensor, const std::string& shard) {
  v.fail(0, fmt::format("weight_map entry '{}' names '{}', which is not a file beside the index", tensor, shard));
}

// The index through nlohmann, naming every problem: the weight_map in name order (a sorted map keeps
// the last of a repeated name, as the fast path never sees), metadata as compact text.
FastIndex read_index(const ByteView& v, std::string_view text) {
  // A sorted map: ordered_json inserts each key with a linear search, quadratic in a weight_map of 100,000
  // tensors (the index's metadata keys come out sorted).
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) { v.fail(e.byte > 0 ? e.byte - 1 : 0, "index is not valid JSON"); }
  // A number too large for a double (1e999) throws out_of_range, not parse_error (fuzz_json).
  catch (const nlohmann::json::out_of_range&) { v.fail(0, "index is not valid JSON: a number out of range"); }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) v.fail(0, "index has no weight_map object");
  FastIndex out;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it->is_string()) v.fail(0, fmt::format("weight_map entry '{}' is not a file name", it.key()));
    const std::string& shard = it->get_ref<const std::string&>();
    if (!beside(shard)) not_beside(v, it.key(), shard);
    out.add(it.key(), shard);
  }
  if (j.contains("metadata")) out.metadata = j["metadata"].dump();
  return out;
}

// Its text is read: the pages go (a million tensors' index is ~70 MB). A later read maps them back.
void let_go(const MappedFile& f, const ByteView& b, uint64_t off, uint64_t len) {
  if (f.mapped() && !f.remote()) f.release(b.address() + off, len);
}

std::string prefixed(const std::string& shard, std::string_view key) {
  std::string out;
  out.reserve(shard.size() + 1 + key.size());
  return out.append(shard).append(1, ':').append(key);
}

// One reading of a sharded set: the index, where each shard's records go, and what each shard's reading
// left, shared by the threads that read the shards (each writes only its shards' parts and entries).
struct ShardedRead {
  struct Part {
    std::shared_ptr<MappedFile> file;  // a safetensors shard read straight into its place
    std::optional<Checkpoint> other;  // any other shard (or one the fast reading refused), read whole
    uint64_t bytes = 0;  // its tensors' bytes
    size_t tensors = 0;
  };

  Checkpoint& ck;
  const Limits& limits;
  const ReadWhole read_whole;
  const std::string& index_path;
  const std::shared_ptr<MappedFile> file;  // the index
  const ByteView v;  // the index's bytes: the index's errors are told through it (fail)
  std::optional<FastIndex> index;  // tensor -> shard
  std::vector<std::string> shards;  // sorted by file name
  std::vector<uint32_t> sorted_of;  // a file's place in `shards`
  size_t n = 0;  // the weight_map's tensors
  std::vector<size_t> first;  // shard i's records: [first[i], first[i + 1])
  std::atomic<bool> sized{false};  // the records are sized (or could not be)
  std::string dir;
  std::vector<uint8_t> held;  // one writer per entry: the thread reading its shard
  std::vector<Part> parts;
  std::vector<std::exception_ptr> failed;

  ShardedRead(Checkpoint& ck, const std::string& index_path, const Limits& limits, ReadWhole read_whole)
      : ck(ck), limits(limits), read_whole(read_whole), index_path(index_path), file(vfs::open(index_path)), v(file->view()) {}

  // The weight_map, and the checkpoint's own facts; the shards in name order.
  void read_index_file() {
    if (v.size() > limits.string_bytes)
      v.fail(0, fmt::format("index of {} bytes exceeds the limit of {}", v.size(), limits.string_bytes));
    const std::string_view text = v.str(0, v.size());
    ck.file = file;
    ck.path = index_path;
    ck.format = Format::Sharded;
    ck.container = Container::Shards;
    ck.content = Content::StateDict;
    ck.file_size = file->size();
    // tensor -> shard: simdjson's reading where the index has the ordinary shape, else nlohmann's, which
    // names what is wrong (fast_json.h).
    index = fast_index(text, file->readable_from(v.data()));
    // A shard that is no file beside the index is named as the full path meets it first (in name order).
    if (!index || !std::all_of(index->files.begin(), index->files.end(), beside)) index = read_index(v, text);
    const std::vector<std::string>& files = index->files;
    shards = files;
    std::sort(shards.begin(), shards.end());
    sorted_of.resize(files.size());
    for (size_t f = 0; f < files.size(); ++f)
      sorted_of[f] = static_cast<uint32_t>(std::lower_bound(shards.begin(), shards.end(), files[f]) - shards.begin());
    if (index->metadata)
      ck.sharded.index_metadata = nlohmann::ordered_json::parse(nlohmann::json::parse(*index->metadata).dump());
    let_go(*file, v, 0, v.size());
  }

  // The records go straight to their place: shard i's tensors (and, for safetensors, its storages, one per
  // tensor) fill [first[i], first[i + 1]) of ck.tensors (ck.storages), as many as the weight_map gives it.
  void plan_places() {
    n = index->names.size();
    first.assign(shards.size() + 1, 0);
    for (const uint32_t f : index->file_of) ++first[sorted_of[f] + 1];
    for (size_t i = 0; i < shards.size(); ++i) first[i + 1] += first[i];
    dir = vfs::parent(index_path);
    held.assign(n, 0);
    parts.resize(shards.size());
    failed.resize(shards.size());
  }

  // Sized by the first worker while the others parse their first headers (value-initializing 100,000
  // records is ~15 ms of fresh pages); a worker waits for it before it writes a record.
  void size_records() {
    struct Told {  // sized or not (bad_alloc), the waiting workers are told
      std::atomic<bool>& sized;
      ~Told() {
        sized = true;
        sized.notify_all();
      }
    } told{sized};
    ck.tensors.reserve(n);
    ck.storages.reserve(n);
    prefault(ck.tensors.data(), n * sizeof(Tensor));
    prefault(ck.storages.data(), n * sizeof(Storage));
    ck.tensors.resize(n);
    ck.storages.resize(n);
  }
  void wait_sized() {
    sized.wait(false);
    if (ck.tensors.size() != n) throw std::bad_alloc();  // the first worker could not size them
  }

  // The entry of `name` in the weight_map, which must put it in shard i.
  uint32_t entry_of(size_t i, const std::string& p, std::string_view name) const {
    const uint32_t at = index->find(name);
    if (at == FastIndex::kNone) throw InputError(p, fmt::format("tensor '{}' is not in the weight_map of {}", name, index_path));
    if (sorted_of[index->file_of[at]] != i)
      throw InputError(p, fmt::format("tensor '{}' is in shard '{}' but the weight_map puts it in '{}'", name, shards[i],
                                      index->files[index->file_of[at]]));
    return at;
  }

  // A safetensors shard whose header has the ordinary shape and whose every tensor the weight_map puts
  // here, once: read into its place. False leaves the shard to the whole reading (which names a problem).
  // `parser`: the worker's, kept from one shard to the next.
  bool read_in_place(size_t i, const std::shared_ptr<MappedFile>& f, std::shared_ptr<void>* parser) {
    const ByteView fv = f->view();
    if (f->size() == 0 || looks_like_zip(fv) || looks_like_tar(fv) || !looks_like_safetensors(fv)) return false;
    std::optional<SafetensorsHeader> h = read_safetensors_header_fast(fv, limits, /*check_repeats=*/false, f.get(), parser);
    if (!h) return false;
    // The header's pages go: the parse copied what the records need (the whole reading maps them back in).
    let_go(*f, fv, 8, h->data_start - 8);
    if (!hold_entries(i, *h)) return false;
    wait_sized();
    place_records(i, f, *h);
    return true;
  }

  // Marks the weight_map entry of each of the header's tensors as held, when the weight_map puts every
  // one here, once; else leaves none marked.
  bool hold_entries(size_t i, const SafetensorsHeader& h) {
    std::vector<uint32_t> entry(h.entries.size());  // each tensor's in the weight_map
    for (size_t k = 0; k < h.entries.size(); ++k) {
      // A shard usually holds a run of the (sorted) weight_map: the next tensor is the next entry.
      const uint32_t at = entry[k] = index->find(h.entries[k].name, k ? entry[k - 1] + 1 : FastIndex::kNone);
      // Not here, or repeated in the header: unmark, and let the whole reading say what is wrong.
      if (at == FastIndex::kNone || sorted_of[index->file_of[at]] != i || held[at]) {
        for (size_t u = 0; u < k; ++u) held[entry[u]] = 0;
        return false;
      }
      held[at] = 1;
    }
    return true;
  }

  // Shard i's records written in their place, and what each tensor is, as reading the shard alone says.
  void place_records(size_t i, const std::shared_ptr<MappedFile>& f, SafetensorsHeader& h) {
    Part& part = parts[i];
    part.file = f;
    part.tensors = h.entries.size();
    const size_t at = first[i];
    for (size_t k = 0; k < h.entries.size() && at + k < first[i + 1]; ++k) {
      SafetensorsEntry& e = h.entries[k];
      part.bytes += e.end - e.begin;
      Tensor& t = ck.tensors[at + k];
      Storage& s = ck.storages[at + k];
      safetensors_records(e, h.data_start, prefixed(shards[i], e.name), t, s);
      t.shard = static_cast<uint32_t>(i + 1);  // its place in ck.sharded.shards, pushed in this order below
      s.source = f.get();  // kept alive through keep_alive
    }
    // What each tensor is, as reading the shard alone says (read_safetensors).
    const std::span<Tensor> mine(ck.tensors.data() + at, std::min(h.entries.size(), first[i + 1] - at));
    infer_kinds(mine);
    if (plain_tensor_names(mine))
      for (Tensor& t : mine) t.kind = TensorKind::Attribute;
  }

  // Shard i read into its place, or whole; its failure kept for its turn.
  void read_part(size_t i, std::shared_ptr<void>* parser) {
    try {
      const std::string& shard = shards[i];
      const std::string p = vfs::join(dir, shard);
      // A URL that cannot be listed (https://) is not looked for: reading it says whether it is there.
      const vfs::Kind k = vfs::kind(p);
      if (k != vfs::Kind::File && k != vfs::Kind::Unknown)
        v.fail(0, fmt::format("weight_map names shard '{}', which is missing", shard));
      std::shared_ptr<MappedFile> f = vfs::open(p);
      if (read_in_place(i, f, parser)) return;
      Checkpoint& part = parts[i].other.emplace(read_whole(p, f, limits));
      for (Tensor& t : part.tensors) {
        held[entry_of(i, p, t.name)] = 1;
        t.storage = prefixed(shard, t.storage);
        t.shard = static_cast<uint32_t>(i + 1);
      }
      for (Storage& s : part.storages) {
        s.key = prefixed(shard, s.key);
        if (!s.source) s.source = part.file.get();  // kept alive through keep_alive
      }
    } catch (...) {
      parts[i] = Part{};
      failed[i] = std::current_exception();
    }
  }

  // Every shard read on `threads` threads, the first of them sizing the records first.
  void read_on_threads(unsigned threads, Standby* standby) {
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    run_threads(
        threads, stop,
        [&](unsigned j) {
          if (j == 0) size_records();
          std::shared_ptr<void> parser;
          for (size_t i = next++; i < shards.size(); i = next++) read_part(i, &parser);
        },
        standby);
  }

  // Shard i, read: a shard read whole moves its tensors into their place; each is counted and kept alive.
  // True when it was read whole.
  bool add_part(size_t i) {
    const std::string& shard = shards[i];
    Part& part = parts[i];
    if (part.other) {
      Checkpoint& c = *part.other;
      part.file = c.file;
      part.tensors = c.tensors.size();
      for (size_t k = 0; k < c.tensors.size() && first[i] + k < first[i + 1]; ++k) {
        part.bytes += c.tensors[k].bytes;
        ck.tensors[first[i] + k] = std::move(c.tensors[k]);
      }
      for (const FrozenConstants& fc : c.frozen) ck.frozen.push_back(fc);
      for (GlobalRef& g : c.globals) ck.globals.push_back(std::move(g));
      if (c.heap) ck.keep_alive.push_back(c.heap);
      for (auto& k : c.keep_alive) ck.keep_alive.push_back(std::move(k));
    }
    ck.file_size += part.file->size();
    ck.scan_files.push_back({vfs::join(dir, shard), shard});
    ck.sharded.shards.push_back(
        ShardInfo{shard, part.other ? part.other->format : Format::Safetensors, part.tensors, part.bytes});
    ck.keep_alive.push_back(part.file);
    return part.other.has_value();
  }

  // The first one missing in name order, as a sorted map of the weight_map would meet it.
  void check_held() const {
    size_t missing = n;
    for (size_t k = 0; k < n; ++k)
      if (!held[k] && (missing == n || index->names[k] < index->names[missing])) missing = k;
    if (missing < n)
      v.fail(0, fmt::format("weight_map puts tensor '{}' in shard '{}', which does not hold it", index->names[missing],
                            index->files[index->file_of[missing]]));
  }

  // Storages in shard order: a shard read whole brings its own (not one per tensor).
  void splice_storages() {
    std::vector<Storage> storages;
    for (size_t i = 0; i < shards.size(); ++i) {
      if (parts[i].other) {
        for (Storage& s : parts[i].other->storages) storages.push_back(std::move(s));
      } else {
        for (size_t k = first[i]; k < first[i + 1]; ++k) storages.push_back(std::move(ck.storages[k]));
      }
    }
    ck.storages = std::move(storages);
  }
};

}  // namespace

void read_sharded(Checkpoint& ck, const Input& in, const Limits& limits, ReadWhole read_whole) {
  // Local shards are read on several threads: the second one starts now, waking while the index is read.
  std::optional<Standby> standby;
  if (!vfs::is_url(in.path) && std::thread::hardware_concurrency() > 1) try {
      standby.emplace();
    } catch (const std::system_error&) {  // none: run_threads starts its own (or says why it cannot)
    }
  ShardedRead r(ck, in.path, limits, read_whole);
  r.read_index_file();
  r.plan_places();
  // Local shards are read on up to 4 threads (each shard's parse is independent), each checked against
  // the weight_map and its keys prefixed there; a shard's failure is thrown at its turn in name order:
  // the same error as reading them one by one. Remote shards are read in turn.
  const unsigned threads = vfs::is_url(in.path) ? 1
                                                : std::min<unsigned>({4u, std::max(1u, std::thread::hardware_concurrency()),
                                                                      static_cast<unsigned>(r.shards.size())});
  if (threads > 1) r.read_on_threads(threads, standby ? &*standby : nullptr);
  else r.size_records();
  std::shared_ptr<void> parser;  // one worker: the shards read in turn below
  bool whole_parts = false;  // shards read whole: their storages are spliced in below
  for (size_t i = 0; i < r.shards.size(); ++i) {
    if (threads <= 1) r.read_part(i, &parser);
    if (r.failed[i]) std::rethrow_exception(r.failed[i]);
    whole_parts |= r.add_part(i);
  }
  r.check_held();
  // Safetensors shards' keys are their tensors' names, each in one shard (the weight_map says which).
  ck.own_storages = !whole_parts;
  if (whole_parts) r.splice_storages();
  // The index and the parsers' buffers are freed: their pages go back to the system (glibc keeps a freed
  // block in the process once it has raised its mapping threshold past the block's size).
  r.index.reset();
  parser.reset();
  malloc_trim(0);
}

}  // namespace ckpt
