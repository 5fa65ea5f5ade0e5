// DLH — a run's headline figures (see headline.hpp).
#include "launcher/report/headline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "common/svg_chart.hpp"

namespace dlh::report {
namespace {

constexpr size_t kPaceSteps = 50;  // the pace is the mean of the last this many steps

std::string Percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f%%", 100 * fraction);
  return text;
}

}  // namespace

std::string Duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "n/a";
  char text[48];
  const long s = std::lround(seconds);
  if (seconds < 60)
    std::snprintf(text, sizeof text, "%.1f s", seconds);
  else if (s < 3600)
    std::snprintf(text, sizeof text, "%ld min %02ld s", s / 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%ld h %02ld min", s / 3600, (s / 60) % 60);
  return text;
}

Headline HeadlineOf(const RunData& run, double now) {
  Headline h;
  h.state = StateOf(run, now);
  h.name = std::filesystem::path(run.dir).filename().string();
  h.attempts = run.attempts;
  h.loss = h.accuracy = std::nan("");
  for (const EventRecord* e : run.events_named("start")) {
    h.name = TextField(e->data, "spec_name", h.name);
    h.total_steps = IntField(e->data, "total_steps", h.total_steps);
    h.world_size =
        int(std::clamp<int64_t>(IntField(e->data, "world_size", h.world_size), 0, 1 << 30));
    h.device = TextField(e->data, "device", h.device);
    if (e->data.contains("sync") && e->data["sync"].is_object()) {
      const std::string mode = TextField(e->data["sync"], "mode", "");
      if (mode == "local_sgd")
        h.training = "local SGD, period " + std::to_string(IntField(e->data["sync"], "period", 0));
      else if (mode == "stale_sync")
        h.training = "stale-synchronous, staleness " +
                     std::to_string(IntField(e->data["sync"], "staleness", 0));
    }
    if (e->data.contains("parallel") && e->data["parallel"].is_object()) {
      const nlohmann::json& par = e->data["parallel"];
      h.training = "pipeline of " + std::to_string(IntField(par, "pipeline_stages", 0)) +
                   " stages x " + std::to_string(IntField(par, "replicas", 0)) + " replica(s), " +
                   std::to_string(IntField(par, "micro_batches", 0)) + " micro-batches";
    }
  }
  if (const StepRecord* last = run.last_step()) {
    h.step = last->step;
    h.epoch = last->epoch;
    h.loss = last->loss;
    h.accuracy = last->accuracy;
  }
  // The pace of the newest steps (in file order: the attempt running now).
  double seconds = 0, samples = 0;
  size_t counted = 0;
  for (auto it = run.steps.rbegin(); it != run.steps.rend() && counted < kPaceSteps; ++it) {
    if (!(it->total_s > 0) || !(it->samples_per_s > 0)) continue;
    seconds += it->total_s;
    samples += it->samples_per_s * it->total_s;
    ++counted;
  }
  if (counted > 0) {
    h.samples_per_s = samples / seconds;
    h.step_s = seconds / double(counted);
  }
  for (const EventRecord* e : run.events_named("eval"))
    if (e->data.contains("test_accuracy") && e->data["test_accuracy"].is_number()) {
      h.test_accuracy = e->data["test_accuracy"].get<double>();
      h.test_epoch = IntField(e->data, "epoch", 0);
    }
  if (!run.checkpoints.empty()) h.last_checkpoint = run.checkpoints.back();
  if (run.modified > 0) h.since_update_s = std::max(0.0, now - run.modified);
  const nlohmann::json& s = run.summary;
  if (s.is_object()) {
    if (h.world_size == 0 && s.contains("rank_batches") && s["rank_batches"].is_array())
      h.world_size = int(s["rank_batches"].size());
    if (h.device.empty()) h.device = TextField(s, "device", "");
    if (!h.training.empty() && s.contains("parallel") && s["parallel"].is_object()) {
      char text[96];
      std::snprintf(text, sizeof text, " (bubble %.0f%% measured, %.0f%% predicted)",
                    100 * NumberField(s["parallel"], "bubble_measured", 0),
                    100 * NumberField(s["parallel"], "bubble_predicted", 0));
      h.training += text;
      // Each stage's own work a step (runs from 2026-12-06 on): a bubble above GPipe's comes
      // from stages of uneven work, and these say which stage the others wait for.
      const auto busy = s["parallel"].find("stage_busy_s_per_step");
      if (busy != s["parallel"].end() && busy->is_array() && !busy->empty()) {
        std::string each;
        for (const nlohmann::json& v : *busy)
          if (v.is_number()) {
            std::snprintf(text, sizeof text, "%s%.1f", each.empty() ? "" : " / ",
                          1000 * v.get<double>());
            each += text;
          }
        h.training += ", stages busy " + each + " ms a step";
      }
    } else if (!h.training.empty() && s.contains("sync") && s["sync"].is_object()) {
      const nlohmann::json& sync = s["sync"];
      const auto own = sync.find("own_gradient_first");  // absent in runs before 2026-12-01
      const bool own_first = own != sync.end() && own->is_boolean() && own->get<bool>();
      if (TextField(sync, "mode", "") == "stale_sync")
        h.training += " (" + std::to_string(IntField(sync, "applied", 0)) + " gradients applied" +
                      (own_first ? ", own gradients first" : "") + ")";
      else
        h.training += " (" + std::to_string(IntField(sync, "averages", 0)) + " model averages)";
    }
  }
  if (h.total_steps > 0 && h.step_s > 0 && h.state == RunState::Running)
    h.eta_s = double(std::max<int64_t>(0, h.total_steps - h.step)) * h.step_s;
  if (h.state != RunState::Running) {
    const std::vector<const EventRecord*> ends = run.events_named("end");
    const std::vector<const EventRecord*> signals = run.events_named("signal");
    if (h.state == RunState::Finished)
      h.stop = "finished";
    else if (!run.stall.is_null() && IntField(run.stall, "step", 0) >= h.step)
      h.stop = "stalled at step " + std::to_string(IntField(run.stall, "step", 0)) + ": " +
               TextField(run.stall, "culprit", "a peer stopped answering");
    else if (!ends.empty() && ends.back()->data.contains("stop_signal") &&
             ends.back()->data["stop_signal"].is_string())
      h.stop = "stopped by " + ends.back()->data["stop_signal"].get<std::string>() +
               " after a checkpoint";
    else if (s.is_object() && NumberField(s, "stop_signal", 0) != 0)
      h.stop = "stopped by signal " + std::to_string(IntField(s, "stop_signal", 0));
    else if (!ends.empty())  // it ended by itself, before its last step, and wrote so
      h.stop = "ended at step " + std::to_string(h.step) +
               " before its last, without a signal: --max-steps, or the program stopped early";
    else
      h.stop = "no record since " + Duration(h.since_update_s) +
               ": killed, requeued and waiting, or on a host that was lost";
  }
  return h;
}

