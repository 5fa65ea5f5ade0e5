// DLH — strict JSON parsing (see json_parse.hpp).
#include "common/json_parse.hpp"

#include <functional>
#include <set>
#include <vector>

namespace dlh {
namespace {

using nlohmann::json;

// Thrown by the callback to stop the parser at the first level beyond kMaxJsonDepth,
// before the deep value exists.
struct TooDeep {};

// A parser callback that records the first duplicate key and the path of its object, and
// stops the parse when nesting goes beyond kMaxJsonDepth.
class DuplicateKeyFinder {
 public:
  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (size_t(depth) >= kMaxJsonDepth) throw TooDeep{};
        stack_.push_back(Level{event == json::parse_event_t::array_start, 0, {}, {}});
        break;
      case json::parse_event_t::key: {
        Level& top = stack_.back();
        top.key = parsed.get<std::string>();
        if (!top.seen.insert(top.key).second && !found_) {
          found_ = true;
          key_ = top.key;
          path_ = PathOfInnermost();
        }
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack_.pop_back();
        ChildDone();
        break;
      case json::parse_event_t::value:
        ChildDone();
        break;
    }
    return true;
  }
  bool found() const { return found_; }
  const std::string& key() const { return key_; }
  const std::string& path() const { return path_; }

 private:
  struct Level {
    bool array;
    size_t index;
    std::string key;
    std::set<std::string> seen;
  };
  void ChildDone() {
    if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
  }
  std::string PathOfInnermost() const {
    std::string p;
    for (size_t i = 0; i + 1 < stack_.size(); ++i) {
      if (stack_[i].array)
        p += "[" + std::to_string(stack_[i].index) + "]";
      else
        p += (p.empty() ? "" : ".") + stack_[i].key;
    }
    return p;
  }
  std::vector<Level> stack_;
  bool found_ = false;
  std::string key_, path_;
};

}  // namespace

bool ParseJsonStrict(const std::string& text, json* out, JsonProblem* problem) {
  DuplicateKeyFinder dups;
  try {
    *out = json::parse(text, std::ref(dups));
  } catch (const TooDeep&) {
    *problem = JsonProblem{"", "not valid JSON: arrays and objects nested deeper than " +
                                   std::to_string(kMaxJsonDepth) + " levels"};
    return false;
  } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e999
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..." -> drop the tag.
    if (!what.empty() && what[0] == '[') {
      size_t close = what.find("] ");
      if (close != std::string::npos) what = what.substr(close + 2);
    }
    // The message quotes what was last read, which may be any bytes: keep it ASCII.
    for (char& c : what)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    *problem = JsonProblem{"", "not valid JSON: " + what};
    return false;
  }
  if (dups.found()) {
    *problem = JsonProblem{
        dups.path(),
        "duplicate key " + json(dups.key()).dump(-1, ' ', true, json::error_handler_t::replace)};
    return false;
  }
  return true;
}

std::string ShownJsonValue(const json& value) {
  if (value.is_array() || value.is_object()) {
    const char* kind = value.is_array() ? "array" : "object";
    if (value.empty()) return std::string("an empty ") + kind;
    const char* unit = value.is_array() ? " item" : " key";
    return std::string("an ") + kind + " of " + std::to_string(value.size()) + unit +
           (value.size() == 1 ? "" : "s");
  }
  std::string s = value.dump(-1, ' ', true, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace dlh
