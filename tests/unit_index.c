/*
 * unit_index.c - the pending-extent index against a byte-array model:
 * random inserts and truncates; after each, every byte's journal offset must
 * match the model (later writes win), the tree must be sorted and
 * non-overlapping, and sequential writes must coalesce into one extent.
 */
#include "testutil.h"
#include "index.h"

#define SPACE 4096
#define NONE UINT64_MAX

static uint64_t model[SPACE];   /* journal offset of each byte, or NONE */

static void check_against_model(struct oa_index *ix)
{
	uint64_t got[SPACE];
	struct oa_ext e;
	for (int i = 0; i < SPACE; i++)
		got[i] = NONE;
	CHECK(oa_index_check(ix) == 0);
	for (void *c = oa_index_seek(ix, 0); c; c = oa_index_next(ix, c)) {
		oa_index_get(c, &e);
		CHECK(e.len > 0 && e.off + e.len <= SPACE);
		for (uint64_t k = 0; k < e.len; k++)
			got[e.off + k] = e.joff + k;
	}
	for (int i = 0; i < SPACE; i++)
		CHECKF(got[i] == model[i], "byte %d: index %llu model %llu", i,
		       (unsigned long long)got[i], (unsigned long long)model[i]);
}

int main(void)
{
	struct oa_index *ix = oa_index_new();
	uint64_t joff = 1000000;
	unsigned seed = 12345;
	CHECK(ix);

	for (int i = 0; i < SPACE; i++)
		model[i] = NONE;
	for (int round = 0; round < 20000; round++) {
		int op = rand_r(&seed) % 10;
		if (op == 0) {
			uint64_t len = (uint64_t)(rand_r(&seed) % SPACE);
			oa_index_truncate(ix, len);
			for (uint64_t k = len; k < SPACE; k++)
				model[k] = NONE;
		} else {
			uint64_t off = (uint64_t)(rand_r(&seed) % SPACE);
			uint64_t len = 1 + (uint64_t)(rand_r(&seed) % 300);
			if (off + len > SPACE)
				len = SPACE - off;
			CHECK_OK(oa_index_insert(ix, off, len, joff));
			for (uint64_t k = 0; k < len; k++)
				model[off + k] = joff + k;
			/* Sometimes continue in the journal too (coalescing). */
			joff += len + (rand_r(&seed) % 2 ? 0 : 64);
		}
		if (round % 97 == 0)
			check_against_model(ix);
		if (round % 5000 == 4999) {
			oa_index_clear(ix);
			CHECK(oa_index_count(ix) == 0 && oa_index_end(ix) == 0);
			for (int i = 0; i < SPACE; i++)
				model[i] = NONE;
		}
	}
	check_against_model(ix);

	/* A sequential stream contiguous in the journal is one extent. */
	oa_index_clear(ix);
	for (uint64_t k = 0; k < 1000; k++)
		CHECK_OK(oa_index_insert(ix, k * 4096, 4096, 77 + k * 4096));
	CHECK_EQ(oa_index_count(ix), 1);
	CHECK_EQ(oa_index_bytes(ix), 1000 * 4096);
	CHECK_EQ(oa_index_end(ix), 1000 * 4096);

	/* A write inside an extent splits it in three. */
	CHECK_OK(oa_index_insert(ix, 8192, 10, 5));
	CHECK_EQ(oa_index_count(ix), 3);
	CHECK_EQ(oa_index_bytes(ix), 1000 * 4096);
	CHECK(oa_index_check(ix) == 0);
	oa_index_free(ix);
	printf("index: 20000 random operations match the model\n");
	return 0;
}
