/* DLH SPANK plugin — the C facade between spank_entry.c (Slurm's C ABI) and the C++ core.
 * Plain C types only. No function lets an exception escape: each catches everything and
 * reports through `log`, returning DLH_FAIL. Not thread-safe (Slurm calls SPANK hooks from
 * one thread). */
#ifndef DLH_PLUGIN_DLH_SPANK_H
#define DLH_PLUGIN_DLH_SPANK_H

#ifdef __cplusplus
extern "C" {
#endif

enum { DLH_LOG_INFO = 0, DLH_LOG_ERROR = 1 };

/* Prints one line for the user (spank_entry.c: slurm_info / slurm_error). */
typedef void (*dlh_log_fn)(int level, const char* message);

/* Puts NAME=VALUE into the job's SPANK job-control environment (spank_entry.c:
 * spank_job_control_setenv). Slurm hands it to the job as SLURM_SPANK_NAME whatever --export
 * says. Returns 0 on success. */
typedef int (*dlh_export_fn)(const char* name, const char* value);

enum { DLH_OK = 0, DLH_FAIL = -1, DLH_DRY_RUN = 1 };

/* slurm_spank_init (allocator and local contexts): keeps the plugstack.conf arguments. A bad
 * argument is reported only when --dlh-auto is used, so a broken plugstack line never stops
 * jobs that do not ask for DLH. With `register-only` it prepares the hand-over from
 * share/slurm/cli_filter.lua: DLH_SITE (the plugstack arguments) and DLH_PLAN_HANDOFF (a
 * private pipe, /dev/fd/N) in this process's environment, both removed again in post_opt. */
void dlh_configure(int argc, char** argv);

/* The --dlh-auto callback (allocator, or srun creating its own allocation): merges the value
 * (NULL, "" and "(null)" mean no value) into the keys seen so far. DLH_FAIL, with the
 * message logged, on an unknown key or a bad value; the keys seen so far stay unchanged. */
int dlh_option(const char* value, dlh_log_fn log);

/* 1 when --dlh-auto was given to this process, else 0. */
int dlh_requested(void);

/* slurm_spank_init_post_opt in sbatch/salloc (or srun without a job), for every job: first
 * removes the register-only hand-over. With --dlh-auto it reads the spec and the cluster
 * description, plans, sets gres/nodes/ntasks-per-node/time where the user did not (with
 * register-only: takes the plan cli_filter.lua made and applied), exports DLH_PLAN to this
 * environment and through `export_job_env`, logs the summary. DLH_OK (also when --dlh-auto
 * was not given), DLH_FAIL (logged: the job must not be submitted) or DLH_DRY_RUN (the report
 * is on stdout; the caller ends the process). */
int dlh_allocator_post_opt(dlh_log_fn log, dlh_export_fn export_job_env);

/* slurm_spank_exit: frees everything. */
void dlh_finish(void);

#ifdef __cplusplus
}
#endif

#endif /* DLH_PLUGIN_DLH_SPANK_H */
