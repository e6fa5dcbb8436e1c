/*
 * progcheck.h - whether an LD_PRELOAD library can reach a program when it
 * is executed.
 *
 * The dynamic loader is what loads a preload library, so a program it does
 * not run (statically linked, static-pie) is out of reach, and so is one it
 * runs in secure mode (set-user-ID, set-group-ID, file capabilities), where
 * it ignores LD_PRELOAD.  oa_reach_check() tells those apart by reading the
 * file, following "#!" interpreters as the kernel does.
 *
 * It is made to run where little else may: in a vfork(2) child and inside
 * the preload library itself, around interposed open/read/close.  It makes
 * only raw system calls (syscall(2)), allocates nothing, uses no stdio and
 * no global state, and keeps its buffers on the stack (about 6 KiB).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef OATOMIC_PROGCHECK_H
#define OATOMIC_PROGCHECK_H

#include <stddef.h>

enum oa_reach {
	OA_REACH_OK = 0,	/* dynamically linked, no privilege change */
	OA_REACH_STATIC,	/* an ELF without PT_INTERP (statically
				 * linked, or static-pie) */
	OA_REACH_SETID,		/* set-user-ID or set-group-ID bit (the loader
				 * ignores LD_PRELOAD in secure mode) */
	OA_REACH_CAPS,		/* file capabilities (security.capability) */
	OA_REACH_NOTFOUND,	/* no such file */
	OA_REACH_NOEXEC,	/* not a regular executable file, or not
				 * executable by us, or an unknown format */
	OA_REACH_ERROR,		/* could not read it (errno kept in *err) */
	OA_REACH_CLASS,		/* dynamically linked, but of another ELF
				 * class (32-bit): its loader would ignore a
				 * 64-bit preload library */
};

/*
 * Check PATH (a path as execve(2) takes it: no PATH search) and, for a
 * "#!" script, its interpreter (recursively, as the kernel does: at most
 * five "#!" files in a row; when the interpreter is env(1) - basename
 * "env" - the first argument after it that does not start with '-' is
 * searched in the PATH-like colon list SEARCHPATH, which may be NULL =
 * "/usr/local/bin:/usr/bin:/bin", and checked too).  WHY (WHYLEN bytes,
 * may be NULL) gets a short reason in English, e.g. "statically linked",
 * "set-user-ID", "file capabilities", "script interpreter /usr/bin/foo:
 * statically linked"; on OK a description like "dynamically linked
 * (interpreter /lib64/ld-linux-x86-64.so.2)".  ERR (may be NULL) gets the
 * errno of OA_REACH_ERROR, else 0.  errno itself is left as it was.
 * Returns the enum value.
 */
enum oa_reach oa_reach_check(const char *path, const char *searchpath,
			     char *why, size_t whylen, int *err);

#endif /* OATOMIC_PROGCHECK_H */
