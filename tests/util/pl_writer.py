#!/usr/bin/python3
# pl_writer.py - the writer and the checker of tests/preload_torture.sh: an
# ordinary Python program (no oatomic in it) that rewrites a file version
# after version, run under `oatomic run` and killed or cut at random.
#
#   pl_writer.py write MODE PATH ACK     rewrite PATH with versions 1, 2, ...
#                                        (forever); after each one's commit,
#                                        append "V\n" to ACK (O_APPEND: left
#                                        alone by the preload) and fsync it
#   pl_writer.py check MODE PATH ACK     PATH must hold exactly version A or
#                                        A + 1, A the last number in ACK (0:
#                                        none); exit 1 with a message if not
#   pl_writer.py init MODE PATH          write version 0 (plainly)
#
# MODE is how each version is written:
#   inplace  one descriptor (r+b) for the whole run; each version's bytes in
#            chunks of random sizes in random order (os.pwrite), then
#            ftruncate to its size and os.fsync (the commit)
#   trunc    open(PATH, "wb") (O_TRUNC), the bytes in order through a
#            buffered file, flush, os.fsync, close
#   close    open(PATH, "r+b"), pwrite chunks, truncate, close: the last
#            close is the commit (no fsync)
#   mmap     one mapping of a fixed-size file; each version's bytes stored
#            in random chunks, then flush() (msync: the commit)
#   sh       (check only: the shell writer of preload_torture.sh) lines
#            "V:N" for N in 1 .. 200 + V % 50
#
# SPDX-License-Identifier: MIT
import os
import random
import sys

MMAP_SIZE = 64 * 1024


def content(mode, v):
    if mode == "sh":
        return "".join("%d:%d\n" % (v, n) for n in range(1, 201 + v % 50)).encode()
    if mode == "mmap":
        size = MMAP_SIZE
    else:
        size = 1000 + (v * 7919) % (96 * 1024)
    unit = ("[%08d]" % v).encode()
    return (unit * (size // len(unit) + 1))[:size]


def chunks(size, rnd):
    """[(off, len)] covering [0, size) in random pieces, shuffled."""
    out, off = [], 0
    while off < size:
        n = min(size - off, rnd.choice((1, 17, 512, 4096, 5000, 20000)))
        out.append((off, n))
        off += n
    rnd.shuffle(out)
    return out


def ack(fd, v):
    os.write(fd, b"%d\n" % v)
    os.fsync(fd)


def write(mode, path, ackpath):
    rnd = random.Random(os.getpid())
    afd = os.open(ackpath, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    v = 0
    if mode == "inplace":
        fd = os.open(path, os.O_RDWR)
        while True:
            v += 1
            c = content(mode, v)
            for off, n in chunks(len(c), rnd):
                os.pwrite(fd, c[off:off + n], off)
            os.ftruncate(fd, len(c))
            os.fsync(fd)
            ack(afd, v)
    elif mode == "trunc":
        while True:
            v += 1
            c = content(mode, v)
            with open(path, "wb") as f:
                for i in range(0, len(c), 3000):
                    f.write(c[i:i + 3000])
                f.flush()
                os.fsync(f.fileno())
            ack(afd, v)
    elif mode == "close":
        while True:
            v += 1
            c = content(mode, v)
            fd = os.open(path, os.O_RDWR)
            for off, n in chunks(len(c), rnd):
                os.pwrite(fd, c[off:off + n], off)
            os.ftruncate(fd, len(c))
            os.close(fd)
            ack(afd, v)
    elif mode == "mmap":
        import mmap
        fd = os.open(path, os.O_RDWR)
        m = mmap.mmap(fd, MMAP_SIZE)
        while True:
            v += 1
            c = content(mode, v)
            for off, n in chunks(len(c), rnd):
                m[off:off + n] = c[off:off + n]
            m.flush()
            ack(afd, v)
    else:
        sys.exit("pl_writer: unknown mode " + mode)


def check(mode, path, ackpath):
    a = 0
    try:
        with open(ackpath) as f:
            lines = [l for l in f.read().split("\n") if l.strip()]
        if lines:
            a = int(lines[-1])
    except FileNotFoundError:
        pass
    with open(path, "rb") as f:
        got = f.read()
    if got == content(mode, a) or got == content(mode, a + 1):
        return 0
    for v in range(max(0, a - 3), a + 4):
        if got == content(mode, v):
            print("%s: holds version %d, acked %d" % (path, v, a))
            return 1
    print("%s: holds %d bytes that are no version (acked %d): %r..." %
          (path, len(got), a, got[:64]))
    return 1


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "init":
        with open(sys.argv[3], "wb") as f:
            f.write(content(sys.argv[2], 0))
    else:
        sys.exit("usage: pl_writer.py write|check MODE PATH ACK | init MODE PATH")


main()
