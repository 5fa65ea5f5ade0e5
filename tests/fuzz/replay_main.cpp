// DLH — every fuzz target's corpus replayed without libFuzzer, in `make check` (issue 41).
//
// libFuzzer's targets need clang and minutes; their corpora (the seeds, and every input a
// fuzzing run found and we kept) are regression tests that need neither. make check builds
// each target's LLVMFuzzerTestOneInput with the project's compiler and flags under a name of
// its own (-DLLVMFuzzerTestOneInput=DlhFuzz_<target>; DLH_FUZZ_TARGETS lists them) into this
// one program, which feeds it every file of tests/fuzz/corpus/<target>/. A target's own
// checks abort on a finding; the input being replayed is then named on stderr.
//
//   fuzz_replay CORPUS_ROOT [TARGET...]    (default: every target)
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define X(name) extern "C" int DlhFuzz_##name(const uint8_t* data, size_t size);
DLH_FUZZ_TARGETS
#undef X

namespace {

struct Target {
  const char* name;
  int (*run)(const uint8_t*, size_t);
};

const Target kTargets[] = {
#define X(name) {#name, DlhFuzz_##name},
    DLH_FUZZ_TARGETS
#undef X
};

char g_current[4096];  // the input being replayed, for the signal handler

void OnFatal(int sig) {
  const char* head = "fuzz_replay: this input failed: ";
  (void)!write(2, head, std::strlen(head));
  (void)!write(2, g_current, std::strlen(g_current));
  (void)!write(2, "\n", 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2) {
    std::fprintf(stderr, "usage: fuzz_replay CORPUS_ROOT [TARGET...]\n");
    return 2;
  }
  std::vector<std::string> wanted(argv + 2, argv + argc);
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, OnFatal);
  int total = 0, targets = 0;
  for (const Target& t : kTargets) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), t.name) == wanted.end())
      continue;
    const fs::path dir = fs::path(argv[1]) / t.name;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      std::fprintf(stderr, "fuzz_replay: %s: no corpus folder %s\n", t.name, dir.c_str());
      return 1;
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      std::fprintf(stderr, "fuzz_replay: %s: the corpus %s is empty\n", t.name, dir.c_str());
      return 1;
    }
    for (const fs::path& f : files) {
      std::snprintf(g_current, sizeof g_current, "%s", f.c_str());
      std::ifstream in(f, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      t.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    }
    std::printf("  ok: %s: %zu inputs replayed\n", t.name, files.size());
    total += int(files.size());
    ++targets;
  }
  if (targets == 0) {
    std::fprintf(stderr, "fuzz_replay: no such target\n");
    return 1;
  }
  std::printf("fuzz_replay: %d inputs of %d targets, no finding\n", total, targets);
  return 0;
}
