/* guard.c -- storage of the per-thread reentrancy guard.  See guard.h. */
#include "common/guard.h"

/* Owned by its thread; read by that thread's signal handler. */
PS_TLS int ps_guard_depth;
