#include "core/sharded.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/reader.h"
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

void read_sharded(Checkpoint& ck, const Input& in, const Limits& limits) {
  const std::string& index_path = in.path;
  auto file = vfs::open(index_path);
  const ByteView v = file->view();
  if (v.size() > limits.string_bytes)
    v.fail(0, fmt::format("index of {} bytes exceeds the limit of {}", v.size(), limits.string_bytes));
  const std::string_view text = v.str(0, v.size());
  // A sorted map: ordered_json inserts each key with a linear search, quadratic in a weight_map of 100,000
  // tensors (the shards are taken in name order anyway; the index's metadata keys come out sorted).
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) { v.fail(e.byte > 0 ? e.byte - 1 : 0, "index is not valid JSON"); }
  // A number too large for a double (1e999) throws out_of_range, not parse_error (fuzz_json).
  catch (const nlohmann::json::out_of_range&) { v.fail(0, "index is not valid JSON: a number out of range"); }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) v.fail(0, "index has no weight_map object");

  ck.file = file;
  ck.path = index_path;
  ck.format = Format::Sharded;
  ck.container = Container::Shards;
  ck.content = Content::StateDict;
  ck.file_size = file->size();
  std::map<std::string, std::string> where;  // tensor -> shard
  std::vector<std::string> shards;  // sorted by file name
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it->is_string()) v.fail(0, fmt::format("weight_map entry '{}' is not a file name", it.key()));
    const std::string shard = it->get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard.find('\\') != std::string::npos || shard == "." ||
        shard == "..")
      v.fail(0, fmt::format("weight_map entry '{}' names '{}', which is not a file beside the index", it.key(), shard));
    where[it.key()] = shard;
    if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
  }
  std::sort(shards.begin(), shards.end());
  if (j.contains("metadata")) ck.sharded.index_metadata = nlohmann::ordered_json::parse(j["metadata"].dump());

  const std::string dir = vfs::parent(index_path);
  std::set<std::string> held;
  for (const std::string& shard : shards) {
    const std::string p = vfs::join(dir, shard);
    // A URL that cannot be listed (https://) is not looked for: reading it says whether it is there.
    const vfs::Kind k = vfs::kind(p);
    if (k != vfs::Kind::File && k != vfs::Kind::Unknown) v.fail(0, fmt::format("weight_map names shard '{}', which is missing", shard));
    Checkpoint part = read_weights(p, limits);
    ck.file_size += part.file_size;
    uint64_t bytes = 0;
    for (Tensor& t : part.tensors) {
      auto it = where.find(t.name);
      if (it == where.end())
        throw InputError(p, fmt::format("tensor '{}' is not in the weight_map of {}", t.name, index_path));
      if (it->second != shard)
        throw InputError(p, fmt::format("tensor '{}' is in shard '{}' but the weight_map puts it in '{}'", t.name, shard,
                                                 it->second));
      held.insert(t.name);
      bytes += t.bytes;
      t.storage = shard + ":" + t.storage;
      t.shard = shard;
      ck.tensors.push_back(std::move(t));
    }
    for (Storage& s : part.storages) {
      s.key = shard + ":" + s.key;
      if (!s.source) s.source = part.file.get();  // kept alive through keep_alive below
      ck.storages.push_back(std::move(s));
    }
    for (const FrozenConstants& f : part.frozen) ck.frozen.push_back(f);
    ck.scan_files.push_back({p, shard});
    for (GlobalRef& g : part.globals) ck.globals.push_back(std::move(g));
    ck.sharded.shards.push_back(ShardInfo{shard, part.format, part.tensors.size(), bytes});
    ck.keep_alive.push_back(part.file);
    if (part.heap) ck.keep_alive.push_back(part.heap);
    for (auto& k : part.keep_alive) ck.keep_alive.push_back(std::move(k));
  }
  for (const auto& [tensor, shard] : where)
    if (!held.count(tensor))
      v.fail(0, fmt::format("weight_map puts tensor '{}' in shard '{}', which does not hold it", tensor, shard));
}

}  // namespace ckpt
