// Remote inputs without a server (the servers are tests/remote/remote_cases.py): URL forms, path
// arithmetic on URLs, secrets kept out of output, an S3 listing read as S3 writes it and hostile ones,
// and a Fetcher behind a ByteView fetching exactly the ranges that are read.
#include <doctest/doctest.h>

#include <cstring>
#include <set>

#include "core/bytes.h"
#include "core/vfs.h"
#include "remote/remote.h"

using namespace ckpt;

TEST_CASE("vfs: URLs and path arithmetic") {
  CHECK(vfs::is_url("https://example.com/a.pt"));
  CHECK(vfs::is_url("hf://org/repo"));
  CHECK(vfs::is_url("s3://bucket/key"));
  CHECK_FALSE(vfs::is_url("model.pt"));
  CHECK_FALSE(vfs::is_url("./a://b"));
  CHECK_FALSE(vfs::is_url("://x"));
  CHECK(vfs::join("hf://org/repo", "config.json") == "hf://org/repo/config.json");
  CHECK(vfs::join("s3://b/p/", "x.safetensors") == "s3://b/p/x.safetensors");
  CHECK(vfs::join("", "x") == "x");
  CHECK(vfs::parent("https://h/a/b/model.safetensors.index.json") == "https://h/a/b");
  CHECK(vfs::parent("https://h/x.pt") == "https://h");
  CHECK(vfs::parent("https://h") == "");
  CHECK(vfs::parent("dir/x.pt") == "dir");
  CHECK(vfs::parent("x.pt") == "");
  CHECK(vfs::parent("/x.pt") == "/");
  CHECK(vfs::filename("s3://b/p/x.bin") == "x.bin");
  CHECK(vfs::filename("hf://org/repo/sub/") == "sub");
}

TEST_CASE("vfs: a URL's secrets are never shown") {
  CHECK(vfs::display("model.pt") == "model.pt");
  CHECK(vfs::display("https://user:pw@h.example/a.pt") == "https://h.example/a.pt");
  CHECK(vfs::display("https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F1&X-Amz-Signature=abc&"
                     "X-Amz-Security-Token=tok&partNumber=1") ==
        "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&"
        "X-Amz-Security-Token=REDACTED&partNumber=1");
  CHECK(vfs::display("https://h/a.pt?token=s3cr3t#frag") == "https://h/a.pt?token=REDACTED");
  // any key but a few harmless ones: a secret may have any name
  CHECK(vfs::display("https://h/a.pt?sessionid=s3cr3t&download=true&sv=2022&sig=x") ==
        "https://h/a.pt?sessionid=REDACTED&download=true&sv=REDACTED&sig=REDACTED");
  CHECK(vfs::display("hf://org/repo@main/a.pt") == "hf://org/repo@main/a.pt");
}

TEST_CASE("hf:// URLs as huggingface_hub's HfFileSystem spells them") {
  auto p = remote::parse_hf("hf://openai-community/gpt2");
  CHECK(p.kind == "models");
  CHECK(p.repo == "openai-community/gpt2");
  CHECK(p.revision == "main");
  CHECK(p.path.empty());
  p = remote::parse_hf("hf://org/repo@v1.0/sub/model.safetensors");
  CHECK(p.revision == "v1.0");
  CHECK(p.path == "sub/model.safetensors");
  p = remote::parse_hf("hf://org/repo@refs/pr/7/model.safetensors");
  CHECK(p.revision == "refs/pr/7");
  CHECK(p.path == "model.safetensors");
  p = remote::parse_hf("hf://datasets/org/data@0123abcd/");
  CHECK(p.kind == "datasets");
  CHECK(p.revision == "0123abcd");
  CHECK(p.path.empty());
  for (const char* bad : {"hf://", "hf://org", "hf://org/", "hf:///repo", "hf://org/repo@/x", "hf://org/re po", "hf://org/repo/../x",
                          "hf://org/repo/a//b", "hf://../repo"})
    CHECK_THROWS_AS(remote::parse_hf(bad), InputError);
}

