/*
 * progcheck.c - whether an LD_PRELOAD library can reach a program when it
 * is executed (progcheck.h).
 *
 * The file is read as execve(2) would take it: a "#!" script hands over to
 * its interpreter (the kernel's parsing of the line, fs/binfmt_script.c,
 * is copied below, and so is its limit on how many scripts may follow one
 * another), and an ELF is reachable if it names a program interpreter
 * (PT_INTERP: the dynamic loader) and does not make the exec a secure one.
 * The set-ID bits and file capabilities of a script do not count: Linux
 * ignores them and takes those of the interpreter it finally runs.
 *
 * Every system call goes through syscall(2), so that neither an
 * interposed libc function (this runs inside the preload library) nor
 * anything a vfork(2) child must not touch (locks, malloc, stdio) is
 * involved; the compiler may still turn a loop into memcpy or strlen.
 * errno, which a vfork child shares with its parent, is restored before
 * returning.
 *
 * It errs on the side of refusing: a set-ID bit counts whoever owns the
 * file (a set-user-ID program of the caller's own would not make the exec
 * secure), and so do file capabilities whoever runs it.  What it cannot
 * see: a secure exec that comes from an LSM (an SELinux domain transition,
 * AppArmor) rather than from the file.  A program of another ELF class
 * than this code's (a 32-bit one) is OA_REACH_CLASS: its loader ignores
 * our preload library with a warning.
 *
 * SPDX-License-Identifier: MIT
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "progcheck.h"

/* What the kernel reads of a file to choose its format (BINPRM_BUF_SIZE):
 * also all it looks at of a "#!" line. */
#define HDR_LEN		256

/* The kernel follows a "#!" file's interpreter at most this many times in
 * one execve (exec_binprm(): a sixth script fails with ELOOP; its comment
 * says 4, the loop allows 5, and so does 6.18 when tried). */
#define MAX_SCRIPTS	5

/* How many times env(1) may hand over to another program in one check:
 * a bound for scripts that run themselves through env. */
#define MAX_ENVS	8

/* The largest program header table the kernel loads (load_elf_phdrs). */
#define MAX_PHDRS_SIZE	65536

/* Program headers are read in chunks of this many bytes: a multiple of
 * both sizes of a program header (56 and 32). */
#define PH_CHUNK	(20 * sizeof(Elf64_Phdr))

#define DEFAULT_SEARCHPATH	"/usr/local/bin:/usr/bin:/bin"

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_DATA	ELFDATA2LSB
#else
#define NATIVE_DATA	ELFDATA2MSB
#endif

#if __SIZEOF_POINTER__ == 8
#define NATIVE_CLASS	ELFCLASS64
#else
#define NATIVE_CLASS	ELFCLASS32
#endif

/* Where glibc's struct stat is the kernel's, newfstatat(2) fills it;
 * elsewhere statx(2), whose struct is the same on every architecture.
 * (OA_PROGCHECK_STATX forces statx, to test it.) */
#if defined(SYS_newfstatat) && !defined(OA_PROGCHECK_STATX) && \
    ((defined(__x86_64__) && defined(__LP64__)) || defined(__aarch64__) || \
     (defined(__riscv) && __riscv_xlen == 64))
#define STAT_NATIVE	1
#else
#define STAT_NATIVE	0
#endif

/* The result of a system call: its value, or -errno. */
static long sysret(long r)
{
	return r < 0 ? -errno : r;
}

/* The mode of PATH relative to DIRFD (FLAGS as fstatat: AT_EMPTY_PATH with
 * "" is DIRFD itself).  Returns 0 or -errno. */
static long stat_mode(int dirfd, const char *path, int flags, mode_t *mode)
{
#if STAT_NATIVE
	struct stat st;
	long r = sysret(syscall(SYS_newfstatat, dirfd, path, &st, flags));

	if (r == 0)
		*mode = st.st_mode;
	return r;
#else
	struct statx stx;
	long r = sysret(syscall(SYS_statx, dirfd, path,
				flags | AT_STATX_SYNC_AS_STAT,
				STATX_TYPE | STATX_MODE, &stx));

	if (r == 0)
		*mode = stx.stx_mode;
	return r;
#endif
}

/* Read up to N bytes of FD at OFF, as many as there are (short only at the
 * end of the file).  Returns the number read, or -errno. */
