// DLH estimator — what a plan tells the job about the observation store (docs/reference/
// plan.md, "observations"): where its record goes, the GPU type the plan chose, the model's
// key and features; and for people, where each chosen type's step time came from.
#pragma once

#include <nlohmann/json.hpp>

#include "estimator/cluster/cluster.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh {

// Adds "observations" {store (when the cluster names one), limit, gpu (the chosen type; a
// mix's types joined by "+"), model_key, features (a spec's)} and "provenance" {type:
// DeviceSpeed::provenance} of the chosen parts to `plan`.
void AddObservationsToPlan(const Job& job, const Cluster& cluster, const Recommendation& rec,
                           const Allocation& chosen, nlohmann::json* plan);

// The provenance of the chosen allocation's step time: "alpha: from 3 earlier runs of this
// spec on alpha" (parts joined by "; "); "" when no speed has one.
std::string ChosenProvenance(const Recommendation& rec, const Allocation& chosen);

}  // namespace dlh
