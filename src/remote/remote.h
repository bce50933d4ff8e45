// The remote inputs (vfs.h's Remote): https:// and http:// files; hf://ORG/REPO[@REVISION][/PATH] on the
// Hugging Face Hub (HF_ENDPOINT, HF_TOKEN as huggingface_hub reads them; a repo or folder is listed
// through ENDPOINT/api/models/ORG/REPO/tree/REVISION); s3://BUCKET/KEY and s3://BUCKET/PREFIX/ with
// AWS Signature Version 4 (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else AWS_PROFILE
// in ~/.aws/credentials; AWS_REGION; AWS_ENDPOINT_URL for S3-compatible stores, path-style).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace ckpt::remote {

// Installs the remote schemes into vfs (once, at startup, before threads) with the --limit settings
// that concern them (connect-seconds, stall-seconds, retries, download-bytes).
void install(const Limits& limits);

// Parsed forms, exposed for tests.
struct HfPath {
  std::string kind;  // "models", "datasets" or "spaces"
  std::string repo;  // ORG/REPO
  std::string revision;  // "main" when not given
  std::string path;  // inside the repo, "" for its root
};
// Throws InputError naming `url` when it is not hf://[datasets/|spaces/]ORG/REPO[@REV][/PATH].
HfPath parse_hf(const std::string& url);

struct S3Path {
  std::string bucket, key;  // key "" or ending '/': a prefix
};
S3Path parse_s3(const std::string& url);

// The members of an S3 ListObjectsV2 response (exposed for the hostile-input tests).
struct S3Listing {
  std::vector<std::pair<std::string, uint64_t>> objects;  // key, size
  std::vector<std::string> prefixes;  // CommonPrefixes
  bool truncated = false;
  std::string next_token;
};
S3Listing parse_s3_listing(const std::string& xml, const std::string& display);

}  // namespace ckpt::remote