static long read_at(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;

#if !defined(__LP64__)
	/* A 32-bit pread64 passes its offset in two registers, in an order
	 * that differs between architectures: seek and read instead; what
	 * this reads lies near the start of the file. */
	long s;

	if (off > (uint64_t)LONG_MAX - n)
		return -EOVERFLOW;
	s = sysret(syscall(SYS_lseek, fd, (long)off, SEEK_SET));
	if (s < 0)
		return s;
#endif
	while (got < n) {
#if defined(__LP64__)
		long r = sysret(syscall(SYS_pread64, fd, (char *)buf + got,
					n - got, (long)(off + got)));
#else
		long r = sysret(syscall(SYS_read, fd, (char *)buf + got,
					n - got));
#endif

		if (r == -EINTR)
			continue;
		if (r < 0)
			return r;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (long)got;
}

/* The reason, in WHY, that a file could not be checked: a string for the
 * errno values a check may meet. */
static const char *errstr(int err)
{
	switch (err) {
	case ENOENT:		return "no such file";
	case EACCES:		return "permission denied";
	case EPERM:		return "operation not permitted";
	case ELOOP:		return "too many levels of symbolic links";
	case ENAMETOOLONG:	return "file name too long";
	case ENOTDIR:		return "a component of the path is not a "
				       "directory";
	case EIO:		return "input/output error";
	case ENOMEM:		return "out of memory";
	case EMFILE:
	case ENFILE:		return "too many open files";
	case EOVERFLOW:		return "value too large";
	case ENXIO:		return "no such device";
	default:		return NULL;
	}
}

/* WHY as it is written: never more than CAP - 1 bytes, always terminated
 * (CAP 0: nothing is written). */
struct wbuf {
	char *buf;
	size_t len;
	size_t cap;
};

static void w_mem(struct wbuf *w, const char *s, size_t n)
{
	for (size_t i = 0; i < n && w->len + 1 < w->cap; i++)
		w->buf[w->len++] = s[i];
	if (w->cap)
		w->buf[w->len] = '\0';
}

static size_t str_len(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

static void w_str(struct wbuf *w, const char *s)
{
	w_mem(w, s, str_len(s));
}

static void w_num(struct wbuf *w, unsigned long v)
{
	char d[3 * sizeof(v)];
	size_t i = sizeof(d);

	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	w_mem(w, d + i, sizeof(d) - i);
}

/* A file name, its control characters escaped ("#!/bin/sh\r" names
 * "/bin/sh\r", which a terminal would not show). */
static void w_name(struct wbuf *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };

		if (c >= 0x20 && c != 0x7f)
			w_mem(w, s, 1);
		else if (c == '\r')
			w_str(w, "\\r");
		else if (c == '\t')
			w_str(w, "\\t");
		else
			w_mem(w, esc, sizeof(esc));
	}
}

/* Cut WHY back to LEN bytes (a mark taken earlier). */
static void w_cut(struct wbuf *w, size_t len)
{
	if (len < w->len) {
		w->len = len;
		w->buf[len] = '\0';
	}
}

static void w_err(struct wbuf *w, int err)
{
	const char *s = errstr(err);

	if (s) {
		w_str(w, s);
	} else {
		w_str(w, "error ");
		w_num(w, (unsigned long)err);
	}
}

/* OA_REACH_ERROR for ERR, with "WHAT: <ERR>" in W. */
static enum oa_reach fail(struct wbuf *w, const char *what, int err,
			  int *errp)
{
	w_str(w, what);
	w_str(w, ": ");
	w_err(w, err);
	*errp = err;
	return OA_REACH_ERROR;
}

static enum oa_reach noexec(struct wbuf *w, const char *what)
{
	w_str(w, what);
	return OA_REACH_NOEXEC;
}

/* check_file's answer for a "#!" file: its header is in HDR. */
#define IS_SCRIPT	(-1)

/*
 * Check an ELF executable open on FD with mode MODE, whose first N bytes
 * (N <= HDR_LEN) are HDR.  Returns the enum value, with the reason (or the
 * description of a reachable one) written to W.
 */
