// Many inputs for summary, check and load: FILE operands that are files, directories (walked, with
// --include / --exclude globs) or `-` (stdin, spooled to an unlinked temporary file so that readers map
// it like any file), and the runner that reads them on a few threads and prints each file's result in
// input order as soon as it and those before it are done. Exit code of a run: the worst of its files.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/findings.h"

namespace ckpt::cli {

// The FILE operands and how to expand them (bound to the command line by add_input_options, common.h).
struct InputOptions {
  std::vector<std::string> files;
  std::vector<std::string> include, exclude;  // fnmatch globs for files found in directories
  unsigned jobs = 0;  // threads reading files; 0: one per core
};

// What a directory walk takes when no --include is given: the extensions ckpt reads (case-insensitive).
extern const char* const kCheckpointExtensions[];

// One input to read, in input order. `name` is what results and errors call it: the path as found
// (operand + '/' + the walk's relative path), or "-" for stdin. `error` is set when the walk itself
// failed for it (a directory that cannot be listed, or one with nothing to read): it is then read as
// that error.
struct InputItem {
  std::string name;
  std::string error;  // why it cannot be read ("": it can): a walk's or a listing's failure
  bool environment = false;  // the error is the environment's (a 401, the network): exit 4, not 3
  // Throws the item's error: an InputError naming it, or the EnvironmentError (whose text names it).
  void raise() const;
};

struct Expanded {
  std::vector<InputItem> items;
  // Several results: more than one operand, or a directory walked (so a script reading a directory
  // gets the same shape of output whatever the number of files in it).
  bool several = false;
};

// Whether the walk takes the file (or checkpoint directory) at `rel`, its path relative to the
// directory given: it matches an --include glob (or, with none, has a checkpoint extension / is a
// checkpoint directory) and no --exclude glob. A glob matches `rel` with fnmatch (no flags: '*' also
// matches '/'); a glob without '/' is also tried against the last component ("a.pt" excludes sub/a.pt).
bool selected(const std::string& rel, bool is_dir, const std::vector<std::string>& include,
              const std::vector<std::string>& exclude);

// The operands expanded: files kept whatever the globs say, `-` kept, checkpoint directories kept,
// other directories walked recursively in sorted order (regular files only; symlinks followed, each
// directory walked once, so a link loop ends). A missing operand stays an item (its read says so).
// Throws UsageError for `-` given twice (stdin is read once) or no operand.
Expanded expand_inputs(const InputOptions& o);

// stdin, mapped: in place when it is a regular file at offset 0 (`< file`), otherwise copied to an
// unlinked file in $TMPDIR (mkstemp) that then replaces fd 0, so a process started after this (ckpt-torch)
// reads the same bytes as a regular file. Up to limits.stdin_bytes, else an InputError naming `-`.
// The same mapping on every call.
std::shared_ptr<MappedFile> stdin_file(const Limits& limits);

// Writes all `n` bytes to `fd` (retrying short writes and EINTR); false on an error or a closed pipe.
bool write_all(int fd, const void* p, size_t n);
// Reads all `n` bytes from `fd` (retrying short reads and EINTR); false on an error or an early end.
bool read_all(int fd, void* p, size_t n);

// A JSON document printed over several lines as one line (JSON Lines): ckpt's writers put raw newlines
// only between tokens (strings escape theirs), so dropping each newline and the indent after it is exact.
// fflush(f) that keeps the errno of the first flush that failed (note_output_errno, core/error.h).
void flush_output(std::FILE* f);

std::string json_line(const std::string& doc);

// The ckpt.error/1 record of an input that could not be read, one line: {schema, file, command, error, exit}.
std::string error_record(const std::string& command, const std::string& file, const std::string& error, int exit_code);

// Exit codes ordered by how bad: 0 < 1 (findings) < 3 (bad input) < 4 (environment).
int worse_exit(int a, int b);

// How the runner prints: each input's task writes its stdout and stderr to the FILEs given (the real
// ones when results go out as they come, memory streams when several threads run). Errors the task
// throws (InputError, EnvironmentError, out of memory; in ckpt-torch, LibTorch's) become that input's
// "ckpt: error:" line and exit code, and with `command` set its ckpt.error/1 line on stdout (JSON Lines);
// a UsageError stops the run. `header` (text with several inputs) opens each input's stdout.
struct RunPlan {
  unsigned jobs = 1;
  std::string error_records_for;  // "summary" / "load": JSON Lines error records for that command
  std::function<void(size_t index, const InputItem&, std::FILE* out)> header;
  bool task_sees_walk_errors = false;  // else an item's `error` is reported without calling the task
  std::FILE* out = stdout;  // where results go (tests give files)
  std::FILE* err = stderr;
};
using InputTask = std::function<int(size_t index, const InputItem&, std::FILE* out, std::FILE* err)>;
// Whether the program links LibTorch (ckpt-torch): an exception that is none of ckpt's own is then
// LibTorch's (c10::Error), and its error line says so. Each program's main defines it.
extern const bool kLinksLibTorch;
int run_inputs(const std::vector<InputItem>& items, const RunPlan& plan, const InputTask& task);

// The threads for `jobs` (0: hardware_concurrency), never more than the inputs.
unsigned resolve_jobs(unsigned jobs, size_t inputs);

}  // namespace ckpt::cli
