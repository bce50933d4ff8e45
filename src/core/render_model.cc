#include "core/render_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "core/text.h"

namespace ckpt {

using J = nlohmann::ordered_json;

std::string hf_line(const HfConfig& c, std::optional<bool> weights_tied) {
  if (!c.error.empty()) return c.error;
  std::vector<std::string> bits;
  std::string head = c.architectures.empty() ? c.model_type : join(c.architectures, ", ");
  if (!c.architectures.empty() && !c.model_type.empty()) head += " (" + c.model_type + ")";
  if (!head.empty()) bits.push_back(head);
  if (!c.dtype.empty()) bits.push_back(c.dtype);
  if (c.num_hidden_layers) bits.push_back(fmt::format("{} layers", *c.num_hidden_layers));
  if (c.hidden_size) bits.push_back(fmt::format("hidden {}", *c.hidden_size));
  if (c.num_attention_heads) {
    std::string h = fmt::format("{} heads", *c.num_attention_heads);
    if (c.num_key_value_heads && *c.num_key_value_heads != *c.num_attention_heads)
      h += fmt::format(" ({} key/value)", *c.num_key_value_heads);
    bits.push_back(h);
  }
  if (c.vocab_size) bits.push_back(fmt::format("vocab {}", *c.vocab_size));
  if (c.tie_word_embeddings && weights_tied && *weights_tied != *c.tie_word_embeddings)
    bits.push_back(*weights_tied ? "tied embeddings in the weights (config.json: untied)"
                                 : "untied embeddings in the weights (config.json: tied)");
  else if (c.tie_word_embeddings) bits.push_back(*c.tie_word_embeddings ? "tied embeddings" : "untied embeddings");
  else if (weights_tied) bits.push_back(*weights_tied ? "tied embeddings in the weights" : "untied embeddings in the weights");
  if (c.sliding_window) {
    const int64_t sliding = c.sliding_layers();
    bits.push_back(c.layer_types.empty() ? fmt::format("sliding window {}", *c.sliding_window)
                                         : fmt::format("sliding window {} ({} of {} layers)", *c.sliding_window, sliding,
                                                       c.layer_types.size()));
  }
  if (c.from_text_config) bits.push_back("from text_config");
  return join(bits, ", ");
}

J memory_json(const MemoryReport& m) {
  auto usage = [](const TrainingUsage& u) -> J {
    if (u.step < 0) return J();
    return J{{"model", u.model}, {"gradients", u.gradients}, {"optimizer", u.optimizer}, {"step", u.step}};
  };
  auto bytes = [](double b) -> J {
    if (b == std::floor(b)) return J(static_cast<uint64_t>(b));
    return J(b);
  };
  J rows = J::array();
  for (const MemoryRow& r : m.rows)
    rows.push_back({{"dtype", r.dtype},
                    {"own", r.own},
                    {"largest_layer_bytes", bytes(r.largest)},
                    {"total_bytes", bytes(r.total)},
                    {"training", usage(r.training)}});
  J extra = J::array();
  for (const ExtraBuffer& b : m.extra_buffers)
    extra.push_back({{"name", b.name}, {"dtype", b.dtype}, {"shape", b.shape}, {"bytes", b.bytes}});
  J kv;
  if (m.kv_cache) {
    const KvCache& k = *m.kv_cache;
    kv = {{"batch", k.batch},       {"seq_len", k.seq_len},   {"dtype", k.dtype},     {"layers", k.layers},
          {"sliding_layers", k.sliding_layers}, {"sliding_window", k.window > 0 ? J(k.window) : J()},
          {"kv_heads", k.kv_heads}, {"head_dim", k.head_dim}, {"bytes", k.bytes}};
    if (k.config_kv_heads) kv["config_kv_heads"] = *k.config_kv_heads;
  }
  J command;
  if (m.command) {
    const CommandEstimate& c = *m.command;
    J crows = J::array();
    for (const MemoryRow& r : c.rows)
      crows.push_back({{"dtype", r.dtype}, {"largest_layer_bytes", bytes(r.largest)}, {"total_bytes", bytes(r.total)}, {"training", usage(r.training)}});
    command = {{"model_class", c.model_class},
               {"left_out", c.left_out},
               {"float32_total_bytes", c.float32_total},
               {"largest_layer", {{"bytes", c.largest}, {"names", c.largest_layers}}},
               {"dtypes", std::move(crows)}};
  }
  return J{{"dtype", m.own_dtype.empty() ? J() : J(m.own_dtype)},
           {"total_bytes", m.total},
           {"float32_total_bytes", m.float32_total},
           {"largest_layer", {{"bytes", m.largest}, {"names", m.largest_layers}}},
           {"no_split", m.no_split},
           {"non_persistent_buffers", std::move(extra)},
           {"dtypes", std::move(rows)},
           {"kv_cache", std::move(kv)},
           {"kv_cache_none", m.kv_cache ? J() : J(m.kv_cache_none)},
           {"accelerate_command", std::move(command)}};
}

std::string memory_text(const MemoryReport& m, bool exact) {
  auto b = [&](double v) {
    const auto n = static_cast<uint64_t>(std::llround(v));
    return exact ? grouped_count(n) + " B" : human_bytes(n);
  };
  std::vector<std::array<std::string, 4>> rows{{"dtype", "Largest layer", "Total size", "Training using Adam (peak)"}};
  for (const MemoryRow& r : m.rows)
    rows.push_back({r.dtype + (r.own ? " (file)" : ""), b(r.largest), b(r.total), r.training.step < 0 ? "N/A" : b(static_cast<double>(r.training.step))});
  std::array<size_t, 4> w{};
  for (const auto& r : rows)
    for (size_t c = 0; c < 4; ++c) w[c] = std::max(w[c], r[c].size());
  std::string out = "\nMemory (accelerate's estimate: parameters once, buffers";
  if (!m.extra_buffers.empty()) {
    std::vector<std::string> e;
    for (const ExtraBuffer& x : m.extra_buffers) e.push_back(x.name);
    out += " and the non-persistent " + join(e, ", ");
  }
  out += ")\n";
  for (const auto& r : rows)
    out += fmt::format("  {:<{}}  {:>{}}  {:>{}}  {:>{}}\n", r[0], w[0], r[1], w[1], r[2], w[2], r[3], w[3]);
  out += fmt::format("  Largest layer: {}\n", m.largest_layers.empty() ? "none" : join(m.largest_layers, ", ", 8, ", and {} more"));
  if (m.command) {
    const CommandEstimate& c = *m.command;
    out += fmt::format("  accelerate estimate-memory sizes {}, without {}: {} in float32 (largest layer {}), Adam {}\n", c.model_class,
                       join(c.left_out, ", ", 4, ", and {} more"), b(static_cast<double>(c.float32_total)), b(static_cast<double>(c.largest)),
                       b(static_cast<double>(estimate_training_usage(c.float32_total, "float32").step)));
  }
  if (m.kv_cache) {
    const KvCache& k = *m.kv_cache;
    std::string how = fmt::format("{} layers x 2 x {} key/value heads x {} head_dim", k.layers, k.kv_heads, k.head_dim);
    if (k.config_kv_heads)
      how += fmt::format("; from the weights' key projection: config.json says {} key/value heads", *k.config_kv_heads);
    if (k.sliding_layers > 0)
      how += fmt::format("; {} sliding-window layers keep the last {} tokens", k.sliding_layers, k.window - 1);
    out += fmt::format("  KV cache: {} for batch {} x {} tokens in {} ({})\n", b(static_cast<double>(k.bytes)), k.batch, k.seq_len,
                       k.dtype, how);
  } else {
    out += fmt::format("  KV cache: none ({})\n", m.kv_cache_none);
  }
  return out;
}

}  // namespace ckpt
