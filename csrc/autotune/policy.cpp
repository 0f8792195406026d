// Autotuning policy, pins and the disk cache (see policy.h); no CUDA here.
#include "autotune/policy.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#ifndef _WIN32
#include <unistd.h>
#endif

namespace tileops {
namespace autotune {
namespace {

constexpr int kFormatVersion = 1;
using Map = std::map<std::string, std::string>;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

bool env_flag(const char* name, bool unset) {
  std::string v = env(name);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (v.empty()) return unset;
  if (v == "1" || v == "on" || v == "true" || v == "yes") return true;
  if (v == "0" || v == "off" || v == "false" || v == "no") return false;
  TORCH_WARN("tileops: ", name, "='", v, "' is not one of 0/1/on/off/true/false; taking it as ", unset ? "on" : "off");
  return unset;
}

namespace {

// ---- a JSON reader and writer for {"version": N, "entries": {"string": "string", ...}} ----

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += ch;  // UTF-8 passes through
    }
  }
  return out + "\"";
}

class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : s_(text) {}

  // Fills `out` from a cache document; false (with `err`) for anything else.
  bool cache(Map& out, int& version, std::string& err) {
    version = -1;
    bool have_entries = false;
    if (!expect('{')) return fail(err, "not a JSON object");
    if (!peek('}')) {
      do {
        std::string key;
        if (!string(key) || !expect(':')) return fail(err, "bad object key");
        if (key == "version") {
          double v = 0;
          if (!number(v) || v != std::floor(v)) return fail(err, "\"version\" is not an integer");
          version = int(v);
        } else if (key == "entries") {
          if (!entries(out)) return fail(err, "\"entries\" is not an object of strings");
          have_entries = true;
        } else if (!skip_value()) {
          return fail(err, "bad value");
        }
      } while (expect(','));
      if (!expect('}')) return fail(err, "bad object");
    } else {
      expect('}');
    }
    ws();
    if (i_ != s_.size()) return fail(err, "trailing characters");
    if (version < 0 || !have_entries) return fail(err, "no \"version\" or no \"entries\"");
    return true;
  }

 private:
  bool fail(std::string& err, const char* what) {
    err = std::string(what) + " at byte " + std::to_string(i_);
    return false;
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool peek(char c) {
    ws();
    return i_ < s_.size() && s_[i_] == c;
  }
  bool expect(char c) {
    if (!peek(c)) return false;
    ++i_;
    return true;
  }
  bool entries(Map& out) {
    if (!expect('{')) return false;
    if (expect('}')) return true;
    do {
      std::string k, v;
      if (!string(k) || !expect(':') || !string(v)) return false;
      out[k] = v;
    } while (expect(','));
    return expect('}');
  }
  bool hex4(unsigned& cp) {
    if (i_ + 4 > s_.size()) return false;
    cp = 0;
    for (int n = 0; n < 4; ++n) {
      const char c = s_[i_++];
      cp <<= 4;
      if (c >= '0' && c <= '9') cp |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f') cp |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') cp |= unsigned(c - 'A' + 10);
      else return false;
    }
    return true;
  }
  static void utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }
  bool string(std::string& out) {
    if (!expect('"')) return false;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
            unsigned lo = 0;
            if (i_ + 2 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') return false;
            i_ += 2;
            if (!hex4(lo) || lo < 0xDC00 || lo >= 0xE000) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          utf8(out, cp);
          break;
        }
        default: return false;
      }
    }
    return false;
  }
  bool number(double& v) {
    ws();
    const size_t start = i_;
    while (i_ < s_.size() && std::strchr("+-0123456789.eE", s_[i_]) != nullptr) ++i_;
    if (i_ == start) return false;
    const std::string t = s_.substr(start, i_ - start);
    char* end = nullptr;
    v = std::strtod(t.c_str(), &end);
    return end == t.c_str() + t.size() && std::isfinite(v);
  }
  bool literal(const char* word) {
    ws();
    const size_t n = std::strlen(word);
    if (s_.compare(i_, n, word) != 0) return false;
    i_ += n;
    return true;
  }
  bool skip_value(int depth = 0) {  // any JSON value, for keys this version does not know
    if (depth > 64) return false;
    std::string tmp;
    double d = 0;
    if (peek('"')) return string(tmp);
    if (expect('{')) {
      if (expect('}')) return true;
      do {
        tmp.clear();
        if (!string(tmp) || !expect(':') || !skip_value(depth + 1)) return false;
      } while (expect(','));
      return expect('}');
    }
    if (expect('[')) {
      if (expect(']')) return true;
      do {
        if (!skip_value(depth + 1)) return false;
      } while (expect(','));
      return expect(']');
    }
    return literal("true") || literal("false") || literal("null") || number(d);
  }

  const std::string& s_;
  size_t i_ = 0;
};

