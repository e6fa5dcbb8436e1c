/*
 * oatomic-private.h - interfaces for the oatomic tool, the tests and the
 * benchmarks.  Not installed, not exported from liboatomic.so (the version
 * script keeps only oa_*; these are oa__*): link liboatomic.a to use them.
 */
#ifndef OATOMIC_PRIVATE_H
#define OATOMIC_PRIVATE_H

#include <stdint.h>
#include <stdio.h>
#include "oatomic.h"
#include "sys.h"

/* Install another system-call table (NULL: the real one).  Returns the old
 * one.  Not thread-safe: call it while no handle is open. */
const struct oa_sysops *oa__set_sysops(const struct oa_sysops *ops);

/* 1 while handle F, opened on its file's clean mark, has needed nothing
 * but reads (docs/FORMAT.md, "The clean mark"); else 0. */
int oa__fast(const oa_file *f);

/* Copy of the seam's counters since the start (or the last reset). */
void oa__stats_get(struct oa_stats *out);
void oa__stats_reset(void);

/*
 * oa__check - report on the journals of PATH (journal directory JDIR, NULL
 * for beside the file) without changing anything.  Prints one line per
 * finding to OUT, prefixed with PATH.  Returns:
 *   0  clean: nothing pending, nothing to recover;
 *   1  committed transactions wait to be checkpointed or recovered (normal
 *      after a crash; `oatomic recover` or the next oa_open finishes them);
 *   2  a journal is damaged, foreign or unsafe (EUCLEAN / EPERM);
 *  -1  the check could not run (errno).
 */
int oa__check(const char *path, const char *jdir, FILE *out);

/* oa__recover_opts - oa_recover() with the journal in JDIR (NULL: beside). */
int oa__recover_opts(const char *path, const char *jdir);

/* The inode number a control file (.NAME.oa, open as FD) was made for,
 * from its current header slot: lets `oatomic recover --all` match control
 * files found in a tree with their files.  0, or -1 (EUCLEAN: no readable
 * slot; or the read error). */
int oa__ctl_ino(int fd, uint64_t *ino);

/* oa__ctl_path - the control file the library uses for PATH (its home,
 * wherever that is: docs/FORMAT.md, "The home"; in JDIR if not NULL) into
 * OUT as an absolute path.  0, or -1 with errno (ESTALE: the home is not
 * reachable). */
int oa__ctl_path(const char *path, const char *jdir, char *out, size_t n);

/*
 * oa__recover_ex - oa_recover() with the journals in JDIR (NULL: beside
 * PATH), findings (one line each, naming the control file or journal and
 * the record) to OUT (may be NULL), and FLAGS:
 *   OA__RECOVER_ADOPT    replay journals that name another inode when the
 *                        control file names the same one (a copy of the
 *                        directory: cp -a, rsync, tar), then take them as
 *                        this file's;
 *   OA__RECOVER_DISCARD  where recovery refuses (EUCLEAN), throw away the
 *                        damaged or foreign journals (and, if an
 *                        acknowledged commit is lost or the control file is
 *                        damaged, every journal holding anything newer than
 *                        the checkpoint), apply nothing of them, leave the
 *                        file as it is, and recover the rest.
 * Returns 0 or -1 (errno: EUCLEAN damaged or a copy, EPERM unsafe, EBUSY a
 * journal to discard is in use, ...).
 */
#define OA__RECOVER_ADOPT      1u
#define OA__RECOVER_DISCARD    2u
/* internal: the live area's evidence is waived (after a discard) */
#define OA__RECOVER_NOEVIDENCE 4u
/* internal: no findings printed (the second pass of a discard) */
#define OA__RECOVER_QUIET      8u
int oa__recover_ex(const char *path, const char *jdir, unsigned flags,
		   FILE *out);

/* Test hook: make the next commit of any handle stop dead (raise SIGKILL on
 * itself) at point N of the protocol (see sys.h, OA_KP_*); 0 off.
 * Used by the kill tests to hit the windows between flushes for sure. */
void oa__set_killpoint(int point);

/* The one table of method names: "auto", "journal", "clone", "exchange",
 * "kernel" for enum oa_method (NULL for another value), and back (-1 for an
 * unknown name).  Tools, benchmarks and tests print and parse with these. */
const char *oa__method_name(int method);
int oa__method_parse(const char *name);

/* The one table of file-system names: statfs f_type to "ext4", "xfs",
 * "btrfs", "tmpfs", ... (NULL for one it does not know; oa_ioinfo's fs_name
 * prints those as 0xMAGIC). */
const char *oa__fs_name(unsigned long magic);

#endif