static enum oa_reach check_elf(int fd, mode_t mode, const unsigned char *hdr,
			       size_t n, struct wbuf *w, int *errp)
{
	union {
		Elf64_Phdr p64[PH_CHUNK / sizeof(Elf64_Phdr)];
		Elf32_Phdr p32[PH_CHUNK / sizeof(Elf32_Phdr)];
		unsigned char raw[PH_CHUNK];
	} ph;
	char interp[HDR_LEN];
	uint64_t phoff, ioff = 0, isize = 0;
	unsigned type, phentsize, phnum;
	bool is64, found = false;
	long r;

	/* What makes an exec secure: the loader then ignores LD_PRELOAD
	 * (glibc: but for set-user-ID libraries in its own directories). */
	if (mode & S_ISUID) {
		w_str(w, "set-user-ID");
		return OA_REACH_SETID;
	}
	/* Without group execute, S_ISGID means mandatory locking. */
	if ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)) {
		w_str(w, "set-group-ID");
		return OA_REACH_SETID;
	}
	r = sysret(syscall(SYS_fgetxattr, fd, "security.capability", NULL,
			   (size_t)0));
	if (r > 0) {
		w_str(w, "file capabilities");
		return OA_REACH_CAPS;
	}
	if (r < 0 && r != -ENODATA && r != -EOPNOTSUPP && r != -ENOTSUP)
		return fail(w, "cannot read its capabilities", (int)-r, errp);

	if (hdr[EI_DATA] != NATIVE_DATA)
		return noexec(w, "an ELF of the other byte order");
	is64 = hdr[EI_CLASS] == ELFCLASS64;
	if (is64) {
		Elf64_Ehdr eh;

		if (n < sizeof(eh))
			return noexec(w, "a truncated ELF");
		for (size_t i = 0; i < sizeof(eh); i++)
			((unsigned char *)&eh)[i] = hdr[i];
		type = eh.e_type;
		phoff = eh.e_phoff;
		phentsize = eh.e_phentsize;
		phnum = eh.e_phnum;
	} else if (hdr[EI_CLASS] == ELFCLASS32) {
		Elf32_Ehdr eh;

		if (n < sizeof(eh))
			return noexec(w, "a truncated ELF");
		for (size_t i = 0; i < sizeof(eh); i++)
			((unsigned char *)&eh)[i] = hdr[i];
		type = eh.e_type;
		phoff = eh.e_phoff;
		phentsize = eh.e_phentsize;
		phnum = eh.e_phnum;
	} else {
		return noexec(w, "an ELF of unknown class");
	}
	if (type != ET_EXEC && type != ET_DYN) {
		w_str(w, "an ELF that is not an executable (type ");
		w_num(w, type);
		w_str(w, ")");
		return OA_REACH_NOEXEC;
	}
	if (phentsize != (is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)) ||
	    phnum == 0 || (uint64_t)phnum * phentsize > MAX_PHDRS_SIZE ||
	    phoff > (uint64_t)INT64_MAX - MAX_PHDRS_SIZE)
		return noexec(w, "an ELF with bad program headers");

	/* The first PT_INTERP, as the kernel takes it. */
	for (unsigned i = 0; i < phnum && !found; ) {
		unsigned per = (unsigned)(PH_CHUNK / phentsize);
		unsigned cnt = phnum - i < per ? phnum - i : per;
		size_t len = (size_t)cnt * phentsize;

		r = read_at(fd, ph.raw, len, phoff + (uint64_t)i * phentsize);
		if (r < 0)
			return fail(w, "cannot read it", (int)-r, errp);
		if ((size_t)r < len)
			return noexec(w, "a truncated ELF");
		for (unsigned j = 0; j < cnt; j++) {
			uint32_t pt = is64 ? ph.p64[j].p_type
					   : ph.p32[j].p_type;

			if (pt != PT_INTERP)
				continue;
			ioff = is64 ? ph.p64[j].p_offset : ph.p32[j].p_offset;
			isize = is64 ? ph.p64[j].p_filesz : ph.p32[j].p_filesz;
			found = true;
			break;
		}
		i += cnt;
	}
	if (!found) {
		/* No loader: nothing reads LD_PRELOAD. */
		w_str(w, type == ET_DYN ? "statically linked (static-pie)"
					: "statically linked");
		return OA_REACH_STATIC;
	}

	/* The kernel refuses an interpreter path that is not a string of
	 * 2 to PATH_MAX bytes ending in NUL. */
	if (isize < 2 || isize > PATH_MAX || ioff > (uint64_t)INT64_MAX)
		return noexec(w, "an ELF with a bad interpreter path");
	{
		size_t want = isize < sizeof(interp) ? (size_t)isize
						     : sizeof(interp);

		r = read_at(fd, interp, want, ioff);
		if (r < 0)
			return fail(w, "cannot read it", (int)-r, errp);
		if ((size_t)r < want)
			return noexec(w, "a truncated ELF");
		if (want == isize && interp[want - 1] != '\0')
			return noexec(w, "an ELF with a bad interpreter path");
		w_str(w, "dynamically linked (interpreter ");
		if (want == isize) {
			w_name(w, interp);
		} else {
			/* longer than anything this reports */
			interp[sizeof(interp) - 1] = '\0';
			w_name(w, interp);
			w_str(w, "...");
		}
		w_str(w, ")");
	}
	if (hdr[EI_CLASS] != NATIVE_CLASS) {
		/* its loader ignores a preload library of our class */
		w_str(w, is64 ? ", 64-bit" : ", 32-bit");
		return OA_REACH_CLASS;
	}
	return OA_REACH_OK;
}

