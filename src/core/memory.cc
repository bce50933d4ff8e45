#include "core/memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "core/checkpoint.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/hf_config.h"
#include "core/hf_weights.h"
#include "core/hf_types.h"
#include "core/text.h"

namespace ckpt {

namespace {

using J = nlohmann::ordered_json;

// accelerate's estimate-memory dtypes and how its CLI derives each from the float32 model's size.
struct DtypeRule {
  const char* name;
  double divisor;  // of the float32 size
  uint32_t itemsize;  // bytes per element of a floating tensor cast to it (0: none, int4 packs two)
};
constexpr DtypeRule kDtypes[] = {
    {"float32", 1, 4}, {"float16", 2, 2}, {"bfloat16", 2, 2}, {"int8", 4, 1}, {"int4", 8, 0},
};

const DtypeRule* dtype_rule(const std::string& name) {
  for (const DtypeRule& r : kDtypes)
    if (name == r.name) return &r;
  return nullptr;
}

bool is_floating(const DType* d) { return d && d->cls == DTypeClass::Float; }

bool numeric(const std::string& s) { return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }); }

std::string last_segment(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

std::string parent_of(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

// Model types whose transformers class lists its *Embeddings module in _no_split_modules (BertEmbeddings, ...).
bool embeddings_unsplit(const std::string& model_type) {
  static const std::set<std::string> k{"bert", "roberta", "xlm-roberta", "camembert", "electra", "ernie", "data2vec-text",
                                       "roberta-prelayernorm", "xmod", "bert-generation", "splinter", "markuplm"};
  return k.count(model_type) > 0;
}

// The non-persistent buffers transformers registers for a model type and writes to no file.
std::vector<ExtraBuffer> extra_buffers(const HfConfig& c, const HfWeights& w, const std::vector<Tensor>& tensors) {
  std::vector<ExtraBuffer> out;
  auto add = [&](std::string name, const char* dtype, std::vector<int64_t> shape) {
    // saved after all (older transformers kept some persistent): a few names looked for, no index of them all
    if (std::any_of(tensors.begin(), tensors.end(), [&](const Tensor& t) { return t.name == name; })) return;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    out.push_back({std::move(name), dtype, shape, static_cast<uint64_t>(n) * dtype_by_name(dtype)->itemsize});
  };
  // The prefix of the base model: "model." for LlamaForCausalLM's model.layers.N, "" for LlamaModel.
  std::string base = w.layers_prefix;  // "model.layers." / "encoder.layer." / "transformer.h."
  if (!base.empty()) base = parent_of(base.substr(0, base.size() - 1));
  if (!base.empty()) base += ".";
  // One rotary embedding per model: inv_freq, float32 [ceil(dim / 2)], dim the rotated part of head_dim; from
  // transformers 5.0 on (5.0 to 5.24 read: every one of these model types, in 4.57 none) also
  // original_inv_freq, a copy of it (4.x kept that as a plain attribute, no buffer). The config's
  // transformers_version tells which; without one, today's.
  static const std::set<std::string> rotary{"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3",
                                            "gemma", "gemma2", "gpt_neox", "falcon"};
  if (rotary.count(c.model_type) && c.head_size()) {
    const auto dim = static_cast<int64_t>(static_cast<double>(*c.head_size()) * c.partial_rotary_factor);
    add(base + "rotary_emb.inv_freq", "float32", {(dim + 1) / 2});
    if (c.transformers_major.value_or(5) >= 5) add(base + "rotary_emb.original_inv_freq", "float32", {(dim + 1) / 2});
  }
  // Gemma's scaled embedding: embed_scale, a 0-dim float32 (transformers >= 5.3).
  if ((c.model_type == "gemma" || c.model_type == "gemma2") && !w.embedding.empty())
    add(w.embedding.substr(0, w.embedding.size() - 6) + "embed_scale", "float32", {});
  if ((c.model_type == "bert" || c.model_type == "roberta") && c.max_position_embeddings) {
    // BertEmbeddings: position_ids and token_type_ids, int64 [1, max_position_embeddings]
    // the input embedding hf_weights found: "<prefix>embeddings.word_embeddings.weight"
    static const std::string word = "embeddings.word_embeddings.weight";
    const std::string& e = w.embedding;
    if (e.size() >= word.size() && e.compare(e.size() - word.size(), word.size(), word) == 0) {
      const std::string emb = e.substr(0, e.size() - word.size() + 11);  // "<prefix>embeddings."
      add(emb + "position_ids", "int64", {1, *c.max_position_embeddings});
      add(emb + "token_type_ids", "int64", {1, *c.max_position_embeddings});
    }
  }
  return out;
}

struct Node {
  std::vector<std::string> children;  // child module paths, in order
  std::vector<std::string> tensors;  // direct tensors' full names
};

}  // namespace

std::vector<std::string> memory_dtypes() {
  std::vector<std::string> out;
  for (const DtypeRule& r : kDtypes) out.emplace_back(r.name);
  return out;
}

TrainingUsage estimate_training_usage(uint64_t bytes, const std::string& precision) {
  TrainingUsage u;
  const auto fp32 = static_cast<int64_t>(bytes);
  const int64_t fp16 = fp32 / 2;
  if (precision == "float32") {
    u.model = fp32;
    u.gradients = fp32;
    u.optimizer = fp32 * 2;
    u.step = fp32 * 4;
  } else if (precision == "float16" || precision == "bfloat16") {
    u.model = fp32;
    u.gradients = fp32 + fp16;
    u.optimizer = fp32 * 2;
    u.step = u.optimizer;
  }
  return u;
}

namespace {

// Sizes of one model: every tensor once (a tied copy is the first name's) under `prefix` ("" all of them,
// "model." the base model's, named without it), and the extra buffers there; the largest layer as
// accelerate's get_max_layer_size finds it, as stored and as float32.
struct Measured {
  uint64_t total = 0, total32 = 0, largest = 0, largest32 = 0;
  std::vector<std::string> largest_layers, largest_layers32;
  std::vector<std::string> no_split;
};

// Whether entry k counts in the sizes: once for a tied tensor (its first name), not when lazy and unresolved.
bool counted(const Checkpoint& ck, const SameTensor& s, size_t k) {
  const Tensor& t = ck.tensors[k];
  return (s.size() <= k || s[k] == k) && !(t.state == TensorState::Uninitialized && !t.resolved);
}

// A row as accelerate's command derives it from the float32 sizes (the total and the largest layer divided
// for the dtype); Adam's training from the float32 total, whatever dtype the file was saved in (mixed
// precision keeps float32 master weights and Adam's states).
MemoryRow converted_row(const std::string& d, uint64_t total32, uint64_t largest32) {
  const DtypeRule& rule = *dtype_rule(d);
  MemoryRow r;
  r.dtype = d;
  r.total = static_cast<double>(total32) / rule.divisor;
  r.largest = static_cast<double>(largest32) / rule.divisor;
  r.training = estimate_training_usage(total32, d);
  return r;
}

Measured measure(const Checkpoint& ck, const SameTensor& s, const std::vector<ExtraBuffer>& extra, const std::string& prefix) {
  Measured m;
  std::map<std::string, uint64_t> size, size32;  // module or tensor path -> bytes (as stored, as float32)
  std::map<std::string, Node> tree;  // module path -> children and direct tensors
  std::set<std::string> modules;
  auto place = [&](const std::string& name, uint64_t bytes, uint64_t bytes32) {
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
      size[name.substr(0, dot)] += bytes;
      size32[name.substr(0, dot)] += bytes32;
    }
    size[""] += bytes;
    size32[""] += bytes32;
    if (!name.empty()) {
      size[name] += bytes;
      size32[name] += bytes32;
    }
    tree[parent_of(name)].tensors.push_back(name);
    // the modules above it, each registered once with its parent (a set: a flat model's 100,000
    // children cost no scan of the list)
    for (std::string child = parent_of(name); !child.empty() && modules.insert(child).second; child = parent_of(child))
      tree[parent_of(child)].children.push_back(child);
  };
  auto under = [&](const std::string& name) { return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0; };
  std::set<std::string> root_buffers;
  for (size_t k = 0; k < ck.tensors.size(); ++k) {
    const Tensor& t = ck.tensors[k];
    if (!counted(ck, s, k) || (!prefix.empty() && !under(t.name))) continue;
    const std::string name = t.name.substr(prefix.size());
    place(name, t.bytes, is_floating(t.dtype) ? static_cast<uint64_t>(t.numel) * 4 : t.bytes);
    if (t.kind == TensorKind::Buffer && name.find('.') == std::string::npos) root_buffers.insert(name);
  }
  for (const ExtraBuffer& b : extra)
    if (prefix.empty() || under(b.name)) place(b.name.substr(prefix.size()), b.bytes, b.bytes);
  m.total = size[""];
  m.total32 = size32[""];

  // Children in the order the model registers them: numbered ones by number, a top-level lm_head last
  // (transformers' *ForCausalLM registers the base model first; safetensors sorts lm_head before it).
  for (auto& entry : tree) {  // not a structured binding: a lambda captures it (clang < 16 refuses that)
    const bool top = entry.first.empty();
    auto& n = entry.second;
    std::stable_sort(n.children.begin(), n.children.end(), [&](const std::string& a, const std::string& b) {
      const std::string la = last_segment(a), lb = last_segment(b);
      if (numeric(la) && numeric(lb)) return la.size() != lb.size() ? la.size() < lb.size() : la < lb;
      if (top) return la != "lm_head" && lb == "lm_head";
      return false;
    });
  }
  // No-split units of a transformers model: the numbered blocks, and its embeddings where listed.
  const bool hf = ck.hf && ck.hf->error.empty();
  auto unsplit = [&](const std::string& path) {
    if (!hf) return false;
    const std::string seg = last_segment(path), parent = parent_of(path);
    if (numeric(seg) && !parent.empty() && is_block_list(last_segment(parent))) return true;
    return seg == "embeddings" && embeddings_unsplit(ck.hf->model_type);
  };
  if (hf) {
    std::set<std::string> lists;
    for (const auto& [path, n] : tree)
      if (!path.empty() && numeric(last_segment(path)) && is_block_list(last_segment(parent_of(path))))
        lists.insert(parent_of(path) + ".*");
    m.no_split.assign(lists.begin(), lists.end());
    if (embeddings_unsplit(ck.hf->model_type))
      for (const auto& [path, n] : tree)
        if (last_segment(path) == "embeddings") m.no_split.push_back(path);
  }
  // get_max_layer_size over the root's own parameters, its children, its own buffers.
  std::vector<std::string> todo;
  const Node& root = tree[""];
  std::vector<std::string> params, buffers;
  for (const std::string& t : root.tensors) (root_buffers.count(t) ? buffers : params).push_back(t);
  // A stack holding the candidates in reverse: popping gives accelerate's order (a split module's
  // children take its place, before its later siblings), each pop and push O(1) however flat the model.
  todo.insert(todo.end(), buffers.rbegin(), buffers.rend());
  todo.insert(todo.end(), root.children.rbegin(), root.children.rend());
  todo.insert(todo.end(), params.rbegin(), params.rend());
  while (!todo.empty()) {
    const std::string name = std::move(todo.back());
    todo.pop_back();
    auto it = tree.find(name);
    const bool module_with_children = it != tree.end() && !it->second.children.empty();
    if (!module_with_children || unsplit(name)) {
      for (auto [sizes, best, best_names] :
           {std::tuple{&size, &m.largest, &m.largest_layers}, std::tuple{&size32, &m.largest32, &m.largest_layers32}}) {
        const uint64_t sz = (*sizes)[name];
        if (sz > *best) {
          *best = sz;
          *best_names = {name};
        } else if (sz == *best && sz > 0) {
          best_names->push_back(name);
        }
      }
    } else {
      todo.insert(todo.end(), it->second.children.rbegin(), it->second.children.rend());
    }
  }
  return m;
}

// accelerate's command: the base model alone, where the file holds more (a head); nullopt where they are one.
std::optional<CommandEstimate> command_estimate(const Checkpoint& ck, const SameTensor& s, const std::vector<ExtraBuffer>& extra,
                                                const std::vector<std::string>& dtypes) {
  if (!ck.hf || !ck.hf->error.empty()) return std::nullopt;
  const auto base = hf_base_model(*ck.hf);
  if (!base) return std::nullopt;
  const std::string prefix = base->attribute + ".";
  std::set<std::string> outside;
  bool inside = false;
  for (const Tensor& t : ck.tensors) {
    if (t.name.compare(0, prefix.size(), prefix) == 0) inside = true;
    else outside.insert(t.name.substr(0, t.name.find('.')));
  }
  if (!inside || outside.empty()) return std::nullopt;
  const Measured b = measure(ck, s, extra, prefix);
  CommandEstimate c;
  c.model_class = base->model_class;
  c.left_out.assign(outside.begin(), outside.end());
  c.float32_total = b.total32;
  c.largest = b.largest32;
  c.largest_layers = b.largest_layers32;
  for (const std::string& d : dtypes) c.rows.push_back(converted_row(d, b.total32, b.largest32));
  return c;
}

// The KV cache of B sequences of L tokens of a decoder language model with a config.json; nullopt and
// `none` saying why for anything else.
std::optional<KvCache> kv_cache(const Checkpoint& ck, const HfWeights& w, const MemoryOptions& o, const std::string& own_dtype,
                                std::string* none) {
  if (!ck.hf) {
    *none = "no config.json beside the weights";
  } else if (!ck.hf->error.empty()) {
    *none = "config.json could not be read";
  } else if (!ck.hf->is_causal_lm()) {
    *none = "not a decoder language model (architectures: no *ForCausalLM / *LMHeadModel)";
  } else {
    const HfConfig& c = *ck.hf;
    const auto seq = o.seq_len ? o.seq_len : c.max_position_embeddings;
    if (!c.num_hidden_layers || !c.kv_heads() || !c.head_size()) {
      *none = "config.json lacks num_hidden_layers, the attention heads or the head size";
    } else if (!seq) {
      *none = "no --seq-len and no max_position_embeddings in config.json";
    } else {
      KvCache kv;
      kv.batch = o.batch;
      kv.seq_len = *seq;
      // The first floating --dtype (weights in int8 / int4 still keep their keys and values in a floating
      // dtype), else the file's own.
      kv.dtype = own_dtype.empty() ? "float32" : own_dtype;
      for (const std::string& d : o.dtypes)
        if (dtype_rule(d) && dtype_rule(d)->itemsize >= 2) {
          kv.dtype = d;
          break;
        }
      kv.layers = *c.num_hidden_layers;
      kv.kv_heads = *c.kv_heads();
      kv.head_dim = *c.head_size();
      // The weights' key projection decides where it disagrees (check's hf-config rule reports it).
      if (!w.k_proj.empty() && w.k_rows > 0 && w.k_rows != kv.kv_heads * kv.head_dim) {
        kv.config_kv_heads = kv.kv_heads;
        if (w.k_rows % kv.head_dim == 0) {
          kv.kv_heads = w.k_rows / kv.head_dim;
        } else {
          kv.kv_heads = 1;
          kv.head_dim = w.k_rows;
        }
      }
      kv.window = c.sliding_window.value_or(0);
      if (kv.window > 0) kv.sliding_layers = std::min(kv.layers, c.sliding_layers());
      const unsigned __int128 item = dtype_by_name(kv.dtype)->itemsize;
      const unsigned __int128 per_token = 2 * static_cast<unsigned __int128>(kv.batch) *
                                          static_cast<unsigned __int128>(kv.kv_heads) *
                                          static_cast<unsigned __int128>(kv.head_dim) * item;
      const int64_t kept = kv.window > 0 ? std::min<int64_t>(kv.seq_len, kv.window - 1) : kv.seq_len;
      const unsigned __int128 bytes =
          per_token * (static_cast<unsigned __int128>(kv.layers - kv.sliding_layers) * static_cast<uint64_t>(kv.seq_len) +
                       static_cast<unsigned __int128>(kv.sliding_layers) * static_cast<uint64_t>(kept));
      const long double approx = 2.0L * kv.batch * kv.kv_heads * kv.head_dim * static_cast<long double>(item) *
                                 (static_cast<long double>(kv.layers - kv.sliding_layers) * kv.seq_len +
                                  static_cast<long double>(kv.sliding_layers) * kept);
      if (approx > 1.8e19L || bytes > UINT64_MAX) {  // the exact product would wrap even 128 bits
        *none = "more than 2^64 bytes for these sizes";
        return std::nullopt;
      }
      kv.bytes = static_cast<uint64_t>(bytes);
      return kv;
    }
  }
  return std::nullopt;
}

}  // namespace

