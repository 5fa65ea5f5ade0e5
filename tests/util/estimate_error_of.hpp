// The estimator's unit tests: the one-line message of the EstimateError a call throws, and of
// a calibration file damaged on purpose.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "common/error.hpp"
#include "estimator/model/time_model.hpp"

namespace dlh {

// Runs `f`, expecting an EstimateError, and returns its message ("" and a test failure when
// it throws none).
inline std::string EstimateErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const EstimateError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no EstimateError";
  return "";
}

// The error of reading calibration `good` ("cal.json") once `edit` has damaged a copy of it.
inline std::string EditedCalibrationError(const nlohmann::json& good,
                                          const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json bad = good;
  edit(bad);
  return EstimateErrorOf([&] { CalibrationFromJson(bad, "cal.json"); });
}

}  // namespace dlh
