/* files.h -- the local-file sink.
 *
 * Profiles are written into one directory, each file under a temporary
 * name first and then renamed, so a reader never sees half a profile.
 * Files are created 0600 and the directory 0700: profiles reveal function
 * names and arguments.  The directory must be a real directory owned by
 * the user (a symlink or a planted file is refused), and files are opened
 * relative to it with O_NOFOLLOW, so no link is ever followed.
 *
 * Context: uploader thread (or the exiting thread holding the export lock).
 */
#ifndef PS_FILES_H
#define PS_FILES_H

#include <stddef.h>
#include "common/ps.h"

/* Create (mode 0700, parents too) or check the directory.  Returns an open
 * O_DIRECTORY descriptor, or -ENOTDIR (not a directory or a symlink),
 * -EPERM (owned by someone else), -errno from mkdir/open. */
int ps_files_open_dir(const char *path) PS_WUR;

/* The same checks as ps_files_open_dir, without creating anything: 0 if
 * the directory is usable or can be made, else the error opening it would
 * give (and -EACCES/-EROFS for an ancestor that cannot take it).  For the
 * program's side, which can still say so on its stderr.  Context: any. */
int ps_files_check_dir(const char *path) PS_WUR;

/* Write data to dirfd/name atomically (temporary file + rename).  Returns
 * 0 or -errno (ENOSPC, EROFS, ...); on failure nothing is left behind. */
int ps_files_write(int dirfd, const char *name, const void *data, size_t len) PS_WUR;

#endif
