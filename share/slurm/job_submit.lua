--[[
DLH — job_submit/lua fallback for `sbatch --dlh-auto`.

spank_dlh.so normally rewrites the job request inside sbatch, through Slurm internals that
exist in 22.05 (see README, "sbatch --dlh-auto"). Sites whose Slurm lacks them, or that
want the decision taken centrally, load the plugin with `register-only` (it then only
registers the option) and install this file as job_submit.lua next to slurm.conf with
`JobSubmitPlugins=lua`. slurmctld then sees the option's value in spank_job_env, asks
dlh-estimate for the plan, and sets the fields the user did not set: GPUs (tres_per_node),
nodes, tasks per node and time limit; the plan goes to the job as DLH_PLAN.

Settings (slurmctld's environment): DLH_ESTIMATE (path of dlh-estimate; default: found on
PATH) and DLH_CLUSTER (the cluster description; required).
--]]

local ESTIMATE = os.getenv("DLH_ESTIMATE") or "dlh-estimate"
local CLUSTER = os.getenv("DLH_CLUSTER")

-- The value of --dlh-auto ("(null)" when given without one), or nil without the option.
local function dlh_auto_value(job_desc)
  local env = job_desc.spank_job_env
  if env == nil then return nil end
  for _, entry in pairs(env) do
    local value = tostring(entry):match("^_SLURM_SPANK_OPTION_dlh_dlh_auto=(.*)$")
    if value ~= nil then return value end
  end
  return nil
end

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local KEYS = {deadline = "--deadline", samples = "--samples", epochs = "--epochs",
              objective = "--objective", ["max-gpus"] = "--max-gpus",
              ["per-gpu-batch"] = "--per-gpu-batch", types = "--types"}

-- "spec=train.json,samples=60000,deadline=2h" -> the dlh-estimate command, or nil + error.
local function estimate_command(value, job_desc)
  local work_dir = job_desc.work_dir
  local spec = os.getenv("DLH_SPEC")
  local args = {}
  local has_deadline = false
  if value ~= "(null)" and value ~= "" then
    for item in value:gmatch("[^,]+") do
      local key, val = item:match("^([%w%-]+)=(.*)$")
      if key == nil then
        if item == "dry-run" or item == "mixed" then
          return nil, "--dlh-auto: '" .. item .. "' is not available through job_submit.lua"
        end
        return nil, "--dlh-auto: expected key=value, got '" .. item .. "'"
      elseif key == "spec" then
        spec = val
      elseif KEYS[key] ~= nil then
        if key == "types" then val = val:gsub(":", ","):gsub("%+", ",") end
        if key == "deadline" then has_deadline = true end
        args[#args + 1] = KEYS[key] .. " " .. shell_quote(val)
      else
        return nil, "--dlh-auto: unknown key '" .. key .. "'"
      end
    end
  end
  if spec == nil then return nil, "--dlh-auto: spec=FILE is required" end
  -- What the user fixed shapes the plan: a GPU type in --gres, a --time without deadline=.
  local gpu_type = tostring(job_desc.tres_per_node or ""):match("gpu:([%w_%-%.]+):%d")
  if gpu_type ~= nil then args[#args + 1] = "--types " .. shell_quote(gpu_type) end
  if not has_deadline and job_desc.time_limit ~= slurm.NO_VAL and job_desc.time_limit ~= nil then
    args[#args + 1] = "--deadline " .. tostring(job_desc.time_limit) .. "m"
  end
  if spec:sub(1, 1) ~= "/" and work_dir ~= nil then spec = work_dir .. "/" .. spec end
  if CLUSTER == nil then return nil, "DLH_CLUSTER is not set for slurmctld" end
  return shell_quote(ESTIMATE) .. " recommend " .. shell_quote(spec) .. " --cluster " ..
         shell_quote(CLUSTER) .. " --slurm " .. table.concat(args, " ") .. " 2>&1"
end

local function plan_job(job_desc, value)
  local cmd, err = estimate_command(value, job_desc)
  if cmd == nil then
    slurm.log_user("%s", "dlh: " .. err)
    return slurm.ERROR
  end
  local pipe = io.popen(cmd)
  local out = pipe:read("*a")
  pipe:close()
  local plan = {}
  for line in out:gmatch("[^\n]+") do
    local k, v = line:match("^([%w_]+)=(.*)$")
    if k ~= nil then plan[k] = v end
  end
  if plan.feasible ~= "yes" then
    local why = plan.summary or out:gsub("\n", " ")
    slurm.log_user("%s", "dlh: " .. why)
    return slurm.ERROR
  end

  -- Only what the user left unset.
  local gpus_set = job_desc.tres_per_node ~= nil or job_desc.tres_per_job ~= nil or
                   job_desc.tres_per_task ~= nil or job_desc.tres_per_socket ~= nil
  if not gpus_set then job_desc.tres_per_node = "gres:" .. plan.gres end
  local nodes = tonumber(plan.nodes)
  if job_desc.min_nodes == slurm.NO_VAL then
    job_desc.min_nodes = nodes
    job_desc.max_nodes = nodes
  end
  if job_desc.ntasks_per_node == slurm.NO_VAL16 and job_desc.num_tasks == slurm.NO_VAL then
    job_desc.ntasks_per_node = tonumber(plan.ntasks_per_node)
    job_desc.num_tasks = tonumber(plan.ntasks_per_node) * (job_desc.min_nodes or nodes)
  end
  if job_desc.time_limit == slurm.NO_VAL then job_desc.time_limit = tonumber(plan.time_minutes) end
  local ok = pcall(function() job_desc.environment.DLH_PLAN = plan.plan end)
  if not ok then slurm.log_info("%s", "dlh: could not export DLH_PLAN to the job") end
  slurm.log_user("%s", "dlh: " .. (plan.summary or "plan applied"))
  return slurm.SUCCESS
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local value = dlh_auto_value(job_desc)
  if value == nil then return slurm.SUCCESS end  -- not a --dlh-auto job: untouched
  -- Slurm accepts a job whose script raised an error; a --dlh-auto job must not go through
  -- unplanned, so errors refuse it (fail closed).
  local ok, rc = pcall(plan_job, job_desc, value)
  if ok then return rc end
  slurm.log_user("%s", "dlh: job_submit.lua failed: " .. tostring(rc))
  return slurm.ERROR
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