std::string render(const Map& m) {
  std::string out = "{\n  \"version\": " + std::to_string(kFormatVersion) + ",\n  \"entries\": {";
  bool first = true;
  for (const auto& kv : m) {
    out += first ? "\n    " : ",\n    ";
    out += json_quote(kv.first) + ": " + json_quote(kv.second);
    first = false;
  }
  return out + (m.empty() ? "}\n}\n" : "\n  }\n}\n");
}

enum class ReadResult { Ok, Missing, Bad };

// Reads the cache file at `path` into `out`; `why` says what is wrong when it is Bad.
ReadResult read_file(const std::string& path, Map& out, std::string& why) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return ReadResult::Missing;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot be opened";
    return ReadResult::Bad;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  Map m;
  int version = 0;
  std::string err;
  if (!JsonReader(buf.str()).cache(m, version, err)) {
    why = "is not a tileops autotune cache (" + err + ")";
    return ReadResult::Bad;
  }
  if (version != kFormatVersion) {
    why = "has format version " + std::to_string(version) + ", this tileops reads version " +
          std::to_string(kFormatVersion);
    return ReadResult::Bad;
  }
  out.swap(m);
  return ReadResult::Ok;
}

// Atomic replace: a reader sees the old file or the new one, never a half-written one.
bool write_file(const std::string& path, const Map& m, std::string& why) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  static std::atomic<unsigned> counter{0};
  std::ostringstream tmp;
  tmp << path << ".tmp."
#ifndef _WIN32
      << ::getpid() << "."
#endif
      << std::hash<std::thread::id>()(std::this_thread::get_id()) % 100000 << "." << counter++;
  {
    std::ofstream out(tmp.str(), std::ios::binary | std::ios::trunc);
    out << render(m);
    out.flush();
    if (!out) {
      why = "cannot write " + tmp.str();
      out.close();
      fs::remove(tmp.str(), ec);
      return false;
    }
  }
  fs::rename(tmp.str(), p, ec);
  if (ec) {
    why = "cannot rename " + tmp.str() + " to it: " + ec.message();
    fs::remove(tmp.str(), ec);
    return false;
  }
  return true;
}

// ---- process state ----

struct State {
  std::mutex mu;  // guards everything below but the atomics
  std::atomic<bool> on{false};
  std::atomic<int> npins{0};
  std::vector<std::pair<std::string, std::string>> pin_list;  // oldest first
  Map cache;                // full key -> candidate name
  bool loaded = false;      // `cache` holds the file at `loaded_path` (plus what was measured since)
  std::string loaded_path;
  bool verbose = false;

  State() { from_env(); }

  // The start-up state: mode, verbosity and pins from the environment, nothing loaded.
  void from_env() {
    on = env_flag("TILEOPS_AUTOTUNE");
    verbose = env_flag("TILEOPS_AUTOTUNE_VERBOSE");
    pin_list.clear();
    std::stringstream ss(env("TILEOPS_AUTOTUNE_PIN"));
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item.empty()) continue;
      const size_t eq = item.rfind('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
        TORCH_WARN("tileops autotune: ignoring '", item, "' in TILEOPS_AUTOTUNE_PIN (expected pattern=candidate)");
        continue;
      }
      pin_list.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    }
    npins = int(pin_list.size());
    cache.clear();
    loaded = false;
    loaded_path.clear();
  }
};

State& state() {
  static State* s = new State();  // never destroyed: call sites may run during static destruction
  return *s;
}

// With s.mu held: make `cache` reflect the file at the current cache path.
void ensure_loaded(State& s) {
  const std::string path = cache_path();
  if (s.loaded && path == s.loaded_path) return;
  s.cache.clear();
  s.loaded = true;
  s.loaded_path = path;
  if (path.empty()) return;
  std::string why;
  if (read_file(path, s.cache, why) == ReadResult::Bad)
    TORCH_WARN("tileops autotune: ignoring the cache file ", path, ": it ", why,
               ". It will be replaced when a new choice is stored.");
}