MemoryReport estimate_memory(const Checkpoint& ck, const SameTensor& s, const MemoryOptions& o) {
  for (const std::string& d : o.dtypes)
    if (!dtype_rule(d))
      throw std::invalid_argument(fmt::format("dtype {}: not one of float32, float16, bfloat16, int8, int4 (accelerate's)", d));
  MemoryReport m;
  // The weights' facts (embedding, numbered layers, attention projections) for the buffers and the KV cache.
  const HfWeights w = ck.hf && ck.hf->error.empty() ? hf_weights(ck) : HfWeights{};
  if (ck.hf && ck.hf->error.empty()) m.extra_buffers = extra_buffers(*ck.hf, w, ck.tensors);
  const Measured all = measure(ck, s, m.extra_buffers, "");
  m.own_dtype = most_bytes_float_dtype(ck.tensors, [&](size_t k) { return counted(ck, s, k); });
  m.total = all.total;
  m.float32_total = all.total32;
  m.largest = all.largest;
  m.largest_layers = all.largest_layers;
  m.no_split = all.no_split;

  // Rows: the file's own dtype exactly, then accelerate's conversions of the float32 size.
  std::vector<std::string> dtypes = o.dtypes;
  if (dtypes.empty()) {
    if (!m.own_dtype.empty() && dtype_rule(m.own_dtype)) dtypes.push_back(m.own_dtype);
    for (const DtypeRule& r : kDtypes)
      if (r.name != m.own_dtype) dtypes.push_back(r.name);
  }
  for (const std::string& d : dtypes) {
    MemoryRow r = converted_row(d, m.float32_total, all.largest32);
    if (d == m.own_dtype) {  // the file's own dtype: its exact bytes
      r.own = true;
      r.total = static_cast<double>(m.total);
      r.largest = static_cast<double>(m.largest);
    }
    m.rows.push_back(r);
  }

  m.command = command_estimate(ck, s, m.extra_buffers, dtypes);

  // The KV cache of a decoder.
  m.kv_cache = kv_cache(ck, w, o, m.own_dtype, &m.kv_cache_none);
  return m;
}

}  // namespace ckpt
