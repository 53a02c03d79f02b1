// SPDX-License-Identifier: GPL-2.0
/*
 * rdmastream adaptive receive polling; see rs_spin.h.
 */
#include "rs_spin.h"

/* A socket without a sample yet spins for this share of the ceiling. */
#define RS_SPIN_FIRST_SHIFT	1
/* The estimate moves by a quarter of each sample's difference. */
#define RS_SPIN_GAIN_SHIFT	2

u32 rs_spin_budget(const struct rs_spin *s, u32 max_ns)
{
	u64 want;

	if (!max_ns)
		return 0;
	if (!s->valid)
		return max_ns >> RS_SPIN_FIRST_SHIFT;
	if (s->est_ns > max_ns)
		return 0;
	want = 2ULL * s->est_ns;
	return want < max_ns ? (u32)want : max_ns;
}

void rs_spin_sample(struct rs_spin *s, u64 waited_ns, u32 max_ns)
{
	u64 cap = 2ULL * max_ns;
	u32 v;

	if (waited_ns > cap)
		waited_ns = cap;
	v = waited_ns > 0xffffffffULL ? 0xffffffffU : (u32)waited_ns;
	/* the first sample is taken whole */
	if (s->valid && v >= s->est_ns)
		v = s->est_ns + ((v - s->est_ns) >> RS_SPIN_GAIN_SHIFT);
	else if (s->valid)
		v = s->est_ns - ((s->est_ns - v) >> RS_SPIN_GAIN_SHIFT);
	s->valid = true;
	/* rdmastream_info reads it without the caller's lock */
	RS_STORE_ONCE(&s->est_ns, v);
}
