/*
 * index.h - the pending-extent index of one transaction.
 *
 * A set of non-overlapping extents [off, off+len) of the file, each saying
 * where in the journal its bytes are (joff).  Later writes win: inserting an
 * extent trims, splits or removes whatever it overlaps.  Memory grows with
 * the number of distinct extents, not with their bytes.  A red-black tree
 * keyed by file offset (libbsd's <sys/tree.h>).
 */
#ifndef OA_INDEX_H
#define OA_INDEX_H

#include <stddef.h>
#include <stdint.h>

struct oa_ext {
	uint64_t off;   /* file offset */
	uint64_t len;   /* > 0 */
	uint64_t joff;  /* journal offset of the first byte */
};

struct oa_index;

struct oa_index *oa_index_new(void);
void oa_index_free(struct oa_index *ix);
void oa_index_clear(struct oa_index *ix);

/* Insert; coalesces with a neighbour contiguous in file and journal.
 * Returns 0, or -1 with ENOMEM (the index is unchanged). */
int oa_index_insert(struct oa_index *ix, uint64_t off, uint64_t len,
		    uint64_t joff);

/* Drop every byte at or beyond LEN (trims the extent that straddles it). */
void oa_index_truncate(struct oa_index *ix, uint64_t len);

/* Number of extents; end of the last one (0 when empty); bytes covered. */
size_t oa_index_count(const struct oa_index *ix);
uint64_t oa_index_end(const struct oa_index *ix);
uint64_t oa_index_bytes(const struct oa_index *ix);

/* Iteration in file order from the first extent that ends after OFF.
 * oa_index_seek returns an opaque cursor (NULL: none); oa_index_get fills
 * *E from a cursor, oa_index_next advances. */
void *oa_index_seek(struct oa_index *ix, uint64_t off);
void *oa_index_next(struct oa_index *ix, void *cursor);
void oa_index_get(const void *cursor, struct oa_ext *e);

/* Check the tree's invariants (sorted, non-overlapping, counters right);
 * 0 if sound.  For tests. */
int oa_index_check(struct oa_index *ix);

#endif