TEST_CASE("s3:// URLs") {
  auto p = remote::parse_s3("s3://my-bucket/models/gpt2/model.safetensors");
  CHECK(p.bucket == "my-bucket");
  CHECK(p.key == "models/gpt2/model.safetensors");
  p = remote::parse_s3("s3://my-bucket");
  CHECK(p.key.empty());
  for (const char* bad : {"s3://", "s3://ab/k", "s3://Upper/k", "s3://a b/k"}) CHECK_THROWS_AS(remote::parse_s3(bad), InputError);
}

TEST_CASE("an S3 ListObjectsV2 response, and hostile ones") {
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>b</Name><Prefix>m/</Prefix><KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter>"
      "<IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
      "<Contents><Key>m/a&amp;b.pt</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified><ETag>&quot;x&quot;</ETag>"
      "<Size>3096248301</Size><StorageClass>STANDARD</StorageClass></Contents>"
      "<Contents><Key>m/caf&#xE9;.bin</Key><Size>0</Size></Contents>"
      "<CommonPrefixes><Prefix>m/sub/</Prefix></CommonPrefixes></ListBucketResult>";
  const auto l = remote::parse_s3_listing(xml, "s3://b/m/");
  REQUIRE(l.objects.size() == 2);
  CHECK(l.objects[0].first == "m/a&b.pt");
  CHECK(l.objects[0].second == 3096248301ull);
  CHECK(l.objects[1].first == "m/caf\xc3\xa9.bin");
  CHECK(l.prefixes == std::vector<std::string>{"m/sub/"});
  CHECK(l.truncated);
  CHECK(l.next_token == "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
  for (const char* bad : {"<html>not a listing</html>", "<ListBucketResult><Contents><Key>a</Key></Contents></ListBucketResult>",
                          "<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents></ListBucketResult>",
                          "<ListBucketResult><Contents><Key>a</Key><Size>99999999999999999999999</Size></Contents></ListBucketResult>",
                          "<ListBucketResult><Contents><Key>a</Key><Key>b</Key><Size>1</Size></Contents></ListBucketResult>"})
    CHECK_THROWS_AS(remote::parse_s3_listing(bad, "s3://b/"), InputError);
  // Unterminated elements and stray entities are no crash.
  CHECK_NOTHROW(remote::parse_s3_listing("<ListBucketResult><Contents><Key>a&#;&#x110000;&bogus;&", "s3://b/"));
}

namespace {
// Bytes that arrive on demand, as a remote file's do: records every range asked for.
struct CountingFetcher : Fetcher {
  const uint8_t* base;
  mutable std::set<std::pair<uint64_t, uint64_t>> asked;
  explicit CountingFetcher(const uint8_t* b) : base(b) {}
  void ensure(const uint8_t* p, uint64_t len) const override { asked.insert({static_cast<uint64_t>(p - base), len}); }
};
}  // namespace

TEST_CASE("a view over bytes that arrive on demand asks for exactly what is read") {
  std::string bytes(1 << 16, '\0');
  bytes.replace(100, 4, "PK\x03\x04");
  const auto* base = reinterpret_cast<const uint8_t*>(bytes.data());
  CountingFetcher f(base);
  const ByteView whole(base, bytes.size(), nullptr, 0, &f);
  const ByteView part = whole.sub(100, 1000);  // a sub-view fetches nothing
  CHECK(f.asked.empty());
  CHECK(part.address() == base + 100);
  CHECK(f.asked.empty());
  CHECK(part.starts_with("PK"));
  CHECK(f.asked.count({100, 2}));
  CHECK(part.le<uint32_t>(0) == 0x04034b50u);
  CHECK(f.asked.count({100, 4}));
  (void)part.str(10, 20);
  CHECK(f.asked.count({110, 20}));
  const ByteView held = part.fetched();  // the whole sub-view once; reads through the copy ask nothing
  CHECK(f.asked.count({100, 1000}));
  const size_t before = f.asked.size();
  Cursor c(held);
  for (int i = 0; i < 500; ++i) (void)c.u8();
  CHECK(f.asked.size() == before);
  CHECK(held.fetcher() == nullptr);
  CHECK(part.as_member("data.pkl").fetcher() == &f);
}
