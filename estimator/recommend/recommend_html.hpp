// DLH estimator — the recommender's decision as one HTML page (dlh-estimate recommend
// --html): the chosen allocation and why, every kept candidate on a time-energy chart
// with the deadline, the ranking as a table, and for each GPU type the step-time line
// t(b) = fixed + per_sample * b the recommender used, with the calibration's measured steps
// of this model where it has some. Built on common/html_page.hpp and common/svg_chart.hpp:
// self-contained, no script, nothing fetched.
#pragma once

#include <map>
#include <string>

#include "estimator/cluster/cluster.hpp"
#include "estimator/model/time_model.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh {

// What a page shows beyond what the text output needs: the best 200 feasible allocations
// (Job::top; 0, all, stays) and the best 200 left out (Job::rejected). Call before
// Recommend.
void KeepCandidatesForPage(Job* job);

// A calibration file behind rec.speeds, read again for its fit quality and measured steps.
struct PageCalibration {
  std::string path;
  Calibration calibration;
};

// The calibrations the speeds came from, by the GPU type that names the file: a calibrated
// type's own, and the reference of a type scaled from another. Throws EstimateError naming
// the file (as DeviceSpeeds does).
std::map<std::string, PageCalibration> LoadSpeedCalibrations(const Cluster& cluster,
                                                             const Recommendation& rec);

// "2x4 a100 (b32)", "1x8 h100 (b40) + 2x8 a100 (b12)": nodes x GPUs per node, GPU type,
// per-GPU batch, as the text output's table names allocations.
std::string AllocationName(const Allocation& a);

// The whole page. The chosen allocation is rec.ranked.front(), or rec.fastest when nothing
// meets the deadline (as PlanJson's caller picks it). `calibrations` may lack a type: its
// line is drawn without measured points.
std::string RecommendationHtml(const Job& job, const Cluster& cluster, const Recommendation& rec,
                               const std::map<std::string, PageCalibration>& calibrations);

}  // namespace dlh
