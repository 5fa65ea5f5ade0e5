// DLH — the split history of a run (see split_history.hpp).
#include "launcher/train/split_history.hpp"

#include <climits>

#include "common/error.hpp"
#include "common/file_text.hpp"
#include "common/json_parse.hpp"

namespace dlh {
namespace {

// summary.json files hold one entry per change; a long noisy run may have thousands.
constexpr size_t kMaxHistoryFileBytes = size_t(64) << 20;

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

SplitHistory FromJson(const nlohmann::json& j, const std::string& origin) {
  auto fail = [&](const std::string& field, const std::string& why) {
    return UsageError(origin + field + ": " + why);
  };
  if (!j.is_array()) throw fail("", "must be an array, got " + ShownJsonValue(j));
  SplitHistory out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = "[" + std::to_string(i) + "]";
    const nlohmann::json& e = j[i];
    if (!e.is_object()) throw fail(at, "must be an object, got " + ShownJsonValue(e));
    SplitChange c;
    const nlohmann::json& step = e.value("step", nlohmann::json());
    if (!step.is_number_integer() || step.get<int64_t>() < 0)
      throw fail(at + ".step", "must be a non-negative integer, got " + ShownJsonValue(step));
    c.step = step.get<int64_t>();
    const nlohmann::json& batches = e.value("rank_batches", nlohmann::json());
    if (!batches.is_array() || batches.empty())
      throw fail(at + ".rank_batches",
                 "must be an array of positive integers, got " + ShownJsonValue(batches));
    for (const nlohmann::json& b : batches) {
      if (!b.is_number_integer() || b.get<int64_t>() <= 0 || b.get<int64_t>() > INT32_MAX)
        throw fail(at + ".rank_batches",
                   "must be an array of positive integers, got an item " + ShownJsonValue(b));
      c.batches.push_back(b.get<int64_t>());
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

const std::vector<int64_t>& SplitAt(const SplitHistory& history, int64_t step) {
  const SplitChange* found = nullptr;
  for (const SplitChange& c : history) {
    if (c.step > step) break;
    found = &c;
  }
  if (!found) throw Error("no split at step " + std::to_string(step) + " (internal error)");
  return found->batches;
}

void CheckSplitHistory(const SplitHistory& history, int ranks, int64_t global, int64_t max_batch,
                       const std::string& origin) {
  if (history.empty()) throw UsageError(origin + ": is empty");
  if (history.front().step != 0)
    throw UsageError(origin + "[0].step: must be 0 (the split the run started with), got " +
                     std::to_string(history.front().step));
  for (size_t i = 0; i < history.size(); ++i) {
    const std::string at = origin + "[" + std::to_string(i) + "]";
    const SplitChange& c = history[i];
    if (i > 0 && c.step <= history[i - 1].step)
      throw UsageError(at + ".step: " + std::to_string(c.step) +
                       " does not come after the step before it (" +
                       std::to_string(history[i - 1].step) + ")");
    if (int64_t(c.batches.size()) != ranks)
      throw UsageError(at + ".rank_batches: has " + std::to_string(c.batches.size()) +
                       " batches but " + std::to_string(ranks) + " ranks run");
    int64_t sum = 0;
    for (int64_t b : c.batches) {
      if (b < 1 || b > max_batch)
        throw UsageError(at + ".rank_batches: a batch of " + std::to_string(b) +
                         " is outside [1, " + std::to_string(max_batch) + "]");
      sum += b;
    }
    if (sum != global)
      throw UsageError(at + ".rank_batches: sum to " + std::to_string(sum) +
                       ", not the global batch " + std::to_string(global));
  }
}

nlohmann::json SplitHistoryJson(const SplitHistory& history) {
  nlohmann::json out = nlohmann::json::array();
  for (const SplitChange& c : history)
    out.push_back({{"step", c.step}, {"rank_batches", c.batches}});
  return out;
}

SplitHistory ReadSplitHistory(const std::string& path, std::string* origin) {
  // By name, so that a checkpoint of any size is not read as text first.
  if (EndsWith(path, ".h5")) {
    *origin = path + ": split_history";
    TrainState st;
    try {
      st = LoadCheckpoint(path);
    } catch (const CheckpointError& e) {
      throw UsageError(e.what());  // an input of the command line: exit code 2
    }
    if (st.split_history.empty())
      throw UsageError(*origin + ": missing (the checkpoint is of a run that did not balance)");
    return st.split_history;
  }
  *origin = path + ": balance.history";
  std::string text, why;
  if (!ReadFileText(path, kMaxHistoryFileBytes, &text, &why))
    throw UsageError(path + ": cannot read: " + why);
  nlohmann::json j;
  JsonProblem problem;
  if (!ParseJsonStrict(text, &j, &problem))
    throw UsageError(path + ": " + (problem.path.empty() ? "" : problem.path + ": ") +
                     problem.message);
  if (!j.is_object() || !j.contains("balance") || !j["balance"].is_object() ||
      !j["balance"].contains("history"))
    throw UsageError(*origin + ": missing (not the summary.json of a run that balanced)");
  return FromJson(j["balance"]["history"], *origin);
}

}  // namespace dlh
