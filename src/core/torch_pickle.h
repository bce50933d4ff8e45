// Interprets an inert pickle graph the way torch.load would, without calling anything: recognizes the
// torch._utils._rebuild_* family, Parameters, meta and uninitialized tensors, storages behind persistent
// ids, whole pickled nn.Modules and Lightning checkpoints, and fills a Checkpoint.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>

#include "core/checkpoint.h"
#include "core/zip.h"

namespace ckpt {

// Called once per storage key, on first sight, to say where its bytes live (each container format
// knows); it fills `member` / `present` / `file_offset` or throws. `at` is the tensor that named it.
using StorageLocator = std::function<void(Storage& s, const Value* at)>;

// Storages of a zip archive (torch.save or TorchScript): `<dir><key>` under `prefix/`, stored (never
// deflated) and at least as large as the persistent id says. Errors name the pickle offset of the tensor.
StorageLocator zip_storage_locator(const ZipReader& zip, std::string dir, const ByteView& pkl);

class TorchInterpreter {
 public:
  // `pkl` is the view the pickle was read from; errors about a value name its opcode offset in it.
  TorchInterpreter(Checkpoint& ck, const ByteView& pkl, const Limits& limits, StorageLocator locate);

  // Fills ck.tensors / ck.modules / ck.metadata / ck.content / ck.model_key from the unpickled root.
  void interpret(const Value* root);

  // Parses a storage persistent id tuple ('storage', cls, key, location, numel[, view]).
  struct StorageId {
    std::string key;
    const DType* dtype = nullptr;
    uint64_t numel = 0;
    std::string location;
    const Value* view = nullptr;  // legacy view metadata or nullptr
  };
  StorageId storage_id(const Value* pid, const Value* at) const;

  // A torch._utils._rebuild_* call (or lazy parameter) and what it describes.
  bool is_tensor(const Value* v) const;
  Tensor tensor(const Value* v, const std::string& name);
  // Storages met from now on belong to the model (true) or to something beside it (optimizer state,
  // TorchScript constants).
  void set_in_model(bool in_model) { in_model_ = in_model; }

 private:
  size_t storage(const Value* pid, const Value* at);
  bool is_module(const Value* v) const;
  void walk_module(const Value* v, const std::string& path, int depth);
  void collect(const Value* v, const std::string& path, int depth);
  void lightning(const Value* root);
  nlohmann::ordered_json plain(const Value* v, int depth);
  nlohmann::ordered_json tensor_summary(const Value* v);
  [[noreturn]] void fail(const Value* at, const std::string& msg) const;
  void budget();

  Checkpoint& ck_;
  ByteView pkl_;
  const Limits& lim_;
  StorageLocator locate_;
  std::unordered_map<std::string, size_t> storage_index_;  // key -> index in ck_.storages
  uint64_t visited_ = 0;
  bool in_model_ = true;  // storages resolved now belong to the model (not optimizer state)
};

// State dicts that do not say which entries are buffers: a well-known buffer name (running_mean, ...) or
// an integer / bool / bits dtype makes a buffer, anything else a parameter (documented in README).
void infer_kinds(std::vector<Tensor>& tensors);

// The legacy torch.save stream's first pickle: the magic number 0x1950a86a20f9469cfc6c.
bool is_legacy_magic(const Value* v);

// Dotted path join: join("", "a") == "a", join("a", "b") == "a.b".
std::string join_path(const std::string& a, const std::string& b);

}  // namespace ckpt
