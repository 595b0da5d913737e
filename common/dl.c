/* dl.c -- function pointer tables from dlsym.  See dl.h. */
#include "common/dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

int
ps_dl_resolve(void *dl, const struct ps_dl_sym *syms, size_t n, void *api, const char **missing)
{
	size_t i;
	void *p;

	for (i = 0; i < n; i++) {
		p = dlsym(dl, syms[i].name);
		if (!p) {
			if (missing)
				*missing = syms[i].name;
			return -ENOSYS;
		}
		/* Object-to-function pointer conversion, the POSIX way. */
		memcpy((char *)api + syms[i].off, &p, sizeof(p));
	}
	return 0;
}

void *
ps_dl_load(const char *name, const struct ps_dl_sym *syms, size_t n, void *api, size_t api_len,
	   const char **why)
{
	static char lacks[128];
	const char *missing = "";
	void *dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);

	if (!dl) {
		*why = dlerror();
		return NULL;
	}
	if (ps_dl_resolve(dl, syms, n, api, &missing)) {
		snprintf(lacks, sizeof(lacks), "lacks %s", missing);
		*why = lacks;
		memset(api, 0, api_len);
		dlclose(dl);
		return NULL;
	}
	return dl;
}

const void *
ps_dl_note(const struct dl_phdr_info *info, uint32_t type, const char owner[4], size_t *len)
{
	const ElfW(Nhdr) *nh;
	uintptr_t p, end;
	size_t i, step;

	for (i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type != PT_NOTE)
			continue;
		p = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
		end = p + info->dlpi_phdr[i].p_memsz;
		while (end - p >= sizeof(*nh)) {
			nh = (const void *)p;
			step = sizeof(*nh) + ((nh->n_namesz + 3) & ~3u) + ((nh->n_descsz + 3) & ~3u);
			if (step > end - p)
				break;
			if (nh->n_type == type && nh->n_namesz == 4 &&
			    !memcmp((const char *)(nh + 1), owner, 4)) {
				*len = nh->n_descsz;
				return (const char *)(nh + 1) + 4;
			}
			p += step;
		}
	}
	return NULL;
}
