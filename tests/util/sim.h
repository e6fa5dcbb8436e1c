/*
 * sim.h - a simulated disk beneath oatomic's I/O seam (struct oa_sysops):
 * an in-memory file system that keeps, per file and per directory, what is
 * durable and what is only in the page cache, and builds the states a power
 * cut may leave.  The model is written down at the top of sim.c.
 *
 * Use:
 *   struct sim_fs *fs = sim_fs_new();
 *   sim_use(fs);  sim_install();      every oa_* call now runs on FS
 *   ... workload ...
 *   struct sim_fs *snap = sim_snapshot(fs);         the state at an instant
 *   n = sim_units(snap, &cfg, &units);              what a cut may choose
 *   struct sim_fs *c = sim_crash(snap, &cfg, choice);  one crashed disk
 *   sim_use(c); oa_recover(...); sim_get_file(...) ...
 *
 * Single-threaded: one simulated file system is current at a time.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef OA_SIM_H
#define OA_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sys.h"

struct sim_fs;

/* What a power cut may do. */
struct sim_cfg {
	unsigned sector;     /* tearing granularity: 512 or 4096 */
	bool nonpowersafe;   /* a torn sector may read back as garbage */
	/* ...only in files whose name starts with '.' (the library's own
	 * journal and control files), not in the user's file */
	bool garbage_dotfiles_only;
	bool strict_rename;  /* rename is link + unlink, not atomic */
};

/* One unit a power cut decides independently: a sector of an unflushed
 * write, the size change of a write, an untorn write (RWF_ATOMIC, clone,
 * exchange), a truncate, or a directory operation.  States: 0 = lost,
 * 1 = persisted, 2.. = variants (garbage sector, half-done truncate,
 * non-atomic rename halves). */
struct sim_unit {
	unsigned char nstates;
	unsigned char kind;     /* SIM_U_* */
	uint32_t op;            /* index of the operation the unit belongs to */
	uint64_t ino;           /* file (or directory) */
};
#define SIM_U_SECTOR 1
#define SIM_U_SIZE   2
#define SIM_U_WHOLE  3
#define SIM_U_TRUNC  4
#define SIM_U_DIR    5

/* The seam table of the simulator. */
extern const struct oa_sysops sim_ops;
/* Install sim_ops under the library (oa__set_sysops); uninstall restores the
 * real one. */
void sim_install(void);
void sim_uninstall(void);

struct sim_fs *sim_fs_new(void);
void sim_fs_free(struct sim_fs *fs);
/* Make FS the current file system (the one sim_ops works on). */
void sim_use(struct sim_fs *fs);
struct sim_fs *sim_current(void);

/* Set-up helpers on the current file system; everything they make is
 * durable at once.  0 or -1. */
int sim_mkdir(const char *path);
int sim_put_file(const char *path, const void *data, size_t n);
/* The file as a reader sees it now (page cache).  Returns 0 with a malloc'd
 * copy (free it) or -1 (missing).  */
int sim_get_file(const char *path, unsigned char **data, size_t *n);
/* Overwrite bytes of an existing file, durable at once (fuzzing, damage). */
int sim_poke(const char *path, uint64_t off, const void *data, size_t n);
/* Number of open simulated descriptors. */
int sim_open_fds(void);

/* A copy of FS (durable images, page cache, unflushed operations), without
 * descriptors or locks. */
struct sim_fs *sim_snapshot(struct sim_fs *fs);
/* Number of unflushed operations (file and directory). */
size_t sim_pending(struct sim_fs *fs);
/* The units a cut of SNAP may decide; *OUT is malloc'd (free it). */
size_t sim_units(struct sim_fs *snap, const struct sim_cfg *cfg,
		 struct sim_unit **out);
/* The disk after a cut of SNAP where unit i ends in state CHOICE[i]
 * (CHOICE NULL: everything lost).  After a reboot: nothing in any page
 * cache, no descriptors, no locks; files without a durable name are gone. */
struct sim_fs *sim_crash(struct sim_fs *snap, const struct sim_cfg *cfg,
			 const unsigned char *choice);
/* Hash of what a program can see in FS (names, sizes, contents). */
uint64_t sim_fs_hash(struct sim_fs *fs);

/* ---- observation and fault injection ---------------------------------- */

/* Seam calls made so far (all file systems). */
extern long sim_ncalls;
/* Called before every seam call, with its name and whether it may change
 * what a cut leaves (writes, truncates, flushes, directory operations). */
extern void (*sim_hook)(void *arg, const char *call, bool mutating);
extern void *sim_hook_arg;

/* Make seam call number AT (sim_ncalls at its start; -1: none) fail.  KIND:
 *   SIM_F_ERR    return -1 with ERR, nothing done;
 *   SIM_F_SHORT  a write writes the first half and returns its length
 *                (fires only on writes);
 *   SIM_F_FLUSH  (fires only on flushes) a flush returns -1 with ERR after
 *                the unflushed writes of
 *                the file were lost (indeterminate on a real disk: the
 *                adversarial choice); pages stay as written but clean, so
 *                the next flush returns 0 without writing them. */
#define SIM_F_ERR   1
#define SIM_F_SHORT 2
#define SIM_F_FLUSH 3
void sim_set_fault(long at, int kind, int err);
/* Did the planned fault fire? */
extern bool sim_fault_fired;
extern const char *sim_fault_call;
/* While paused, seam calls are not counted, hooked or failed. */
void sim_pause(bool on);
/* Never inject into seam calls of this name (NULL: none). */
extern const char *sim_fault_skip;
/* Never inject into the fsync of a directory. */
extern bool sim_fault_skip_dirsync;

#endif
