#include "core/hf_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/text.h"
#include "core/vfs.h"

namespace ckpt {

namespace {

using J = nlohmann::ordered_json;

bool is_file(const std::string& p) { return vfs::is_file(p); }

std::string in_dir(const std::string& dir, const char* name) { return vfs::join(dir, name); }

// A count a config states: a JSON integer in [0, 2^40] (anything else is not taken as that fact).
std::optional<int64_t> count_of(const nlohmann::json& o, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = o.find(n);
    if (it == o.end() || it->is_null()) continue;
    if (it->is_number_integer() || it->is_number_unsigned()) {
      const auto v = it->get<int64_t>();
      if (v >= 0 && v <= (int64_t{1} << 40)) return v;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> HfConfig::kv_heads() const { return num_key_value_heads ? num_key_value_heads : num_attention_heads; }

std::optional<int64_t> HfConfig::head_size() const {
  if (head_dim) return head_dim;
  if (hidden_size && num_attention_heads && *num_attention_heads > 0) return *hidden_size / *num_attention_heads;
  return std::nullopt;
}

int64_t HfConfig::sliding_layers() const {
  if (!layer_types.empty())
    return std::count(layer_types.begin(), layer_types.end(), "sliding_attention") +
           std::count(layer_types.begin(), layer_types.end(), "chunked_attention");
  if (!sliding_window || !num_hidden_layers) return 0;
  const int64_t n = *num_hidden_layers;
  if (model_type.rfind("qwen2", 0) == 0 || model_type.rfind("qwen3", 0) == 0)
    return std::max<int64_t>(0, n - max_window_layers.value_or(28));
  if (model_type == "gemma2") return (n + 1) / 2;  // layer i slides when (i + 1) % 2 == 1
  if (model_type == "gemma3_text" || model_type == "gemma3") {
    const int64_t pattern = std::max<int64_t>(1, sliding_window_pattern.value_or(6));
    return n - n / pattern;  // layer i is full when (i + 1) % pattern == 0
  }
  return n;
}

bool HfConfig::is_causal_lm() const {
  if (is_encoder_decoder) return false;
  return std::any_of(architectures.begin(), architectures.end(), [](const std::string& a) {
    auto ends = [&](std::string_view s) { return a.size() >= s.size() && a.compare(a.size() - s.size(), s.size(), s) == 0; };
    return ends("ForCausalLM") || ends("LMHeadModel");
  });
}

std::optional<HfConfig> read_hf_config(const std::string& dir, const Limits& limits) {
  const std::string path = in_dir(dir, "config.json");
  if (!is_file(path)) return std::nullopt;
  HfConfig c;
  c.path = path;
  nlohmann::json j;  // a sorted map: lookups only (ordered_json inserts with a linear search)
  try {
    auto file = vfs::open(path);
    const ByteView v = file->view();
    if (v.size() > limits.string_bytes) {
      c.error = fmt::format("{}: {} bytes, more than the string-bytes limit of {}", path, v.size(), limits.string_bytes);
      return c;
    }
    c.text = std::string(v.str(0, v.size()));
    try {
      j = nlohmann::json::parse(c.text.begin(), c.text.end(), nullptr, true, false);
    } catch (const nlohmann::json::parse_error& e) {
      c.error = fmt::format("{}: not valid JSON at byte {}", path, e.byte > 0 ? e.byte - 1 : 0);
      return c;
    } catch (const nlohmann::json::out_of_range&) {  // a number too large for a double (1e999): fuzz_json
      c.error = fmt::format("{}: not valid JSON: a number out of range", path);
      return c;
    }
  } catch (const InputError& e) {
    c.error = e.render();
    return c;
  }
  if (!j.is_object()) {
    c.error = fmt::format("{}: not a JSON object", path);
    return c;
  }
  // Not a transformers config (diffusers' `_class_name`, a training script's own): not a model's facts.
  if (!j.contains("model_type") && !j.contains("architectures")) return std::nullopt;
  if (auto a = j.find("architectures"); a != j.end() && a->is_array())
    for (const auto& x : *a)
      if (x.is_string()) c.architectures.push_back(x.get<std::string>());
  if (auto m = j.find("model_type"); m != j.end() && m->is_string()) c.model_type = m->get<std::string>();
  for (const char* k : {"dtype", "torch_dtype"})
    if (auto d = j.find(k); d != j.end() && d->is_string() && c.dtype.empty()) c.dtype = d->get<std::string>();
  if (auto e = j.find("is_encoder_decoder"); e != j.end() && e->is_boolean()) c.is_encoder_decoder = e->get<bool>();
  if (auto v = j.find("transformers_version"); v != j.end() && v->is_string()) {
    const std::string& t = v->get_ref<const std::string&>();
    size_t digits = 0;
    while (digits < t.size() && digits < 4 && t[digits] >= '0' && t[digits] <= '9') ++digits;
    if (digits > 0 && (digits == t.size() || t[digits] == '.')) {
      c.transformers_major = std::stoi(t.substr(0, digits));
      size_t minor = digits + 1;
      while (minor < t.size() && minor < digits + 5 && t[minor] >= '0' && t[minor] <= '9') ++minor;
      if (minor > digits + 1) c.transformers_minor = std::stoi(t.substr(digits + 1, minor - digits - 1));
    }
  }
  // Multimodal configs keep the language model's facts in text_config.
  const nlohmann::json* f = &j;
  if (auto t = j.find("text_config"); t != j.end() && t->is_object() && !j.contains("num_hidden_layers") &&
                                      !j.contains("n_layer") && !j.contains("num_layers")) {
    f = &*t;
    c.from_text_config = true;
    if (c.dtype.empty())
      for (const char* k : {"dtype", "torch_dtype"})
        if (auto d = t->find(k); d != t->end() && d->is_string() && c.dtype.empty()) c.dtype = d->get<std::string>();
  }
  c.num_hidden_layers = count_of(*f, {"num_hidden_layers", "n_layer", "num_layers", "n_layers"});
  c.hidden_size = count_of(*f, {"hidden_size", "n_embd", "d_model", "dim"});
  c.num_attention_heads = count_of(*f, {"num_attention_heads", "n_head", "num_heads", "n_heads"});
  c.num_key_value_heads = count_of(*f, {"num_key_value_heads", "num_kv_heads", "n_kv_heads"});
  c.vocab_size = count_of(*f, {"vocab_size", "n_vocab", "padded_vocab_size"});
  c.head_dim = count_of(*f, {"head_dim"});
  c.max_position_embeddings = count_of(*f, {"max_position_embeddings", "n_positions", "max_seq_len", "seq_length"});
  c.intermediate_size = count_of(*f, {"intermediate_size", "n_inner", "ffn_dim", "d_ff"});
  if (auto u = f->find("use_sliding_window"); u == f->end() || !u->is_boolean() || u->get<bool>())
    c.sliding_window = count_of(*f, {"sliding_window"});
  if (auto t = f->find("tie_word_embeddings"); t != f->end() && t->is_boolean()) c.tie_word_embeddings = t->get<bool>();
  else if (auto t2 = j.find("tie_word_embeddings"); t2 != j.end() && t2->is_boolean()) c.tie_word_embeddings = t2->get<bool>();
  c.max_window_layers = count_of(*f, {"max_window_layers"});
  c.sliding_window_pattern = count_of(*f, {"sliding_window_pattern"});
  auto factor = [](const nlohmann::json& o, const char* k) -> std::optional<double> {
    auto it = o.find(k);
    if (it == o.end() || !it->is_number()) return std::nullopt;
    const double v = it->get<double>();
    return v > 0 && v <= 1 ? std::optional<double>(v) : std::nullopt;
  };
  if (auto r = f->find("rope_parameters"); r != f->end() && r->is_object() && factor(*r, "partial_rotary_factor"))
    c.partial_rotary_factor = *factor(*r, "partial_rotary_factor");
  else if (auto pf = factor(*f, "partial_rotary_factor")) c.partial_rotary_factor = *pf;
  else if (auto rp = factor(*f, "rotary_pct")) c.partial_rotary_factor = *rp;
  if (auto l = f->find("layer_types"); l != f->end() && l->is_array())
    for (const auto& x : *l)
      c.layer_types.push_back(x.is_string() ? x.get<std::string>() : std::string("?"));
  return c;
}

std::string hf_single_weights(const std::string& dir) {
  if (!is_file(in_dir(dir, "config.json"))) return "";
  for (const char* name : {"model.safetensors", "pytorch_model.bin"})
    if (is_file(in_dir(dir, name))) return in_dir(dir, name);
  return "";
}

J hf_json(const HfConfig& c) {
  J j{{"config", c.path}};
  if (!c.error.empty()) {
    j["error"] = c.error;
    return j;
  }
  j["architectures"] = c.architectures;
  j["model_type"] = c.model_type;
  auto put = [&](const char* k, const std::optional<int64_t>& v) { j[k] = v ? J(*v) : J(); };
  j["dtype"] = c.dtype.empty() ? J() : J(c.dtype);
  put("num_hidden_layers", c.num_hidden_layers);
  put("hidden_size", c.hidden_size);
  put("num_attention_heads", c.num_attention_heads);
  put("num_key_value_heads", c.num_key_value_heads);
  put("head_dim", c.head_size());
  put("vocab_size", c.vocab_size);
  put("max_position_embeddings", c.max_position_embeddings);
  j["tie_word_embeddings"] = c.tie_word_embeddings ? J(*c.tie_word_embeddings) : J();
  put("sliding_window", c.sliding_window);
  if (!c.layer_types.empty()) j["layer_types"] = c.layer_types;
  j["from_text_config"] = c.from_text_config;
  return j;
}


}  // namespace ckpt
