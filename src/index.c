/*
 * index.c - pending-extent index: a red-black tree of non-overlapping
 * extents keyed by file offset.
 */
#include <errno.h>
#include <stdlib.h>
/* libbsd's tree.h expects BSD's __unused. */
#ifndef __unused
#define __unused __attribute__((unused))
#endif
#include <bsd/sys/tree.h>

#include "index.h"

struct node {
	RB_ENTRY(node) rb;
	struct oa_ext e;
};

static int node_cmp(struct node *a, struct node *b)
{
	return a->e.off < b->e.off ? -1 : a->e.off > b->e.off;
}

RB_HEAD(ext_tree, node);
RB_GENERATE_STATIC(ext_tree, node, rb, node_cmp)

struct oa_index {
	struct ext_tree root;
	size_t count;
	uint64_t bytes;
};

struct oa_index *oa_index_new(void)
{
	struct oa_index *ix = calloc(1, sizeof(*ix));
	if (ix)
		RB_INIT(&ix->root);
	return ix;
}

void oa_index_clear(struct oa_index *ix)
{
	struct node *n, *next;
	for (n = RB_MIN(ext_tree, &ix->root); n; n = next) {
		next = RB_NEXT(ext_tree, &ix->root, n);
		RB_REMOVE(ext_tree, &ix->root, n);
		free(n);
	}
	ix->count = 0;
	ix->bytes = 0;
}

void oa_index_free(struct oa_index *ix)
{
	if (!ix)
		return;
	oa_index_clear(ix);
	free(ix);
}

/* First node whose extent ends after OFF. */
static struct node *first_after(struct oa_index *ix, uint64_t off)
{
	struct node key = { .e = { .off = off } };
	struct node *n = RB_NFIND(ext_tree, &ix->root, &key); /* start >= off */
	struct node *p = n ? RB_PREV(ext_tree, &ix->root, n)
			   : RB_MAX(ext_tree, &ix->root);
	if (p && p->e.off + p->e.len > off)
		return p;
	return n;
}

static void drop(struct oa_index *ix, struct node *n)
{
	RB_REMOVE(ext_tree, &ix->root, n);
	ix->count--;
	ix->bytes -= n->e.len;
	free(n);
}

int oa_index_insert(struct oa_index *ix, uint64_t off, uint64_t len,
		    uint64_t joff)
{
	uint64_t end = off + len;
	struct node *nn, *tail = NULL, *n, *next;

	if (len == 0)
		return 0;
	/* Allocate up front so that failure leaves the index untouched. */
	nn = malloc(sizeof(*nn));
	if (!nn) {
		errno = ENOMEM;
		return -1;
	}
	n = first_after(ix, off);
	if (n && n->e.off < off && n->e.off + n->e.len > end) {
		/* The new extent falls inside N: split N in two. */
		tail = malloc(sizeof(*tail));
		if (!tail) {
			free(nn);
			errno = ENOMEM;
			return -1;
		}
	}
	for (; n && n->e.off < end; n = next) {
		uint64_t nend = n->e.off + n->e.len;
		next = RB_NEXT(ext_tree, &ix->root, n);
		if (n->e.off < off) {
			if (nend > end) {
				tail->e.off = end;
				tail->e.len = nend - end;
				tail->e.joff = n->e.joff + (end - n->e.off);
				RB_INSERT(ext_tree, &ix->root, tail);
				ix->count++;
				next = NULL;
			}
			ix->bytes -= nend - off;
			n->e.len = off - n->e.off;
			if (nend > end)
				ix->bytes += nend - end;
		} else if (nend > end) {
			/* Trim the front; N keeps its place in the order. */
			uint64_t cut = end - n->e.off;
			n->e.off = end;
			n->e.joff += cut;
			n->e.len -= cut;
			ix->bytes -= cut;
		} else {
			drop(ix, n);
		}
	}
	/* Coalesce with a predecessor contiguous in file and journal: a run of
	 * sequential writes becomes one extent. */
	nn->e = (struct oa_ext){ off, len, joff };
	{
		struct node key = { .e = { .off = off } };
		struct node *s = RB_NFIND(ext_tree, &ix->root, &key);
		struct node *p = s ? RB_PREV(ext_tree, &ix->root, s)
				   : RB_MAX(ext_tree, &ix->root);
		if (p && p->e.off + p->e.len == off &&
		    p->e.joff + p->e.len == joff) {
			p->e.len += len;
			ix->bytes += len;
			free(nn);
			return 0;
		}
	}
	RB_INSERT(ext_tree, &ix->root, nn);
	ix->count++;
	ix->bytes += len;
	return 0;
}

void oa_index_truncate(struct oa_index *ix, uint64_t len)
{
	struct node *n = first_after(ix, len), *next;
	for (; n; n = next) {
		next = RB_NEXT(ext_tree, &ix->root, n);
		if (n->e.off < len) {
			ix->bytes -= n->e.off + n->e.len - len;
			n->e.len = len - n->e.off;
		} else {
			drop(ix, n);
		}
	}
}

size_t oa_index_count(const struct oa_index *ix)
{
	return ix->count;
}

uint64_t oa_index_bytes(const struct oa_index *ix)
{
	return ix->bytes;
}

uint64_t oa_index_end(const struct oa_index *ix)
{
	struct node *n = RB_MAX(ext_tree, &((struct oa_index *)ix)->root);
	return n ? n->e.off + n->e.len : 0;
}

void *oa_index_seek(struct oa_index *ix, uint64_t off)
{
	return first_after(ix, off);
}

void *oa_index_next(struct oa_index *ix, void *cursor)
{
	return RB_NEXT(ext_tree, &ix->root, (struct node *)cursor);
}

void oa_index_get(const void *cursor, struct oa_ext *e)
{
	*e = ((const struct node *)cursor)->e;
}

int oa_index_check(struct oa_index *ix)
{
	struct node *n;
	uint64_t prev_end = 0, bytes = 0;
	size_t count = 0;
	RB_FOREACH(n, ext_tree, &ix->root) {
		if (n->e.len == 0 || n->e.off < prev_end)
			return -1;
		prev_end = n->e.off + n->e.len;
		bytes += n->e.len;
		count++;
	}
	return (count == ix->count && bytes == ix->bytes) ? 0 : -1;
}