std::vector<std::pair<std::string, std::string>> HeadlineRows(const Headline& h) {
  std::vector<std::pair<std::string, std::string>> rows;
  rows.emplace_back("state",
                    std::string(RunStateName(h.state)) +
                        (h.stop.empty() || h.stop == "finished" ? "" : " (" + h.stop + ")"));
  rows.emplace_back(
      "step", std::to_string(h.step) +
                  (h.total_steps > 0 ? " of " + std::to_string(h.total_steps) + " (" +
                                           Percent(double(h.step) / double(h.total_steps)) + ")"
                                     : "") +
                  ", epoch " + std::to_string(h.epoch));
  // A program's steps may give a loss and no accuracy (dlh-launch run).
  if (std::isfinite(h.loss))
    rows.emplace_back(std::isfinite(h.accuracy) ? "training loss, accuracy" : "training loss",
                      svg::Number(h.loss) +
                          (std::isfinite(h.accuracy) ? ", " + Percent(h.accuracy) : "") +
                          " (last step)");
  if (h.test_accuracy >= 0)
    rows.emplace_back("test accuracy",
                      Percent(h.test_accuracy) + " (epoch " + std::to_string(h.test_epoch) + ")");
  if (h.samples_per_s > 0)
    rows.emplace_back("speed", svg::Number(h.samples_per_s) + " samples/s, " +
                                   svg::Number(1000 * h.step_s) + " ms/step (last " +
                                   std::to_string(kPaceSteps) + " steps)");
  if (h.eta_s >= 0) rows.emplace_back("time to the last step", Duration(h.eta_s));
  if (h.world_size > 0 || !h.device.empty())
    rows.emplace_back("ranks, device",
                      std::to_string(h.world_size) + (h.device.empty() ? "" : ", " + h.device));
  if (!h.training.empty()) rows.emplace_back("training", h.training);
  rows.emplace_back(
      "attempts",
      std::to_string(h.attempts) +
          (h.attempts > 1 ? " (resumed " + std::to_string(h.attempts - 1) + " times)" : ""));
  if (!h.last_checkpoint.empty()) rows.emplace_back("newest checkpoint", h.last_checkpoint);
  if (h.since_update_s >= 0) rows.emplace_back("last record", Duration(h.since_update_s) + " ago");
  return rows;
}

}  // namespace dlh::report
