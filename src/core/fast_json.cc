#include "core/fast_json.h"

#include <simdjson.h>

#include <algorithm>

#include "core/name_index.h"

namespace ckpt {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// A non-negative integer as nlohmann reads it (an unsigned number; no fraction, no exponent).
bool unsigned_of(element e, uint64_t* out) {
  if (e.type() == element_type::UINT64) return e.get_uint64().get(*out) == simdjson::SUCCESS;
  if (e.type() != element_type::INT64) return false;
  int64_t v = 0;
  if (e.get_int64().get(v) != simdjson::SUCCESS || v < 0) return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

bool tensor_entry(element v, FastTensorEntry& t) {
  simdjson::dom::object o;
  if (v.get_object().get(o) != simdjson::SUCCESS) return false;
  bool dtype = false, shape = false, offsets = false;
  for (auto field : o) {
    if (field.key == "dtype") {
      std::string_view s;
      if (dtype || field.value.get_string().get(s) != simdjson::SUCCESS) return false;
      t.dtype = s;
      dtype = true;
    } else if (field.key == "shape") {
      simdjson::dom::array a;
      if (shape || field.value.get_array().get(a) != simdjson::SUCCESS) return false;
      for (element d : a) {
        int64_t x = 0;  // an unsigned above INT64_MAX is refused by the full path ("negative")
        if (d.type() != element_type::INT64 || d.get_int64().get(x) != simdjson::SUCCESS || x < 0) return false;
        t.shape.push_back(x);
      }
      shape = true;
    } else if (field.key == "data_offsets") {
      simdjson::dom::array a;
      if (offsets || field.value.get_array().get(a) != simdjson::SUCCESS || a.size() != 2) return false;
      if (!unsigned_of(a.at(0).value_unsafe(), &t.begin) || !unsigned_of(a.at(1).value_unsafe(), &t.end)) return false;
      offsets = true;
    }
  }
  return dtype && shape && offsets;
}

// `readable`: bytes from text.data() on that may be read; with the padding simdjson reads past the end
// among them, the text is parsed where it is (else from a padded copy).
bool parse(simdjson::dom::parser& parser, std::string_view text, size_t readable, simdjson::dom::object* root) {
  element doc;
  const bool padded = readable >= text.size() + simdjson::SIMDJSON_PADDING;
  return parser.parse(text.data(), text.size(), !padded).get(doc) == simdjson::SUCCESS &&
         doc.get_object().get(*root) == simdjson::SUCCESS;
}

}  // namespace

std::optional<FastSafetensorsHeader> fast_safetensors_header(std::string_view text, bool check_repeats, size_t readable,
                                                             std::shared_ptr<void>* reuse) {
  std::shared_ptr<simdjson::dom::parser> parser;
  if (reuse && *reuse && reuse->use_count() == 1) parser = std::static_pointer_cast<simdjson::dom::parser>(*reuse);
  else parser = std::make_shared<simdjson::dom::parser>();
  if (reuse) *reuse = parser;
  simdjson::dom::object root;
  if (!parse(*parser, text, readable, &root)) return std::nullopt;
  FastSafetensorsHeader out;
  out.tensors.reserve(root.size());
  NameIndex seen(check_repeats ? root.size() : 0);
  bool metadata = false;
  for (auto kv : root) {
    if (check_repeats && !seen.try_emplace(kv.key, 0).second) return std::nullopt;  // a repeated name: the full path says so
    if (kv.key == "__metadata__") {
      simdjson::dom::object md;
      if (metadata || kv.value.get_object().get(md) != simdjson::SUCCESS) return std::nullopt;
      metadata = true;
      auto& pairs = out.metadata.emplace();
      NameIndex keys(md.size());
      for (auto m : md) {
        std::string_view s;
        if (!keys.try_emplace(m.key, 0).second || m.value.get_string().get(s) != simdjson::SUCCESS) return std::nullopt;
        pairs.emplace_back(std::string(m.key), std::string(s));
      }
      continue;
    }
    FastTensorEntry& t = out.tensors.emplace_back();
    t.name = kv.key;
    if (!tensor_entry(kv.value, t)) return std::nullopt;
  }
  out.strings = std::move(parser);
  return out;
}

void FastIndex::reserve(size_t n) {
  names.reserve(n);
  file_of.reserve(n);
}

uint32_t FastIndex::find(std::string_view name, uint32_t hint) const {
  if (hint < names.size() && names[hint] == name) return hint;
  if (!sorted_) {
    const uint32_t* at = index_.find(name, [this](uint32_t k) { return names[k]; });
    return at ? *at : kNone;
  }
  const auto it = std::lower_bound(names.begin(), names.end(), name);
  return it != names.end() && *it == name ? static_cast<uint32_t>(it - names.begin()) : kNone;
}

bool FastIndex::add(std::string_view tensor, std::string_view shard) {
  if (tensor.size() > left_) {  // names are copied into blocks of 1 MiB (a longer name gets its own)
    left_ = std::max<size_t>(tensor.size(), 1 << 20);
    free_ = blocks_.emplace_back(new char[left_]).get();
  }
  std::copy(tensor.begin(), tensor.end(), free_);  // kept only when the name is new
  const std::string_view name(free_, tensor.size());
  const auto name_of = [this](uint32_t k) { return names[k]; };
  if (sorted_ && !names.empty() && !(names.back() < name)) {  // out of order (or repeated): index all
    sorted_ = false;
    index_.reserve(names.capacity());
    for (uint32_t k = 0; k < names.size(); ++k) index_.try_emplace(names[k], k, name_of);
  }
  if (!sorted_ && !index_.try_emplace(name, static_cast<uint32_t>(names.size()), name_of).second) return false;
  free_ += tensor.size();
  left_ -= tensor.size();
  uint32_t at = 0;
  if (!files.empty() && files.back() == shard) {  // the common case: a run of one shard's tensors
    at = static_cast<uint32_t>(files.size() - 1);
  } else {
    auto [it, fresh] = file_index_.try_emplace(std::string(shard), static_cast<uint32_t>(files.size()));
    if (fresh) files.emplace_back(shard);
    at = it->second;
  }
  names.push_back(name);
  file_of.push_back(at);
  return true;
}

std::optional<FastIndex> fast_index(std::string_view text, size_t readable) {
  simdjson::dom::parser parser;
  simdjson::dom::object root;
  if (!parse(parser, text, readable, &root)) return std::nullopt;
  FastIndex out;
  bool weight_map = false;
  NameIndex top(root.size());
  for (auto kv : root) {
    if (!top.try_emplace(kv.key, 0).second) return std::nullopt;
    if (kv.key == "metadata") {
      out.metadata = simdjson::minify(kv.value);
    } else if (kv.key == "weight_map") {
      simdjson::dom::object wm;
      if (kv.value.get_object().get(wm) != simdjson::SUCCESS) return std::nullopt;
      out.reserve(wm.size());
      for (auto e : wm) {
        std::string_view shard;
        if (e.value.get_string().get(shard) != simdjson::SUCCESS || !out.add(e.key, shard)) return std::nullopt;
      }
      weight_map = true;
    }
  }
  if (!weight_map) return std::nullopt;
  return out;
}

}  // namespace ckpt