// With s.mu held: remember a choice and merge it into the file as it is now.
void store(State& s, const std::string& key, const std::string& name) {
  s.cache[key] = name;
  if (s.loaded_path.empty()) return;
  Map disk;
  std::string why;
  read_file(s.loaded_path, disk, why);  // a bad file was reported when loaded; it is replaced
  disk[key] = name;
  if (!write_file(s.loaded_path, disk, why))
    TORCH_WARN("tileops autotune: could not write the cache file ", s.loaded_path, " (", why,
               "); the choice is kept for this process only");
}

int find(const std::vector<std::string>& names, const std::string& name) {
  const auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : int(it - names.begin());
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

bool pin_matches(const std::string& pattern, const std::string& key) {
  return pattern == key.substr(0, key.find('|')) || glob_match(pattern.c_str(), key.c_str());
}

}  // namespace

std::string op_key(std::initializer_list<std::string> parts) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += '|';
    out += p;
  }
  return out;
}

std::string shape_class(int64_t M, int64_t N, int64_t K, int64_t batch) {
  auto bucket = [](int64_t x) {
    if (x <= 1) return x;
    int64_t p = 1;
    while (p < x) p <<= 1;
    return p;
  };
  std::string out = "m" + std::to_string(bucket(M)) + "_n" + std::to_string(bucket(N)) + "_k" + std::to_string(bucket(K));
  if (batch > 1) out += "_b" + std::to_string(bucket(batch));
  return out;
}

const char* source_name(Source s) {
  switch (s) {
    case Source::Heuristic: return "heuristic";
    case Source::Pinned: return "pinned";
    case Source::Cached: return "cached";
    case Source::Measured: return "measured";
  }
  return "?";
}

bool glob_match(const char* p, const char* t) {
  const char* star = nullptr;  // last '*' seen, and where the text stood then
  const char* mark = nullptr;
  while (*t) {
    if (*p == '*') {
      star = p++;
      mark = t;
    } else if (*p && (*p == '?' || *p == *t)) {
      ++p;
      ++t;
    } else if (star) {  // let the last '*' swallow one more character
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (*p == '*') ++p;
  return *p == '\0';
}

std::string full_key(const std::string& device, const std::string& op_key) { return device + " :: " + op_key; }

bool active() {
  const State& s = state();
  return s.on.load(std::memory_order_relaxed) || s.npins.load(std::memory_order_relaxed) > 0;
}

Choice choose_with(const std::string& device, const std::string& op_key, const std::vector<std::string>& names,
                   int heuristic, const std::function<double(int)>& measure_ms, bool can_measure) {
  TORCH_CHECK(!names.empty(), "tileops autotune: ", op_key, " has no candidates");
  TORCH_CHECK(heuristic >= 0 && heuristic < int(names.size()), "tileops autotune: ", op_key, ": heuristic index ",
              heuristic, " is not in [0, ", names.size(), ")");
  State& s = state();
  if (s.npins.load() > 0) {
    std::pair<std::string, std::string> hit;
    bool found = false;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      for (auto it = s.pin_list.rbegin(); it != s.pin_list.rend() && !found; ++it)
        if (pin_matches(it->first, op_key)) hit = *it, found = true;
    }
    if (found) {
      const int idx = find(names, hit.second);
      TORCH_CHECK(idx >= 0, "tileops autotune: the pin '", hit.first, "' -> '", hit.second, "' matches ", op_key,
                  ", whose candidates are ", join(names),
                  ". Pin one of these, or narrow the pattern (tileops.autotune.unpin to remove it).");
      return {idx, Source::Pinned};
    }
  }
  if (!s.on.load()) return {heuristic, Source::Heuristic};

  const std::string key = full_key(device, op_key);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ensure_loaded(s);
    const auto it = s.cache.find(key);
    if (it != s.cache.end()) {
      const int idx = find(names, it->second);
      if (idx >= 0) return {idx, Source::Cached};  // else the candidate list changed: measure again
    }
  }
  if (!can_measure) return {heuristic, Source::Heuristic};

  for (size_t i = 0; i < names.size(); ++i)
    TORCH_CHECK(find(names, names[i]) == int(i) && !names[i].empty(), "tileops autotune: ", op_key,
                ": candidate names must be unique and non-empty, got ", join(names));
  std::vector<double> ms(names.size());
  int best = -1;
  for (size_t i = 0; i < names.size(); ++i) {
    ms[i] = measure_ms(int(i));
    if (std::isfinite(ms[i]) && (best < 0 || ms[i] < ms[best])) best = int(i);
  }
  if (best < 0) return {heuristic, Source::Heuristic};  // nothing ran: let the real launch report why
  if (std::isfinite(ms[heuristic]) && ms[heuristic] <= ms[best] * (1 + kMargin)) best = heuristic;

  std::lock_guard<std::mutex> lock(s.mu);
  if (s.verbose) {
    std::string line = "tileops autotune: " + key + ":";
    for (size_t i = 0; i < names.size(); ++i) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), " %.4g ms", ms[i]);
      line += " " + names[i] + (int(i) == heuristic ? " (heuristic)" : "") + buf;
    }
    std::fprintf(stderr, "%s -> %s\n", line.c_str(), names[best].c_str());
  }
  ensure_loaded(s);
  store(s, key, names[best]);
  return {best, Source::Measured};
}

