// The security scan: every pickle in a file (zip *.pkl members, each pickle of a legacy stream, a bare
// pickle, and torch.save blobs nested in them through torch.storage._load_from_bytes) is run through the
// inert VM, and every global it names is classed known-safe, unknown or dangerous. Nothing is executed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/checkpoint.h"
#include "core/mapped_file.h"

namespace ckpt {

enum class GlobalClass { Safe, Unknown, Dangerous };

// Known-safe: torch's weights_only allowlist plus TorchScript / Lightning plain types. Dangerous: code
// execution, file / process / network access, nested loaders, and names only a bypass would use.
GlobalClass classify_global(std::string_view module, std::string_view name);

// Findings `dangerous-global` (error) and `unknown-global` (warning) for `file`. A pickle that turns out
// malformed still reports the globals met before the error, and a `scan-incomplete` note says where.
std::vector<Finding> security_findings(const MappedFile& file, const Limits& limits);

// The same classification for globals a reader already collected (what `summary` shows, without a
// second pass over the file).
std::vector<Finding> global_findings(const std::vector<GlobalRef>& globals, const std::string& member);

}  // namespace ckpt
