/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rdmastream adaptive receive polling: how long a blocking receive that
 * finds nothing to read spins before it sleeps.
 *
 * Sleeping costs a wake-up and a context switch when the data arrives,
 * which is most of a small round trip; spinning costs a CPU for as long
 * as it lasts. So a socket spins only when its data has recently come
 * soon after it began to wait: it keeps an estimate of that delay (the
 * time from the start of a wait to the completion that ended it, measured
 * whether the wait spun or slept) and spins for twice the estimate, up to
 * a ceiling (module parameter spin_max_us). A socket whose data comes
 * later than the ceiling (an idle server, a slow peer) does not spin at
 * all until its waits are short again. Waits longer than the ceiling
 * count as twice the ceiling, so that one long idle period is forgotten
 * after a few short waits.
 *
 * Pure C with no kernel dependencies, shared with the unit tests. The
 * caller serialises access (the module holds lock_sock()).
 */
#ifndef RS_SPIN_H
#define RS_SPIN_H

#include "rs_proto.h"

struct rs_spin {
	u32 est_ns;	/* smoothed delay from wait start to data, ns */
	bool valid;	/* est_ns holds at least one sample */
};

/* How long the next wait may spin, ns; 0: sleep at once. */
u32 rs_spin_budget(const struct rs_spin *s, u32 max_ns);
/* A wait that began waited_ns before its data arrived. */
void rs_spin_sample(struct rs_spin *s, u64 waited_ns, u32 max_ns);

#endif /* RS_SPIN_H */
