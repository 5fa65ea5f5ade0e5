--[[
DLH: cli_filter/lua fallback for `sbatch --dlh-auto` (also salloc, and srun outside a job).

spank_dlh.so normally plans inside sbatch and sets the job's options through Slurm internals
that exist in 22.05. Where they do not (another Slurm version), or where a site prefers
documented interfaces only, load the plugin with `register-only` and install this file as
cli_filter.lua next to slurm.conf with `CliFilterPlugins=cli_filter/lua`:

  plugstack.conf:  required PREFIX/lib/dlh/spank_dlh.so register-only cluster=/etc/dlh/cluster.json [max-gpus=N] ...
  slurm.conf:      CliFilterPlugins=cli_filter/lua

It runs in sbatch as the submitting user (never in slurmctld), so it reads only what the user
may read. It asks `dlh-estimate slurm-plan` (the plugin's own planning code, with the
plugin's plugstack settings from DLH_SITE) for the plan, sets the options the user left
unset through cli_filter's documented `options[name] = value`, and hands DLH_PLAN to the
plugin, which exports it to the job in post_opt (Lua cannot set environment variables).
Any failure refuses the job: a --dlh-auto job never goes through unplanned.
--]]

local SINFO = "timeout 20 sinfo -h -N -O 'NodeList:|,StateLong:|,Gres:|,GresUsed:|,Features:|' 2>/dev/null"

local function shell_quote(s)
  return "'" .. (tostring(s):gsub("'", "'\\''")) .. "'"
end

local function tell(options, text)
  io.stderr:write(tostring(options.type) .. ": " .. text .. "\n")
end

-- The value of --dlh-auto (cli_filter gives "set" when it has none), or nil.
local function dlh_auto_value(options)
  local spank = options.spank
  local ours = spank and spank["dlh"]
  return ours and ours["dlh-auto"]
end

local function plan_job(options, value)
  local handoff = os.getenv("DLH_PLAN_HANDOFF")
  if os.getenv("DLH_SITE") == nil or handoff == nil then
    tell(options, "error: dlh: cli_filter.lua needs spank_dlh.so loaded with register-only " ..
         "in plugstack.conf (ask your administrator); nothing submitted")
    return slurm.ERROR
  end
  local estimate = os.getenv("DLH_ESTIMATE") or "dlh-estimate"
  local cmd = SINFO .. " | timeout 60 " .. shell_quote(estimate) .. " slurm-plan --live-nodes -" ..
              " --dlh-auto=" .. shell_quote(value) ..
              " --options=" .. shell_quote(slurm.json_cli_options(options) or "{}") .. " 2>&1"
  local pipe = io.popen(cmd)
  local out = pipe:read("*a")
  pipe:close()

  local settings, plan, summary, report, others, done = {}, nil, nil, {}, {}, false
  for line in out:gmatch("[^\n]+") do
    local kind, rest = line:match("^(%S+) ?(.*)$")
    if kind == "set" then
      local name, val = rest:match("^(%S+) (.+)$")
      settings[#settings + 1] = {name, val}
    elseif kind == "plan" then
      plan = rest
    elseif kind == "say" then
      summary = rest
    elseif kind == "report" then
      report[#report + 1] = rest
    elseif kind == "done" then
      done = true
    else
      others[#others + 1] = line
    end
  end
  if #report > 0 then  -- dry run: print the report, submit nothing
    io.stdout:write(table.concat(report, "\n") .. "\n")
    for _, line in ipairs(others) do tell(options, "error: " .. line) end
    io.stdout:flush()
    os.exit(done and 0 or 1)
  end
  if not done or plan == nil then
    if #others == 0 then others = {"dlh: " .. estimate .. " slurm-plan gave no plan"} end
    for _, line in ipairs(others) do tell(options, "error: " .. line) end
    return slurm.ERROR
  end
  for _, s in ipairs(settings) do
    options[s[1]] = s[2]
    if options[s[1]] == nil then
      tell(options, "error: dlh: Slurm refused --" .. s[1] .. "=" .. s[2] .. "; nothing submitted")
      return slurm.ERROR
    end
  end
  local f = io.open(handoff, "w")
  if f == nil or not f:write(plan, "\n") or not f:close() then
    tell(options, "error: dlh: cannot hand DLH_PLAN to spank_dlh.so; nothing submitted")
    return slurm.ERROR
  end
  tell(options, summary or "dlh: planned")
  return slurm.SUCCESS
end

function slurm_cli_setup_defaults(options, early_pass)
  return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, offset)
  local value = dlh_auto_value(options)
  if value == nil then return slurm.SUCCESS end  -- not a --dlh-auto job: untouched
  -- srun inside a job re-applies the job's option; the allocation is fixed (the plugin
  -- says so when the user gave it explicitly). Hetjobs: only the first component is planned.
  if options.type == "srun" and os.getenv("SLURM_JOB_ID") ~= nil then return slurm.SUCCESS end
  if offset ~= nil and offset > 0 then return slurm.SUCCESS end
  if value == "set" then value = "" end
  local ok, rc = pcall(plan_job, options, value)
  if ok then return rc end
  tell(options, "error: dlh: cli_filter.lua failed: " .. tostring(rc) .. "; nothing submitted")
  return slurm.ERROR
end

function slurm_cli_post_submit(offset, job_id, step_id)
  return slurm.SUCCESS
end
