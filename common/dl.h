/* dl.h -- fill a table of function pointers from a dlopen'ed library.
 *
 * libcurl (uploader/http.c) and libdw (symbolize/dwarf.c) are loaded by the
 * uploader when first needed, never linked: linking them would load their
 * dependencies into every program at start-up.  Each keeps its entry
 * points in a struct of function pointers, described by a table of
 * (symbol name, offset in the struct) that this fills in one pass.
 *
 * Context: any thread outside signal context (dlsym may take the loader
 * lock).
 */
#ifndef PS_DL_H
#define PS_DL_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include "common/ps.h"

struct ps_dl_sym {
	const char *name;       /* exported symbol */
	size_t off;             /* offsetof the pointer in the caller's struct */
};

/* Resolve each syms[i].name in the library dl into the function pointer
 * at (char *)api + syms[i].off.  Returns 0, or -ENOSYS when a symbol is
 * missing (*missing, when not NULL, names it; api is then partly filled
 * and must not be used). */
int ps_dl_resolve(void *dl, const struct ps_dl_sym *syms, size_t n, void *api,
		  const char **missing) PS_WUR;

/* dlopen the library `name` (RTLD_NOW | RTLD_LOCAL: it serves the caller
 * alone) and resolve syms into api (api_len bytes).  Returns the handle,
 * or NULL with api zeroed and *why set for the log: dlerror()'s text when
 * the library cannot be loaded, else "lacks <symbol>" (static storage,
 * valid until the next call). */
void *ps_dl_load(const char *name, const struct ps_dl_sym *syms, size_t n, void *api,
		 size_t api_len, const char **why);

/* The descriptor of the note of `type` whose owner is the 4 bytes `owner`
 * (name and padding: "GNU", "Go\0\0") in the PT_NOTE segments of a loaded
 * object, as dl_iterate_phdr describes it; *len its length.  NULL when it
 * has none.  Reads the object's memory only. */
const void *ps_dl_note(const struct dl_phdr_info *info, uint32_t type, const char owner[4],
		       size_t *len);

#endif
