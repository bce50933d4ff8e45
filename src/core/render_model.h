// A model's facts as summary shows them (render_summary.cc's parts): the `Model:` line of a Hugging Face
// config, and the memory estimate as text and as JSON's `memory`.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/hf_config.h"
#include "core/memory.h"

namespace ckpt {

// The `Model:` line of summary's text: "GPT2LMHeadModel (gpt2), float32, 2 layers, hidden 64, ...".
// `weights_tied`: whether the weights hold the output embedding as the input one's tensor (nullopt: no
// separate lm_head to tell, e.g. safetensors keeps a tied one once); where it contradicts
// tie_word_embeddings the line says both.
std::string hf_line(const HfConfig& c, std::optional<bool> weights_tied = std::nullopt);

nlohmann::ordered_json memory_json(const MemoryReport& m);
std::string memory_text(const MemoryReport& m, bool exact);

}  // namespace ckpt