/*
 * Check FILE.  Returns the enum value with the reason (or the description)
 * in W, or IS_SCRIPT with its first HDR_LEN bytes in HDR (zero-padded past
 * the end of the file, as the kernel's buffer is).
 */
static int check_file(const char *file, unsigned char *hdr, struct wbuf *w,
		      int *errp)
{
	mode_t mode = 0;
	long r, n;
	int fd, ret;

	r = stat_mode(AT_FDCWD, file, 0, &mode);
	if (r == -ENOENT || r == -ENOTDIR) {
		w_str(w, "no such file");
		return OA_REACH_NOTFOUND;
	}
	if (r == -EACCES)	/* a directory of the path: execve says so */
		return noexec(w, "permission denied");
	if (r < 0)
		return fail(w, "cannot check it", (int)-r, errp);
	/* Tested before opening: opening a FIFO or a device may block or
	 * do something. */
	if (S_ISDIR(mode))
		return noexec(w, "a directory");
	if (!S_ISREG(mode))
		return noexec(w, "not a regular file");
	/* As access(2): the real IDs.  A file system mounted noexec fails it
	 * too; root needs one x bit. */
	r = sysret(syscall(SYS_faccessat, AT_FDCWD, file, X_OK));
	if (r == -EACCES)
		return noexec(w, (mode & 0111) ? "not executable by us "
						 "(permission denied, or a "
						 "noexec mount)"
					       : "not executable (no x "
						 "permission)");
	if (r < 0)
		return fail(w, "cannot check it", (int)-r, errp);

	fd = (int)sysret(syscall(SYS_openat, AT_FDCWD, file,
				 O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
				 O_LARGEFILE));
	if (fd < 0)	/* EACCES: execute-only, which we cannot check */
		return fail(w, "cannot read it", -fd, errp);
	/* What was opened (the file may have been replaced meanwhile). */
	r = stat_mode(fd, "", AT_EMPTY_PATH, &mode);
	if (r < 0) {
		ret = fail(w, "cannot check it", (int)-r, errp);
		goto out;
	}
	if (!S_ISREG(mode)) {
		ret = noexec(w, "not a regular file");
		goto out;
	}
	for (size_t i = 0; i < HDR_LEN; i++)
		hdr[i] = 0;
	n = read_at(fd, hdr, HDR_LEN, 0);
	if (n < 0) {
		ret = fail(w, "cannot read it", (int)-n, errp);
		goto out;
	}
	if (n >= 2 && hdr[0] == '#' && hdr[1] == '!')
		ret = IS_SCRIPT;
	else if (n >= SELFMAG && hdr[EI_MAG0] == ELFMAG0 &&
		 hdr[EI_MAG1] == ELFMAG1 && hdr[EI_MAG2] == ELFMAG2 &&
		 hdr[EI_MAG3] == ELFMAG3)
		ret = check_elf(fd, mode, hdr, (size_t)n, w, errp);
	else if (n == 0)
		ret = noexec(w, "an empty file");
	else
		ret = noexec(w, "an unknown format (neither ELF nor #!)");
out:
	syscall(SYS_close, fd);
	return ret;
}