void set_enabled(bool on) { state().on = on; }
bool enabled() { return state().on.load(); }

namespace {
// Filled during static initialization (single-threaded), read-only afterwards.
std::map<std::string, std::vector<std::string> (*)()>& family_registry() {
  static std::map<std::string, std::vector<std::string> (*)()> r;
  return r;
}
}  // namespace

Family::Family(const char* family, std::vector<std::string> (*names)()) { family_registry()[family] = names; }

std::vector<std::string> families() {
  std::vector<std::string> v;
  for (const auto& kv : family_registry()) v.push_back(kv.first);
  return v;
}

std::vector<std::string> candidates(const std::string& family) {
  const auto it = family_registry().find(family);
  if (it == family_registry().end()) {
    std::string known;
    for (const std::string& f : families()) known += (known.empty() ? "" : ", ") + f;
    TORCH_CHECK(false, "tileops autotune: no family '", family, "'; this build has: ",
                known.empty() ? "none (built without CUDA)" : known);
  }
  return it->second();
}

void pin(const std::string& pattern, const std::string& candidate) {
  TORCH_CHECK(!pattern.empty() && !candidate.empty(),
              "tileops.autotune.pin: pattern and candidate must be non-empty strings");
  // A pattern that names a family is checked against its candidates now (a glob where it first
  // matches a call: choose_with)
  const auto fam = family_registry().find(pattern);
  if (fam != family_registry().end()) {
    const std::vector<std::string> names = fam->second();
    if (std::find(names.begin(), names.end(), candidate) == names.end()) {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      TORCH_CHECK_VALUE(false, "tileops.autotune.pin: family '", pattern, "' has no candidate '", candidate,
                        "'; its candidates are ", list);
    }
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto& v = s.pin_list;
  v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& p) { return p.first == pattern; }), v.end());
  v.emplace_back(pattern, candidate);
  s.npins = int(v.size());
}

void unpin(const std::string& pattern) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto& v = s.pin_list;
  v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& p) { return p.first == pattern; }), v.end());
  s.npins = int(v.size());
}

void unpin_all() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.pin_list.clear();
  s.npins = 0;
}

std::vector<std::pair<std::string, std::string>> pins() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.pin_list;
}

bool steered(const std::string& op_key) {
  State& s = state();
  if (s.on.load()) return true;
  if (s.npins.load() == 0) return false;
  std::lock_guard<std::mutex> lock(s.mu);
  for (const auto& p : s.pin_list)
    if (pin_matches(p.first, op_key)) return true;
  return false;
}

void clear(bool memory, bool disk) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const std::string path = cache_path();
  if (memory) {
    s.cache.clear();
    s.loaded = true;  // do not read the file again: re-measure, and overwrite its entries
    s.loaded_path = path;
  }
  if (disk && !path.empty()) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    TORCH_CHECK(!ec, "tileops.autotune.clear: cannot delete ", path, ": ", ec.message());
  }
}

void reset_from_env() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.from_env();
}

void reload() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.loaded = false;
  ensure_loaded(s);
}

std::string cache_path() {
  namespace fs = std::filesystem;
  std::string dir = env("TILEOPS_CACHE_DIR");
  if (dir.empty()) {
    const std::string xdg = env("XDG_CACHE_HOME"), home = env("HOME");
    if (!xdg.empty()) dir = (fs::path(xdg) / "tileops").string();
    else if (!home.empty()) dir = (fs::path(home) / ".cache" / "tileops").string();
    else return "";
  }
  return (fs::path(dir) / "autotune.json").string();
}

std::map<std::string, std::string> entries() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ensure_loaded(s);
  return s.cache;
}

}  // namespace autotune
}  // namespace tileops
