// Autotuning: which of a call site's candidate kernel configs to run for a problem class.
//
// A call site (one kernel family with one candidate list, e.g. the Hopper matmul tile widths)
// names its problem class with an op key "family|dtype|shape class|layout" and asks
// choose()/run() (cuda_timing.h) for a candidate index. The policy, in order:
//   1. a pin whose pattern matches the op key forces its candidate (in every mode);
//   2. autotuning off (the default): the call site's heuristic, so nothing is ever timed;
//   3. on: the cached choice for (device, op key), from memory or the disk cache;
//   4. on, cache miss: time every candidate once (measure_ms), keep the fastest (the heuristic
//      unless another is more than kMargin faster), remember it and write it to disk.
//      Where timing is not allowed (a CUDA graph is being captured) the heuristic is used and
//      nothing is stored.
// This file is the policy and the cache, with no CUDA in it, so the CPU-only build has it too
// and the tests reach it through a fake measure (tileops._C._autotune_choose_for_test).
//
// Cache file: $TILEOPS_CACHE_DIR/autotune.json, else $XDG_CACHE_HOME/tileops/autotune.json,
// else ~/.cache/tileops/autotune.json; the path is read again on each use, so a change of
// TILEOPS_CACHE_DIR takes effect (the memory cache then reloads from the new file). Format:
//   {"version": 1, "entries": {"<device key> :: <op key>": "<candidate name>", ...}}
// The device key names the GPU, its compute capability and SM count and the tileops version and
// git sha, so an entry made on another GPU or by another build is never reused. The file is read
// lazily once, rewritten atomically (temp file + rename) with each new entry merged into what
// is on disk then (so concurrent processes keep each other's entries); an unreadable, corrupt
// or other-format file is ignored with a warning and replaced at the next write.
//
// Environment: TILEOPS_AUTOTUNE=1 starts with autotuning on; TILEOPS_AUTOTUNE_PIN="pattern=name,..."
// adds pins; TILEOPS_AUTOTUNE_VERBOSE=1 prints each measurement to stderr; TILEOPS_CACHE_DIR.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tileops {
namespace autotune {

// A measured candidate replaces the heuristic only when it is faster by more than this fraction:
// timing noise alone should not move a problem class off the heuristic.
constexpr double kMargin = 0.02;

// "a|b|c": the op key of a call site, e.g. op_key({"matmul_sm90", "BFloat16", shape_class(...), "tn"}).
// The first part is the family: it names one call site (one candidate list).
std::string op_key(std::initializer_list<std::string> parts);

// Size bucket of a GEMM-shaped problem: each size rounded up to a power of two (0 and 1 stay),
// "m4096_n4096_k4096", with "_b<batch bucket>" appended when batch > 1. So 4095x4097x4093 and
// 4096x8192x4096 share the class m4096_n8192_k4096; each class is tuned once.
std::string shape_class(int64_t M, int64_t N, int64_t K, int64_t batch = 1);

enum class Source { Heuristic, Pinned, Cached, Measured };
const char* source_name(Source s);

struct Choice {
  int index;
  Source source;
};

// True when choose_with can return anything but the heuristic (autotuning on, or a pin set):
// lets a call site skip building its op key on the fast path. Lock-free.
bool active();

// The policy above. `device` is the device key (cuda_timing.h builds it); measure_ms(i)
// returns candidate i's time in ms, or a non-finite value when i cannot run this problem (it is
// then never picked; when none can run, the heuristic is returned and nothing is stored).
// measure_ms is called without the lock held. Throws c10::Error (TORCH_CHECK) for a pin that
// matches the op key but names no candidate of it, naming the valid candidates.
Choice choose_with(const std::string& device, const std::string& op_key, const std::vector<std::string>& names,
                   int heuristic, const std::function<double(int)>& measure_ms, bool can_measure = true);

// A switch from the environment: 1/on/true/yes or 0/off/false/no (any case); `unset` where the
// variable is empty or not set, and (with a warning) where it is anything else. Shared by the
// TILEOPS_* switches (TILEOPS_AUTOTUNE, TILEOPS_AUTOTUNE_VERBOSE, TILEOPS_STREAMS).
bool env_flag(const char* name, bool unset = false);

// Mode: off by default, TILEOPS_AUTOTUNE=1 turns it on at start-up.
void set_enabled(bool on);
bool enabled();

// Pins: `pattern` matches an op key when it equals the key's family (the part before the first
// '|') or glob-matches the whole key ('*' any run of characters, '?' one). The most recent
// matching pin wins; pinning a pattern again replaces its candidate.
void pin(const std::string& pattern, const std::string& candidate);
void unpin(const std::string& pattern);  // no-op when not pinned
void unpin_all();
std::vector<std::pair<std::string, std::string>> pins();  // oldest first
// Whether a choice for op_key could be other than its heuristic's: autotuning is on or a pin
// matches it. For a call site with a fast path outside its family's candidates, which it takes
// only where the family is not steered.
bool steered(const std::string& op_key);

// Cache management. clear(memory): forget every choice in this process (the disk file is not
// read again, so each class is re-measured and its new choice written over the old one);
// clear(disk): delete the cache file. reload(): drop the memory cache and read the file again.
void clear(bool memory, bool disk);
void reload();
std::string cache_path();                           // "" when no directory can be found (no $HOME)
std::map<std::string, std::string> entries();       // full key -> candidate name, as cached now
std::string full_key(const std::string& device, const std::string& op_key);  // "<device> :: <op key>"

// The state of a fresh process: mode, verbosity and pins read again from the environment, the
// memory cache dropped (the file is read at the next use). For tests.
void reset_from_env();

bool glob_match(const char* pattern, const char* text);  // the pins' glob: '*' any run, '?' one character

// Each family's candidates, as its call site lists them: the call site registers its list at load
// time with a namespace-scope Family beside it (names() is called on a query, after static
// initialization), so tileops.autotune.candidates answers before any call, and the tests and
// probes read the list instead of restating it. A build without CUDA registers none.
struct Family {
  Family(const char* family, std::vector<std::string> (*names)());
};
std::vector<std::string> families();                            // registered, sorted
std::vector<std::string> candidates(const std::string& family);  // TORCH_CHECK: a registered family

}  // namespace autotune
}  // namespace tileops
