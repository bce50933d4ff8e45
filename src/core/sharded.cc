#include "core/sharded.h"

#include "core/fast_json.h"
#include "core/name_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>
#include <thread>

#include "core/reader.h"
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

}  // namespace

void read_sharded(Checkpoint& ck, const Input& in, const Limits& limits) {
  const std::string& index_path = in.path;
  auto file = vfs::open(index_path);
  const ByteView v = file->view();
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
  std::optional<FastIndex> fast = fast_index(text);
  // A shard that is no file beside the index is named as the full path meets it first (in name order).
  if (!fast || !std::all_of(fast->files.begin(), fast->files.end(), beside)) fast = read_index(v, text);
  const std::vector<std::pair<std::string, uint32_t>>& where = fast->weight_map;
  const std::vector<std::string>& files = fast->files;
  std::vector<std::string> shards = files;  // sorted by file name

  // tensor -> its entry in `where`: built by the first reading thread before it reads (the others read
  // meanwhile), or here when shards are read in turn.
  NameIndex shard_of;
  std::atomic<bool> indexed{false};
  auto index_names = [&] {
    struct Done {  // the readers waiting for it go on even when it fails (run_threads rethrows that first)
      std::atomic<bool>& flag;
      ~Done() {
        flag = true;
        flag.notify_all();
      }
    } done{indexed};
    shard_of.reserve(where.size());
    for (size_t k = 0; k < where.size(); ++k) shard_of.try_emplace(where[k].first, static_cast<uint32_t>(k));
  };
  std::sort(shards.begin(), shards.end());
  std::vector<uint32_t> sorted_of(files.size());  // a file's place in `shards`
  for (size_t f = 0; f < files.size(); ++f)
    sorted_of[f] = static_cast<uint32_t>(std::lower_bound(shards.begin(), shards.end(), files[f]) - shards.begin());
  if (fast->metadata) ck.sharded.index_metadata = nlohmann::ordered_json::parse(nlohmann::json::parse(*fast->metadata).dump());

  const std::string dir = vfs::parent(index_path);
  std::vector<uint8_t> held(where.size(), 0);  // one writer per entry: the thread reading its shard
  // Local shards are read on up to 4 threads (each shard's parse is independent), each checked against
  // the weight_map and its keys prefixed there, then merged in name order, where a shard's failure is
  // thrown at its turn: the same error as reading them one by one. Remote shards are read in turn, each
  // when merged.
  std::vector<std::optional<Checkpoint>> parts(shards.size());
  std::vector<std::exception_ptr> failed(shards.size());
  auto prefixed = [](const std::string& shard, const std::string& key) {
    std::string out;
    out.reserve(shard.size() + 1 + key.size());
    return out.append(shard).append(1, ':').append(key);
  };
  auto read_part = [&](size_t i) {
    try {
      const std::string& shard = shards[i];
      const std::string p = vfs::join(dir, shard);
      // A URL that cannot be listed (https://) is not looked for: reading it says whether it is there.
      const vfs::Kind k = vfs::kind(p);
      if (k != vfs::Kind::File && k != vfs::Kind::Unknown)
        v.fail(0, fmt::format("weight_map names shard '{}', which is missing", shard));
      Checkpoint& part = parts[i].emplace(read_weights(p, limits));
      indexed.wait(false);
      for (Tensor& t : part.tensors) {
        const uint32_t* at = shard_of.find(t.name);
        if (!at) throw InputError(p, fmt::format("tensor '{}' is not in the weight_map of {}", t.name, index_path));
        if (sorted_of[where[*at].second] != i)
          throw InputError(p, fmt::format("tensor '{}' is in shard '{}' but the weight_map puts it in '{}'", t.name, shard,
                                          files[where[*at].second]));
        held[*at] = 1;
        t.storage = prefixed(shard, t.storage);
        t.shard = static_cast<uint32_t>(i + 1);  // its place in ck.sharded.shards, pushed in this order below
      }
      for (Storage& s : part.storages) {
        s.key = prefixed(shard, s.key);
        if (!s.source) s.source = part.file.get();  // kept alive through keep_alive in the merge
      }
    } catch (...) {
      parts[i].reset();
      failed[i] = std::current_exception();
    }
  };
  const unsigned threads =
      vfs::is_url(index_path) ? 1 : std::min<unsigned>({4u, std::max(1u, std::thread::hardware_concurrency()), static_cast<unsigned>(shards.size())});
  if (threads > 1) {
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    run_threads(threads, stop, [&](unsigned j) {
      if (j == 0) index_names();
      for (size_t i = next++; i < shards.size(); i = next++) read_part(i);
    });
  } else {
    index_names();
  }
  size_t total = 0;
  for (const auto& part : parts) total += part ? part->tensors.size() : 0;
  ck.tensors.reserve(total);
  ck.storages.reserve(total);
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string& shard = shards[i];
    const std::string p = vfs::join(dir, shard);
    if (!parts[i] && !failed[i]) read_part(i);
    if (failed[i]) std::rethrow_exception(failed[i]);
    Checkpoint part = std::move(*parts[i]);
    parts[i].reset();
    ck.file_size += part.file_size;
    uint64_t bytes = 0;
    for (Tensor& t : part.tensors) {
      bytes += t.bytes;
      ck.tensors.push_back(std::move(t));
    }
    for (Storage& s : part.storages) ck.storages.push_back(std::move(s));
    for (const FrozenConstants& f : part.frozen) ck.frozen.push_back(f);
    ck.scan_files.push_back({p, shard});
    for (GlobalRef& g : part.globals) ck.globals.push_back(std::move(g));
    ck.sharded.shards.push_back(ShardInfo{shard, part.format, part.tensors.size(), bytes});
    ck.keep_alive.push_back(part.file);
    if (part.heap) ck.keep_alive.push_back(part.heap);
    for (auto& k : part.keep_alive) ck.keep_alive.push_back(std::move(k));
  }
  // The first one missing in name order, as a sorted map of the weight_map would meet it.
  const std::pair<std::string, uint32_t>* missing = nullptr;
  for (size_t k = 0; k < where.size(); ++k)
    if (!held[k] && (!missing || where[k].first < missing->first)) missing = &where[k];
  if (missing)
    v.fail(0, fmt::format("weight_map puts tensor '{}' in shard '{}', which does not hold it", missing->first, files[missing->second]));
}

}  // namespace ckpt
