// DLH — `dlh-estimate slurm-plan`: the planning core (estimator/plan/) for
// share/slurm/cli_filter.lua.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// Runs in sbatch, as the user, from cli_filter.lua (Slurm's cli_filter/lua), where the
// plugin is loaded with `register-only`. Same inputs and code as the plugin's own post_opt
// (estimator/plan/plan.hpp): the --dlh-auto value, the options the user set (Slurm's
// json_cli_options), $DLH_SITE (the plugin's plugstack arguments), $DLH_SPEC, $DLH_SAMPLES,
// the current folder and, with --live-nodes, sinfo's view of the nodes. Prints one item per
// line on stdout for cli_filter.lua: `set NAME VALUE`, `plan JSON`, `say TEXT`, or with
// dry-run `report TEXT` lines, then `done`. Errors: one line on stderr, exit 2 (bad input) or
// 3 (no allocation meets the deadline).
int SlurmPlanCommand(const std::vector<std::string>& args);

}  // namespace dlh
