// What Lightning users open a checkpoint for, beside the weights: each optimizer's class and param groups,
// the LR schedulers' state, the callbacks' state (ModelCheckpoint's best score and path, EarlyStopping's
// wait count), the precision plugin's grad scaler and the loops' progress. The reader keeps these states
// as plain JSON (TrainingInfo::details, torch_pickle.cc) and the 1-element tensors in them
// (best_model_score, kth_value, current_score) as TrainingInfo::scalars; read_training_scalars then reads
// those few bytes, the only tensor data `summary` reads. Nothing is executed: the classes are inferred
// from the state's keys, as Lightning saves no class names for optimizers and schedulers.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ckpt {

struct Checkpoint;
struct TrainingInfo;
struct Limits;

// The values of TrainingInfo::scalars, from the file's storages (an unreadable one stays unknown).
void read_training_scalars(Checkpoint& ck, const Limits& limits);

// torch.optim class a param group's keys (and the per-parameter state keys) imply: "AdamW", "SGD", ...;
// "" when they fit none or several.
std::string optimizer_class(const nlohmann::ordered_json& group, const std::vector<std::string>& state_keys);
// torch.optim.lr_scheduler class a scheduler's state_dict keys imply: "StepLR", "CosineAnnealingLR", ...; "" when unsure.
std::string scheduler_class(const nlohmann::ordered_json& state);

// Summary JSON's `training` object: {optimizers, lr_schedulers, callbacks, precision, progress, loops};
// null when the checkpoint has none of them.
nlohmann::ordered_json training_json(const TrainingInfo& tr);
// Summary text's header lines for them: (key, value) pairs (Optim, Sched, Callback, Scaler, Progress).
std::vector<std::pair<std::string, std::string>> training_lines(const TrainingInfo& tr);

}  // namespace ckpt
