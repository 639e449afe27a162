// Smoke driver for the fuzz targets in the ordinary (g++) test build: feeds
// every seed-corpus file, then deterministic mutations of them, to
// LLVMFuzzerTestOneInput. No coverage feedback and no sanitizers: it only
// proves, on every CI run, that the targets' invariants hold on the seeds
// and on a few thousand hostile variants (byte flips, truncations, inserted
// NaN / Inf / huge numbers / garbage, repeated fields). The real search is
// scripts/fuzz.sh with clang's libFuzzer.
//
// Usage: <target>_fuzz_smoke CORPUS_DIR [MUTATIONS]
//        <target>_fuzz_smoke FILE        (replays one input, no mutations)
// With DPC_FUZZ_SMOKE_KEEP_GOING=1 a failed invariant is counted instead of
// ending the run (its abort jumps back to the driver, leaking whatever the
// input had allocated): a survey of findings and of the run time the
// targets will take once they pass. CI never sets it.
// On a failed invariant the target aborts; this driver first saves the
// input to ./fuzz-smoke-crash-<pid> so it can be replayed (and added to the
// corpus as a regression).

#include <fcntl.h>
#include <setjmp.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"

namespace {

constexpr int kDefaultMutations = 3000;

// The input being run, for the abort handler.
const std::string* g_current = nullptr;

void SaveCurrentInput(int signal_number) {
  if (g_current != nullptr) {
    char name[64];
    std::snprintf(name, sizeof(name), "fuzz-smoke-crash-%d", static_cast<int>(getpid()));
    const int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t written = write(fd, g_current->data(), g_current->size());
      (void)written;
      close(fd);
      const char message[] = "fuzz smoke: failing input saved to ./fuzz-smoke-crash-<pid>\n";
      written = write(2, message, sizeof(message) - 1);
      (void)written;
    }
  }
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

// splitmix64: a fixed, portable sequence, so every run tries the same inputs.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }

 private:
  uint64_t state_;
};

std::string DoubleBytes(double value) {
  std::string bytes(sizeof(double), '\0');
  std::memcpy(bytes.data(), &value, sizeof(double));
  return bytes;
}

// Hostile tokens for text (CSV, JSON) and binary (protobuf) inputs alike.
std::vector<std::string> Dictionary() {
  std::vector<std::string> tokens = {
      "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "-Infinity", "\"NaN\"", "\"Infinity\"",
      "1e308", "-1e308", "1e309", "1e-320", "4.9e-324", "-0", "0x1p1023",
      "99999999999999999999999", "-9223372036854775809", "18446744073709551616",
      "\"", "\"\"", ",", ";", "\n", "\r\n", "\r", std::string(1, '\0'), "\xff\xfe", "\xc3\x28",
      " ", "?", "{", "}", "[", "]", ":", "null", "true",
      "\"columns\":[", "\"categories\":[\"a\",\"a\"]", "\"aliases\":{\"x\":\"y\"}",
      "\"type\":\"NUMERIC\"", "\"type\":\"CATEGORICAL\"", "\"lower\":", "\"upper\":",
      "\"label\":", "\"nullable\":true", "\"integer\":true",
      std::string(300, 'A'),
  };
  // Doubles as raw little-endian bytes (packed repeated double fields).
  for (double v : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::max(),
                   std::numeric_limits<double>::denorm_min(), 1e7, -0.0}) {
    tokens.push_back(DoubleBytes(v));
  }
  // Protobuf varints: the largest, and a length that claims far too much.
  tokens.push_back(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10));
  tokens.push_back(std::string("\x12\xff\xff\xff\xff\x0f", 6));
  // Field keys of SubmitReportsRequest / Report / TableSchema.
  tokens.push_back(std::string("\x0a\x10", 2) + std::string(16, '\x11'));  // 16-byte id
  tokens.push_back("\x12\x08");
  tokens.push_back(std::string("\x0a\x00", 2));
  return tokens;
}

