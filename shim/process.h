/* process.h -- process-level state shared by the hooks (defined in init.c).
 *
 * Context: any thread outside signal context.
 */
#ifndef PS_PROCESS_H
#define PS_PROCESS_H

/* 1 if the caller runs in the process the shim initialised (or in a fork
 * child the shim has adopted); 0 in a vfork child or a child made by a raw
 * clone, where the shim must not touch shared state. */
int ps_process_is_self(void);

/* An exec is about to replace this image: write the profile so far, within
 * the flush timeout. */
void ps_process_before_exec(void);

/* _exit: the last pass through the uploader thread, bounded by the flush
 * timeout.  Async-signal-safe. */
void ps_process_exit_now(void);

/* Count the calling thread as one of the program's (the main thread at
 * start-up, the forking thread in a fork child); see worker.h. */
void ps_hook_thread_adopt(void);

/* Record the run's exit status and command line, for its span. */
void ps_process_set_exit(int status);
void ps_process_set_args(int argc, const char *const *argv);

#endif
