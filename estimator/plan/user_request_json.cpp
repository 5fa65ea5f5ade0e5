// DLH planning core — the user's Slurm options as cli_filter.lua hands them to
// `dlh-estimate slurm-plan --options` (UserRequestFromJson, plan.hpp).
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.hpp"
#include "common/json_parse.hpp"
#include "estimator/plan/plan.hpp"

namespace dlh::plan {

UserRequest UserRequestFromJson(const std::string& json_text) {
  UserRequest user;
  nlohmann::json j;
  JsonProblem problem;
  if (!ParseJsonStrict(json_text, &j, &problem) || !j.is_object())
    throw UsageError("slurm-plan: --options: not a JSON object from slurm.json_cli_options");
  for (const char* name : kUserOptionNames) {
    auto it = j.find(name);
    if (it != j.end() && it->is_string()) NoteUserOption(user, name, it->get<std::string>());
  }
  return user;
}

}  // namespace dlh::plan