std::string Mutate(const std::string& input, const std::vector<std::string>& corpus,
                   const std::vector<std::string>& dictionary, Rng* rng) {
  std::string out = input;
  const int steps = 1 + static_cast<int>(rng->Below(4));
  for (int s = 0; s < steps; ++s) {
    switch (rng->Below(9)) {
      case 0:  // flip a bit
        if (!out.empty()) out[rng->Below(out.size())] ^= static_cast<char>(1u << rng->Below(8));
        break;
      case 1:  // random byte
        if (!out.empty()) out[rng->Below(out.size())] = static_cast<char>(rng->Below(256));
        break;
      case 2:  // truncate
        out.resize(rng->Below(out.size() + 1));
        break;
      case 3:
      case 4: {  // insert a hostile token
        const std::string& token = dictionary[rng->Below(dictionary.size())];
        out.insert(rng->Below(out.size() + 1), token);
        break;
      }
      case 5: {  // overwrite with a hostile token
        const std::string& token = dictionary[rng->Below(dictionary.size())];
        const size_t at = rng->Below(out.size() + 1);
        out.replace(at, std::min(token.size(), out.size() - at), token);
        break;
      }
      case 6: {  // repeat a slice (repeated fields, duplicated rows)
        if (out.empty()) break;
        const size_t begin = rng->Below(out.size());
        const size_t length = 1 + rng->Below(std::min<size_t>(out.size() - begin, 64));
        const std::string slice = out.substr(begin, length);
        const int times = 1 + static_cast<int>(rng->Below(8));
        for (int t = 0; t < times; ++t) out.insert(begin, slice);
        break;
      }
      case 7: {  // delete a slice
        if (out.empty()) break;
        const size_t begin = rng->Below(out.size());
        out.erase(begin, 1 + rng->Below(std::min<size_t>(out.size() - begin, 32)));
        break;
      }
      default: {  // append (a serialized protobuf appended to itself merges
                  // as repeated fields) or splice another seed
        const std::string& other = corpus[rng->Below(corpus.size())];
        out += rng->Below(2) == 0 ? input : other;
        break;
      }
    }
  }
  // Keep inputs as small as libFuzzer's default limit.
  if (out.size() > 8192) out.resize(8192);
  return out;
}

bool g_keep_going = false;
int g_failures = 0;
sigjmp_buf g_resume;

void ResumeAfterAbort(int) { siglongjmp(g_resume, 1); }

void Run(const std::string& input) {
  if (g_keep_going) {
    std::signal(SIGABRT, ResumeAfterAbort);
    if (sigsetjmp(g_resume, 1) == 0) {
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    } else {
      ++g_failures;
    }
    return;
  }
  g_current = &input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  g_current = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS]\n", argv[0]);
    return 2;
  }
  const int mutations = argc > 2 ? std::atoi(argv[2]) : kDefaultMutations;
  const char* keep_going = std::getenv("DPC_FUZZ_SMOKE_KEEP_GOING");
  g_keep_going = keep_going != nullptr && std::string(keep_going) == "1";
  std::signal(SIGABRT, SaveCurrentInput);
  std::signal(SIGSEGV, SaveCurrentInput);

  std::vector<std::filesystem::path> paths;
  std::error_code error;
  if (std::filesystem::is_regular_file(argv[1], error)) {
    // Replay of one input (a saved crash or a seed).
    std::ifstream file(argv[1], std::ios::binary);
    const std::string input{std::istreambuf_iterator<char>(file),
                            std::istreambuf_iterator<char>()};
    std::signal(SIGABRT, SIG_DFL);
    Run(input);
    std::printf("%s ran with every invariant holding\n", argv[1]);
    return 0;
  }
  for (const auto& entry : std::filesystem::directory_iterator(argv[1], error)) {
    if (entry.is_regular_file()) paths.push_back(entry.path());
  }
  if (error || paths.empty()) {
    std::fprintf(stderr, "no seed files in '%s'\n", argv[1]);
    return 2;
  }
  std::sort(paths.begin(), paths.end());  // directory order is not stable
  std::vector<std::string> corpus;
  for (const auto& path : paths) {
    std::ifstream file(path, std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }

  Run(std::string());
  for (const auto& seed : corpus) Run(seed);
  const std::vector<std::string> dictionary = Dictionary();
  Rng rng(0x5eed);
  for (int i = 0; i < mutations; ++i) {
    const std::string& seed = corpus[i % corpus.size()];
    Run(Mutate(seed, corpus, dictionary, &rng));
  }
  if (g_keep_going) {
    std::printf("%zu seeds and %d mutations ran; %d failed\n", corpus.size(), mutations,
                g_failures);
    return g_failures == 0 ? 0 : 1;
  }
  std::printf("%zu seeds and %d mutations ran with every invariant holding\n", corpus.size(),
              mutations);
  return 0;
}
