/* DLH SPANK plugin spank_dlh.so: `sbatch --dlh-auto[=deadline=3h,spec=FILE,...] job.sh`.
 *
 * This file is Slurm's C ABI and nothing else: SPANK_PLUGIN, the option, and the hooks,
 * each forwarding to the facade (dlh_spank.h). It is C on purpose: in C++ the hooks would
 * be mangled and SPANK_PLUGIN's `const` globals would have internal linkage
 * (plugin/README.md, Design).
 *
 * Contexts: planning happens only in sbatch/salloc (S_CTX_ALLOCATOR) and in srun creating
 * its own allocation (S_CTX_LOCAL without SLURM_JOB_ID). srun inside a job inherits
 * --dlh-auto through the environment and must not plan again; slurmstepd (remote, root)
 * only registers the option and never reads a user-controlled file. Errors in remote hooks
 * would drain the node, so remote hooks always return 0.
 *
 * Only --dlh-auto from the command line or #SBATCH lines plans. A job's environment holds
 * the option it was submitted with (SLURM_SPANK__SLURM_SPANK_OPTION_dlh_dlh_auto), and
 * sbatch/salloc apply such variables as if given; a plain sbatch inside a --dlh-auto job
 * would be planned too. slurm_spank_init runs before sbatch reads the environment, so the
 * planning contexts drop the variable there.
 *
 * A plan belongs to the job it was made for. A job submitted from inside a --dlh-auto job
 * (sbatch or salloc in its script) would otherwise inherit the parent's plan, as DLH_PLAN in
 * the environment sbatch copies and as SLURM_SPANK_DLH_PLAN, which passes even
 * --export=NONE, and train with the parent's batch and rate. So the planning contexts drop
 * both too: a nested job gets a plan of its own only from its own --dlh-auto. */
#define _POSIX_C_SOURCE 200809L /* strdup, unsetenv under -std=c11 */
#include <slurm/spank.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/dlh_spank.h"

SPANK_PLUGIN(dlh, 1) /* expands to four definitions, each with its own ";" */

static int dlh_auto_cb(int val, const char* optarg, int remote);

/* Registered with spank_option_register() in slurm_spank_init: sbatch and salloc ignore a
 * static spank_options table. has_arg 2: the value is optional. */
static struct spank_option dlh_auto_option = {
    .name = "dlh-auto",
    .arginfo = "[key=value,...]",
    .usage =
        "Let DLH choose GPUs, nodes, tasks and time limit for a training job. Keys (',' "
        "separated): deadline=3h, spec=FILE (default $DLH_SPEC), samples=N (default "
        "$DLH_SAMPLES), epochs=N, objective=energy|time|gpu-hours, max-gpus=N, "
        "types=T1:T2, per-gpu-batch=B, mixed, dry-run. Options you give yourself are kept.",
    .has_arg = 2,
    .val = 0,
    .cb = dlh_auto_cb,
};

/* The variable through which a job's processes inherit the option (plugstack.c). */
#define INHERITED_OPTION "SLURM_SPANK__SLURM_SPANK_OPTION_dlh_dlh_auto"

static spank_t current_spank; /* for export_job_env, during post_opt only */
static char* inherited_value; /* srun inside a job: the job's own --dlh-auto value */
static int told_srun;         /* srun inside a job: the "ignored" line was printed */

static int planning_context(void) {
  spank_context_t ctx = spank_context();
  if (ctx == S_CTX_ALLOCATOR) return 1;
  return ctx == S_CTX_LOCAL && getenv("SLURM_JOB_ID") == NULL;
}

static int srun_inside_job(void) {
  return spank_context() == S_CTX_LOCAL && getenv("SLURM_JOB_ID") != NULL;
}

static void log_line(int level, const char* message) {
  if (level == DLH_LOG_ERROR)
    slurm_error("%s", message);
  else
    slurm_info("%s", message);
}

static int export_job_env(const char* name, const char* value) {
  if (current_spank == NULL) return -1;
  return spank_job_control_setenv(current_spank, name, value, 1) == ESPANK_SUCCESS ? 0 : -1;
}

/* srun inside a job re-applies the job's option from the environment ("(null)" or the
 * value); anything else came from this srun's command line and is ignored: say so. */
static void note_srun_option(const char* optarg) {
  int inherited = optarg != NULL && inherited_value != NULL && strcmp(optarg, inherited_value) == 0;
  if (inherited || told_srun) return;
  told_srun = 1;
  slurm_info(
      "dlh: --dlh-auto is ignored by srun inside job %s: the job's allocation is already "
      "fixed; plan with sbatch or salloc --dlh-auto",
      getenv("SLURM_JOB_ID"));
}

static int dlh_auto_cb(int val, const char* optarg, int remote) {
  (void)val;
  if (remote) return 0;
  if (srun_inside_job()) note_srun_option(optarg);
  if (!planning_context()) return 0;
  return dlh_option(optarg, log_line) == DLH_OK ? 0 : -1;
}

int slurm_spank_init(spank_t sp, int ac, char** av) {
  spank_context_t ctx = spank_context();
  if (ctx != S_CTX_ALLOCATOR && ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE) return 0;
  if (planning_context()) {
    unsetenv(INHERITED_OPTION);
    unsetenv("DLH_PLAN");
    unsetenv("SLURM_SPANK_DLH_PLAN");
    /* The parent's planned spec and data (train.sbatch's fallback under --export=NONE). */
    unsetenv("SLURM_SPANK_DLH_SPEC");
    unsetenv("SLURM_SPANK_DLH_DATA");
  }
  if (srun_inside_job() && getenv(INHERITED_OPTION) != NULL)
    inherited_value = strdup(getenv(INHERITED_OPTION));
  /* A failure here must not stop every job on the cluster: only --dlh-auto is lost. */
  if (spank_option_register(sp, &dlh_auto_option) != ESPANK_SUCCESS) {
    slurm_error("dlh: cannot register --dlh-auto; jobs run without it");
    return 0;
  }
  if (planning_context()) dlh_configure(ac, av);
  return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (!planning_context()) return 0;
  current_spank = sp;
  int rc = dlh_allocator_post_opt(log_line, export_job_env);
  current_spank = NULL;
  switch (rc) {
    case DLH_OK:
      return 0;
    case DLH_DRY_RUN:
      /* The report is printed; end sbatch/salloc before anything is submitted. SPANK has
       * no "stop, successfully" result: returning an error would make sbatch print an
       * error and exit 1 for a dry run that did what was asked. */
      fflush(stdout);
      fflush(stderr);
      exit(0);
    default:
      return -1;
  }
}

int slurm_spank_exit(spank_t sp, int ac, char** av) {
  (void)sp;
  (void)ac;
  (void)av;
  free(inherited_value);
  inherited_value = NULL;
  dlh_finish();
  return 0;
}