static bool spacetab(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/* fs/binfmt_script.c: the first byte in FIRST..LAST (both included) that
 * is not a blank, or NULL. */
static unsigned char *next_non_spacetab(unsigned char *first,
					unsigned char *last)
{
	for (; first <= last; first++)
		if (!spacetab(*first))
			return first;
	return NULL;
}

/* The first blank or NUL in FIRST..LAST (both included), or NULL. */
static unsigned char *next_terminator(unsigned char *first,
				      unsigned char *last)
{
	for (; first <= last; first++)
		if (spacetab(*first) || !*first)
			return first;
	return NULL;
}

/*
 * Parse the "#!" line in HDR (HDR_LEN bytes) as load_script() does, and as
 * it does, terminate the strings in place: *NAME is the interpreter, *ARG
 * its one optional argument (everything after it up to the end of the
 * line, less the blanks around it) or NULL.  Returns 0, or -1 where the
 * kernel fails with ENOEXEC (no interpreter, or one that may be cut).
 */
static int parse_script(unsigned char *hdr, const char **name,
			const char **arg)
{
	unsigned char *buf_end = hdr + HDR_LEN - 1;
	unsigned char *i_end = NULL, *i_name, *i_sep, *i_arg = NULL;

	/* strnchr(): up to the first NUL */
	for (unsigned char *p = hdr; p < hdr + HDR_LEN && *p; p++) {
		if (*p == '\n') {
			i_end = p;
			break;
		}
	}
	if (!i_end) {
		/* No newline: the arguments may be cut, not the name. */
		i_end = next_non_spacetab(hdr + 2, buf_end);
		if (!i_end || !next_terminator(i_end, buf_end))
			return -1;
		i_end = buf_end;
	}
	while (spacetab(i_end[-1]))
		i_end--;
	i_name = next_non_spacetab(hdr + 2, i_end);
	if (!i_name || i_name == i_end)
		return -1;
	i_sep = next_terminator(i_name, i_end);
	if (i_sep && *i_sep != '\0')
		i_arg = next_non_spacetab(i_sep, i_end);
	*i_end = '\0';
	if (i_arg)
		*i_sep = '\0';
	*name = (const char *)i_name;
	*arg = (const char *)i_arg;
	return 0;
}

static bool is_env(const char *name)
{
	const char *base = name;

	for (const char *p = name; *p; p++)
		if (*p == '/')
			base = p + 1;
	return base[0] == 'e' && base[1] == 'n' && base[2] == 'v' && !base[3];
}

static bool has_slash(const char *s)
{
	for (; *s; s++)
		if (*s == '/')
			return true;
	return false;
}

static bool starts_with(const char *s, const char *prefix)
{
	while (*prefix)
		if (*s++ != *prefix++)
			return false;
	return true;
}

/*
 * The command env(1) runs for a "#!ENV ARG" line, into CMD (HDR_LEN bytes).
 * ENV gets ARG as one argument: unless it is an option, that is the
 * command, blanks and all.  An option -S (--split-string) splits the rest
 * into words, and the first that is neither an option nor NAME=VALUE is
 * the command (an option -u, -C, -P or -a takes the next word).  Returns 0,
 * or -1 if ARG names no command (env would then run the script itself).
 */
static int env_command(const char *arg, char *cmd)
{
	const char *p;
	bool skip = false;

	if (!arg)
		return -1;
	if (arg[0] != '-') {
		if (str_len(arg) >= HDR_LEN)
			return -1;
		for (size_t i = 0; (cmd[i] = arg[i]); i++)
			;
		/* NAME=VALUE sets a variable: not a command */
		for (p = arg; *p; p++)
			if (*p == '=')
				return -1;
		return 0;
	}
	if (starts_with(arg, "-S"))
		p = arg + 2;
	else if (starts_with(arg, "--split-string="))
		p = arg + 15;
	else
		return -1;
	for (;;) {
		const char *word;
		size_t len = 0;
		bool assign = false;

		while (spacetab((unsigned char)*p))
			p++;
		if (!*p)
			return -1;
		word = p;
		while (*p && !spacetab((unsigned char)*p)) {
			if (*p == '=')
				assign = true;
			p++;
			len++;
		}
		if (skip) {
			skip = false;
			continue;
		}
		if (word[0] == '-') {
			/* a bare option with its argument in the next word */
			skip = len == 2 && (word[1] == 'u' || word[1] == 'C' ||
					    word[1] == 'P' || word[1] == 'a');
			continue;
		}
		if (assign)
			continue;
		for (size_t i = 0; i < len; i++)
			cmd[i] = word[i];
		cmd[len] = '\0';
		return 0;
	}
}

/*
 * Find NAME in the colon list SP as execvp(3) does (an empty entry is the
 * current directory), into BUF (SIZE bytes): a regular file we may
 * execute, else the first thing of that name (which the check then
 * refuses, as execvp fails on it).  Returns 0, or -1 if there is none.
 */
static int search(const char *name, const char *sp, char *buf, size_t size)
{
	size_t nlen = str_len(name);

	for (int pass = 0; pass < 2; pass++) {
		const char *p = sp;

		for (;;) {
			const char *end = p;
			size_t dlen, len = 0;
			mode_t mode = 0;

			while (*end && *end != ':')
				end++;
			dlen = (size_t)(end - p);
			if (dlen + 1 + nlen < size) {
				for (size_t i = 0; i < dlen; i++)
					buf[len++] = p[i];
				if (dlen)
					buf[len++] = '/';
				for (size_t i = 0; i <= nlen; i++)
					buf[len++] = name[i];
				if (stat_mode(AT_FDCWD, buf, 0, &mode) == 0 &&
				    (pass == 1 ||
				     (S_ISREG(mode) &&
				      syscall(SYS_faccessat, AT_FDCWD, buf,
					      X_OK) == 0)))
					return 0;
			}
			if (!*end)
				break;
			p = end + 1;
		}
	}
	return -1;
}

enum oa_reach oa_reach_check(const char *path, const char *searchpath,
			     char *why, size_t whylen, int *err)
{
	struct wbuf w = { .buf = why, .len = 0, .cap = why ? whylen : 0 };
	char cur[PATH_MAX];	/* the file checked, after PATH */
	char cmd[HDR_LEN];	/* the command env(1) is to run */
	unsigned char hdr[HDR_LEN];
	const char *file = path;
	int saved_errno = errno, e = 0, ret;
	int scripts = 0, envs = 0;
	size_t envmark = 0;
	bool pending = false;	/* cmd is for the env being checked */

	if (w.cap)
		why[0] = '\0';
	if (!searchpath)
		searchpath = DEFAULT_SEARCHPATH;
	for (;;) {
		const char *name, *arg;

		ret = check_file(file, hdr, &w, &e);
		if (ret == OA_REACH_OK && pending) {
			/* env itself is fine: on to its command, a new
			 * execve.  Its description gives way to the
			 * command's name. */
			pending = false;
			w_cut(&w, envmark);
			w_str(&w, " ");
			w_name(&w, cmd);
			if (++envs > MAX_ENVS) {
				w_str(&w, ": too many hand-overs through "
					  "env(1)");
				e = ELOOP;
				ret = OA_REACH_ERROR;
				break;
			}
			scripts = 0;
			if (has_slash(cmd)) {
				file = cmd;
			} else if (search(cmd, searchpath, cur,
					  sizeof(cur)) == 0) {
				w_str(&w, " (");
				w_name(&w, cur);
				w_str(&w, ")");
				file = cur;
			} else {
				w_str(&w, ": not found in the search path");
				ret = OA_REACH_NOTFOUND;
				break;
			}
			w_str(&w, ": ");
			continue;
		}
		if (ret != IS_SCRIPT)
			break;

		/* A script: the kernel runs its interpreter in its place. */
		if (pending) {
			ret = noexec(&w, "an env(1) that is a script, not "
					 "followed");
			break;
		}
		if (++scripts > MAX_SCRIPTS) {
			w_str(&w, "too many levels of script interpreters");
			e = ELOOP;
			ret = OA_REACH_ERROR;
			break;
		}
		if (parse_script(hdr, &name, &arg) < 0) {
			ret = noexec(&w, "a #! line without an interpreter (or "
					 "one longer than the kernel reads)");
			break;
		}
		w_str(&w, "script interpreter ");
		w_name(&w, name);
		if (is_env(name)) {
			if (env_command(arg, cmd) < 0) {
				w_str(&w, ": ");
				ret = noexec(&w, "no command for env(1) on "
						 "the #! line");
				break;
			}
			pending = true;
			envmark = w.len;
		}
		w_str(&w, ": ");
		/* The name is at most HDR_LEN bytes: it fits. */
		for (size_t i = 0; (cur[i] = name[i]); i++)
			;
		file = cur;
	}
	if (err)
		*err = ret == OA_REACH_ERROR ? e : 0;
	errno = saved_errno;
	return (enum oa_reach)ret;
}
