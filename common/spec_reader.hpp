// DLH — reading one spec JSON object field by field, with messages that name the file and
// the field's full path ("spec.json: optimizer.lr: must be a number, got \"x\""). Internal to
// the spec's parsers (spec.cpp, spec_sync.cpp).
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.hpp"
#include "common/json_parse.hpp"
#include "common/spec.hpp"

namespace dlh {
namespace spec_reader {

using nlohmann::json;

// ---------------------------------------------------------------- messages

// A JSON value as shown after "got": compact, ASCII, one line, at most ~60 characters.

inline std::string Quoted(const std::string& s) {
  return json(s).dump(-1, ' ', true, json::error_handler_t::replace);
}

// Numbers in messages, written the way JSON would write them (0.05, 1e-05, 3).
inline std::string Num(double d) { return json(d).dump(); }

// Joins "optimizer" + "lr" -> "optimizer.lr"; "" + "lr" -> "lr".
inline std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// Throws "<origin>: <path>: <problem>" (or "<origin>: <problem>" at the top level).
[[noreturn]] inline void Fail(const std::string& origin, const std::string& path,
                              const std::string& problem) {
  std::string msg = origin.empty() ? std::string("spec") : origin;
  msg += ": ";
  if (!path.empty()) msg += path + ": ";
  msg += problem;
  // Messages are one line, whatever the origin's name holds.
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  std::replace(msg.begin(), msg.end(), '\r', ' ');
  throw SpecError(msg);
}

// ---------------------------------------------------------------- field access

// One JSON object being read: checks keys, types and ranges, with messages that name
// the field by its full path.
class Obj {
 public:
  Obj(const json& j, const std::string& origin, std::string path)
      : j_(j), origin_(origin), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  std::string at(const std::string& key) const { return Join(path_, key); }
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    Fail(origin_, key.empty() ? path_ : at(key), problem);
  }

  bool has(const char* key) const { return j_.contains(key); }
  const json& get(const char* key) const { return j_.at(key); }

  // Rejects any key not in `allowed`, in the order the file gives them.
  void only(std::initializer_list<const char*> allowed) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || it.key() == a;
      if (!ok) Fail(origin_, path_, "unknown key " + Quoted(it.key()));
    }
  }

  const json& required(const char* key) const {
    if (!has(key)) fail(key, "required");
    return get(key);
  }

  // An integer in [min, INT_MAX]. Floats (3.5, and 3.0 too) are rejected.
  int integer(const char* key, int min, bool req, int def) const {
    if (!has(key)) {
      if (req) fail(key, "required");
      return def;
    }
    const json& v = get(key);
    std::string want = min == 1   ? "must be a positive integer"
                       : min == 0 ? "must be a non-negative integer"
                                  : "must be an integer >= " + std::to_string(min);
    if (!v.is_number_integer()) fail(key, want + ", got " + ShownJsonValue(v));
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > uint64_t(INT_MAX))
        fail(key, "must be at most " + std::to_string(INT_MAX) + ", got " + ShownJsonValue(v));
      int x = int(v.get<uint64_t>());
      if (x < min) fail(key, want + ", got " + ShownJsonValue(v));
      return x;
    }
    int64_t x = v.get<int64_t>();
    if (x < min) fail(key, want + ", got " + ShownJsonValue(v));
    if (x > INT_MAX)
      fail(key, "must be at most " + std::to_string(INT_MAX) + ", got " + ShownJsonValue(v));
    return int(x);
  }

  uint64_t unsigned64(const char* key, uint64_t def) const {
    if (!has(key)) return def;
    const json& v = get(key);
    if (!v.is_number_unsigned())
      fail(key, "must be a non-negative integer, got " + ShownJsonValue(v));
    return v.get<uint64_t>();
  }

  // Any JSON number (integer or not).
  double number(const char* key, bool req, double def) const {
    if (!has(key)) {
      if (req) fail(key, "required");
      return def;
    }
    const json& v = get(key);
    if (!v.is_number()) fail(key, "must be a number, got " + ShownJsonValue(v));
    double d = v.get<double>();
    if (!std::isfinite(d)) fail(key, "must be a finite number, got " + ShownJsonValue(v));
    return d;
  }

  bool boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    const json& v = get(key);
    if (!v.is_boolean()) fail(key, "must be true or false, got " + ShownJsonValue(v));
    return v.get<bool>();
  }

  std::string string(const char* key, bool req, const std::string& def) const {
    if (!has(key)) {
      if (req) fail(key, "required");
      return def;
    }
    const json& v = get(key);
    if (!v.is_string()) fail(key, "must be a string, got " + ShownJsonValue(v));
    return v.get<std::string>();
  }

  // A string that must be one of `choices`; returns its index.
  size_t choice(const char* key, std::initializer_list<const char*> choices, bool req,
                size_t def) const {
    if (!has(key)) {
      if (req) fail(key, "required");
      return def;
    }
    const json& v = get(key);
    size_t i = 0;
    if (v.is_string())
      for (const char* c : choices) {
        if (v.get<std::string>() == c) return i;
        ++i;
      }
    std::string list;
    for (const char* c : choices) list += (list.empty() ? "" : ", ") + Quoted(c);
    fail(key, "must be one of " + list + ", got " + ShownJsonValue(v));
  }

  // The value of `key` (already known to be a number) for a range message.
  std::string shown(const char* key) const { return ShownJsonValue(get(key)); }

 private:
  const json& j_;
  const std::string& origin_;
  std::string path_;
};

// A nested object; "must be an object" when it is something else.
inline const json& RequireObject(const json& v, const std::string& origin,
                                 const std::string& path) {
  if (!v.is_object()) Fail(origin, path, "must be an object, got " + ShownJsonValue(v));
  return v;
}

// The spec's "sync" object (spec_sync.cpp).
SyncSpec ParseSync(const json& value, const std::string& origin);
// The spec's "parallel", checked against its layers and its sync (spec_sync.cpp).
ParallelSpec ParseParallel(const json& value, const std::string& origin, const TrainSpec& spec);

}  // namespace spec_reader
}  // namespace dlh
