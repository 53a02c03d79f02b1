// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the direct-transfer core (kmod/rs_adv.c), run in user
 * space.
 *
 * Small checks of the stale rules, the phases, the receiver's estimate and
 * its checks of what the peer writes; the scenario of MacArthur and
 * Russell's slides replayed step by step; and a randomized model: one
 * sender and one receiver joined by two FIFO channels (an RC queue pair),
 * applications sending and receiving a reference byte stream in random
 * sizes, several receives outstanding, MSG_WAITALL, cancels, indirect
 * bytes held back before they are posted and random delivery delays.
 * Every byte delivered is checked, every DIRECT must land in a live ADVERT
 * and every run must end with the whole stream and the FIN delivered.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rs_adv.h"
#include "unit.h"

/* True with a chance of p percent. */
static bool pct(u32 p)
{
	return rnd(100) < p;
}

/* The byte at offset off of the reference stream. */
static u8 stream_byte(u64 off)
{
	u64 x = (off + 1) * 0xd6e8feb86659fd93ULL;

	return (u8)(x >> 32 ^ x >> 51);
}

static u64 min64(u64 a, u64 b)
{
	return a < b ? a : b;
}

/* An ADVERT as a peer could send it. */
static struct rs_advert mk_adv(u32 phase, u64 seq, u32 id, u32 flags)
{
	return (struct rs_advert){
		.seq = seq, .len = 100, .phase = phase, .id = id,
		.flags = flags,
	};
}

/* The id of the ADVERT the sender would write into next, or ~0U. */
static u32 picked(struct rs_dtx *t)
{
	struct rs_advert *a = rs_dtx_pick(t);

	return a ? a->id : ~0U;
}

/*
 * The sender writes n bytes into the ADVERT it picks, which must be id,
 * and they arrive at the receiver: the slot that took them, or -1.
 */
static int direct(struct rs_dtx *t, struct rs_drx *r, u32 id, u32 n)
{
	struct rs_advert *a = rs_dtx_pick(t);
	u32 flags;

	if (!CHECK(a && a->id == id, "the sender picks ADVERT %#x", id))
		return -1;
	flags = rs_dtx_direct_sent(t, n) ? RS_DIR_F_COMPLETE : 0;
	return rs_drx_on_direct(r, id, n, flags);
}

static int test_phases(void)
{
	struct rs_dtx t;
	struct rs_advert a = mk_adv(3, 0, 7, 0);

	if (!CHECK(!rs_phase_direct(0) && rs_phase_direct(1) &&
		   !rs_phase_direct(2) && rs_phase_direct(3), "parity"))
		return -1;
	rs_dtx_init(&t);
	if (!CHECK(t.phase == 0 && t.seq == 0 && !rs_dtx_pick(&t),
		   "the sender starts indirect, with nothing queued"))
		return -1;
	if (!CHECK(rs_dtx_on_advert(&t, &a) && rs_dtx_pick(&t), "fresh"))
		return -1;
	if (!CHECK(rs_dtx_direct_sent(&t, 4) && t.phase == 3 &&
		   t.st.switches == 1, "direct: the ADVERT's phase"))
		return -1;
	rs_dtx_on_cancel(&t);
	if (!CHECK(t.phase == 4 && t.st.switches == 2,
		   "a cancel moves a direct sender to an indirect phase"))
		return -1;
	rs_dtx_on_cancel(&t);
	rs_dtx_indirect_sent(&t, 1);
	if (!CHECK(t.phase == 4 && t.st.switches == 2 && t.seq == 5,
		   "no switch when already indirect"))
		return -1;
	return 0;
}

/* The paper's rule: in an indirect phase, stale if P_A < P_S or S_A < S_S */
static int test_stale(void)
{
	struct rs_dtx t;
	struct rs_advert a;

	rs_dtx_init(&t);
	rs_dtx_indirect_sent(&t, 10);
	a = mk_adv(1, 9, 1, 0);
	if (!CHECK(rs_dtx_on_advert(&t, &a) && !rs_dtx_pick(&t) &&
		   t.st.stale == 1 && t.phase == 2,
		   "behind in sequence: stale, the sender's phase moves past"))
		return -1;
	a = mk_adv(1, 10, 2, 0);
	if (!CHECK(rs_dtx_on_advert(&t, &a) && !rs_dtx_pick(&t) &&
		   t.st.stale == 2 && t.phase == 2, "older phase: stale"))
		return -1;
	a = mk_adv(3, 10, 3, 0);
	if (!CHECK(rs_dtx_on_advert(&t, &a) && picked(&t) == 3 && t.phase == 2,
		   "newer phase, same seq: fresh"))
		return -1;
	a = mk_adv(3, 11, 4, 0);
	if (!CHECK(rs_dtx_on_advert(&t, &a) && t.count == 2, "queued"))
		return -1;
	if (!CHECK(rs_dtx_direct_sent(&t, 10) && t.seq == 20 && t.count == 1,
		   "a plain ADVERT completes on its first write"))
		return -1;
	if (!CHECK(picked(&t) == 4, "a direct phase takes the next one as is"))
		return -1;
	rs_dtx_indirect_sent(&t, 5);
	if (!CHECK(!t.count && t.st.stale == 3 && t.phase == 4 && t.seq == 25,
		   "going indirect drops what is queued"))
		return -1;
	a = mk_adv(5, 30, 5, 0);
	if (!CHECK(rs_dtx_on_advert(&t, &a) && picked(&t) == 5,
		   "ahead in sequence is not stale"))
		return -1;
	return 0;
}

static int test_advert_checks(void)
{
	struct rs_dtx t;
	struct rs_advert a = mk_adv(1, 0, 0, 0);
	u32 i;

	rs_dtx_init(&t);
	a.len = 0;
	if (!CHECK(!rs_dtx_on_advert(&t, &a), "empty ADVERT refused"))
		return -1;
	a = mk_adv(2, 0, 0, 0);
	if (!CHECK(!rs_dtx_on_advert(&t, &a), "even phase refused"))
		return -1;
	a = mk_adv(1, 0, 0, 0);
	a.filled = 1;
	if (!CHECK(!rs_dtx_on_advert(&t, &a), "already filled refused"))
		return -1;
	if (!CHECK(!t.count && !t.st.adverts, "refused ones are not kept"))
		return -1;
	for (i = 0; i < RS_ADV_SLOTS; i++) {
		a = mk_adv(1, i, i, 0);
		if (!CHECK(rs_dtx_on_advert(&t, &a), "ADVERT %u taken", i))
			return -1;
	}
	a = mk_adv(1, i, i, 0);
	if (!CHECK(!rs_dtx_on_advert(&t, &a) && t.count == RS_ADV_SLOTS,
		   "one more than the receiver may have: refused"))
		return -1;
	if (!CHECK(rs_dtx_direct_sent(&t, 1) && rs_dtx_on_advert(&t, &a) &&
		   t.count == RS_ADV_SLOTS, "room again once one is used"))
		return -1;
	return 0;
}

/* Direct-only's degraded mode: set once per lack of ADVERTs, cleared by one. */
static int test_degrade(void)
{
	struct rs_dtx t;
	struct rs_advert a = mk_adv(1, 0, 1, 0);

	rs_dtx_init(&t);
	if (!CHECK(!t.degraded && !t.st.degrades, "not degraded at first"))
		return -1;
	rs_dtx_degrade(&t);
	rs_dtx_degrade(&t);
	if (!CHECK(t.degraded && t.st.degrades == 1, "degraded, counted once"))
		return -1;
	rs_dtx_indirect_sent(&t, 10);
	a.seq = 10;
	a.phase = 1;
	if (!CHECK(rs_dtx_on_advert(&t, &a) && !t.degraded &&
		   picked(&t) == 1, "an ADVERT ends it"))
		return -1;
	rs_dtx_degrade(&t);
	a.seq = 5;
	a.phase = 3;
	a.id = 2;
	if (!CHECK(rs_dtx_on_advert(&t, &a) && !t.degraded &&
		   t.st.degrades == 2, "any valid one: the peer advertises"))
		return -1;
	a.len = 0;
	rs_dtx_degrade(&t);
	if (!CHECK(!rs_dtx_on_advert(&t, &a) && t.degraded,
		   "a refused one does not"))
		return -1;
	return 0;
}

static int test_waitall_sender(void)
{
	struct rs_dtx t;
	struct rs_advert a = mk_adv(1, 0, 1, RS_ADV_F_WAITALL);

	a.len = 10;
	rs_dtx_init(&t);
	if (!CHECK(rs_dtx_on_advert(&t, &a), "taken"))
		return -1;
	if (!CHECK(!rs_dtx_direct_sent(&t, 4) && t.count == 1 &&
		   t.q[t.head].filled == 4, "WAITALL: a partial write"))
		return -1;
	if (!CHECK(rs_dtx_pick(&t) == &t.q[t.head], "still the head"))
		return -1;
	if (!CHECK(rs_dtx_direct_sent(&t, 6) && !t.count, "filled"))
		return -1;
	if (!CHECK(t.st.used == 1 && t.st.direct_bytes == 10 && t.seq == 10,
		   "counted once"))
		return -1;
	return 0;
}

/* S'_r: bytes in plus one per plain live ADVERT, the rest for WAITALL. */
static int test_estimate(void)
{
	struct rs_drx r;
	struct rs_advert a, b, c;
	int s0, s1;

	rs_drx_init(&r);
	s0 = rs_drx_advert(&r, 100, 0, &a);
	s1 = rs_drx_advert(&r, 50, 0xff, &b);
	if (!CHECK(s0 >= 0 && s1 >= 0 && s0 != s1 && a.seq == 0 &&
		   b.seq == 1 && a.phase == 1 && b.phase == 1 &&
		   r.st.switches == 1, "first two ADVERTs"))
		return -1;
	if (!CHECK(b.flags == RS_ADV_F_WAITALL && !a.flags && b.len == 50 &&
		   a.id == rs_adv_id(s0, 0) && !a.filled, "as sent"))
		return -1;
	if (!CHECK(rs_drx_advert(&r, 7, 0, &c) >= 0 && c.seq == 51 &&
		   rs_drx_estimate(&r) == 52, "WAITALL expects all of it"))
		return -1;
	if (!CHECK(rs_drx_on_direct(&r, a.id, 30, RS_DIR_F_COMPLETE) == s0 &&
		   rs_drx_estimate(&r) == 30 + 50 + 1, "a filled plain one"))
		return -1;
	if (!CHECK(rs_drx_on_direct(&r, b.id, 20, 0) == s1 &&
		   rs_drx_estimate(&r) == 50 + 30 + 1, "WAITALL partly filled"))
		return -1;
	if (!CHECK(rs_drx_on_indirect(&r, 5) == 2 &&
		   rs_drx_estimate(&r) == 55 && r.phase == 2 && !r.live &&
		   r.adv[s1].state == RS_RADV_DEAD,
		   "indirect bytes kill the live ones; exact again"))
		return -1;
	if (!CHECK(r.adv[s1].filled == 20 && r.adv[s0].state == RS_RADV_DONE,
		   "what they got is kept"))
		return -1;
	return 0;
}

/* What the receiver refuses; a refused DIRECT changes nothing. */
static int test_direct_checks(void)
{
	struct rs_drx r;
	const u32 c = RS_DIR_F_COMPLETE;
	struct rs_advert a, b;
	int s, s2;

	rs_drx_init(&r);
	s = rs_drx_advert(&r, 10, RS_ADV_F_WAITALL, &a);
	if (!CHECK(s >= 0 && rs_drx_on_direct(&r, a.id, 0, 0) < 0, "empty") ||
	    !CHECK(rs_drx_on_direct(&r, a.id, 11, c) < 0, "overfill") ||
	    !CHECK(rs_drx_on_direct(&r, a.id, 4, c) < 0, "early COMPLETE") ||
	    !CHECK(rs_drx_on_direct(&r, a.id + (1 << 8), 4, 0) < 0, "gen") ||
	    !CHECK(rs_drx_on_direct(&r, rs_adv_id(RS_ADV_SLOTS, 0), 4, 0) < 0,
		   "no such slot") ||
	    !CHECK(rs_drx_on_direct(&r, rs_adv_id(s + 1, 0), 4, 0) < 0,
		   "free slot") ||
	    !CHECK(!r.in && !r.adv[s].filled && r.live == 1, "no trace"))
		return -1;
	if (!CHECK(rs_drx_on_direct(&r, a.id, 4, 0) == s && r.in == 4, "4") ||
	    !CHECK(rs_drx_on_direct(&r, a.id, 6, 0) < 0, "late COMPLETE") ||
	    !CHECK(rs_drx_on_direct(&r, a.id, 7, c) < 0, "overfill the rest") ||
	    !CHECK(rs_drx_on_direct(&r, a.id, 6, c) == s && !r.live &&
		   r.adv[s].state == RS_RADV_DONE && r.in == 10, "filled") ||
	    !CHECK(rs_drx_on_direct(&r, a.id, 1, c) < 0, "done slot"))
		return -1;
	rs_drx_release(&r, s);
	s2 = rs_drx_advert(&r, 10, 0, &b);
	if (!CHECK(s2 == s && b.id != a.id && r.adv[s].gen == 1, "new gen") ||
	    !CHECK(rs_drx_on_direct(&r, a.id, 1, c) < 0, "old generation") ||
	    !CHECK(rs_drx_on_direct(&r, b.id, 5, 0) < 0, "plain: no COMPLETE"))
		return -1;
	rs_drx_on_indirect(&r, 1);
	if (!CHECK(rs_drx_on_direct(&r, b.id, 5, c) < 0, "dead slot"))
		return -1;
	r.adv[s].gen = 0xffffff;
	rs_drx_release(&r, s);
	if (!CHECK(r.adv[s].gen == 0 && r.adv[s].state == RS_RADV_FREE &&
		   !r.live, "generation wraps in its 24 bits"))
		return -1;
	return 0;
}

static int test_may_advert(void)
{
	struct rs_drx r;
	struct rs_advert a;
	int i, s = -1;

	rs_drx_init(&r);
	if (!CHECK(rs_drx_may_advert(&r, 0) && !rs_drx_may_advert(&r, 1),
		   "not while stream bytes are unread"))
		return -1;
	if (!CHECK(rs_drx_advert(&r, 0, 0, &a) < 0, "no empty ADVERT"))
		return -1;
	for (i = 0; i < RS_ADV_SLOTS; i++)
		s = rs_drx_advert(&r, 1, 0, &a);
	if (!CHECK(s >= 0 && r.live == RS_ADV_SLOTS &&
		   !rs_drx_may_advert(&r, 0) && rs_drx_advert(&r, 1, 0, &a) < 0,
		   "all slots in use"))
		return -1;
	rs_drx_release(&r, s);
	if (!CHECK(rs_drx_may_advert(&r, 0) && r.live == RS_ADV_SLOTS - 1,
		   "a released slot"))
		return -1;
	if (!CHECK(rs_drx_end(&r) == RS_ADV_SLOTS - 1 && !r.live &&
		   r.st.dead == RS_ADV_SLOTS - 1 &&
		   r.adv[0].state == RS_RADV_DEAD,
		   "the FIN kills the live ones"))
		return -1;
	if (!CHECK(!rs_drx_may_advert(&r, 0) && rs_drx_advert(&r, 1, 0, &a) < 0,
		   "none after the FIN"))
		return -1;
	return 0;
}

static int test_cancel(void)
{
	struct rs_dtx t;
	struct rs_drx r;
	struct rs_advert a, b, c;
	int sa, sb;

	rs_dtx_init(&t);
	rs_drx_init(&r);
	if (!CHECK(!rs_drx_cancel(&r) && !rs_drx_on_cancel_ack(&r),
		   "nothing to cancel, nothing to ack"))
		return -1;
	sa = rs_drx_advert(&r, 10, RS_ADV_F_WAITALL, &a);
	sb = rs_drx_advert(&r, 10, 0, &b);
	if (!CHECK(rs_drx_cancel(&r) && r.cancel_pending &&
		   !rs_drx_cancel(&r) && r.st.cancels == 1, "one at a time"))
		return -1;
	if (!CHECK(!rs_drx_may_advert(&r, 0) && rs_drx_advert(&r, 1, 0, &c) < 0,
		   "no ADVERT while a cancel is pending"))
		return -1;
	/* the sender writes part of A before the CANCEL reaches it */
	if (!CHECK(rs_dtx_on_advert(&t, &a) && rs_dtx_on_advert(&t, &b) &&
		   direct(&t, &r, a.id, 4) == sa, "a write races the cancel"))
		return -1;
	rs_dtx_on_cancel(&t);
	if (!CHECK(!t.count && t.st.stale == 2 && t.phase == 2 &&
		   !rs_dtx_pick(&t), "the sender drops both"))
		return -1;
	if (!CHECK(rs_drx_on_cancel_ack(&r) && !r.cancel_pending && !r.live &&
		   r.adv[sa].state == RS_RADV_DEAD && r.adv[sa].filled == 4 &&
		   r.adv[sb].state == RS_RADV_DEAD && r.st.cancelled == 2 &&
		   r.phase == 2, "the ack: both dead, A keeps its 4 bytes"))
		return -1;
	rs_drx_release(&r, sa);
	rs_drx_release(&r, sb);
	if (!CHECK(rs_drx_advert(&r, 5, 0, &c) >= 0 && c.phase == 3 &&
		   c.seq == 4 && rs_dtx_on_advert(&t, &c) &&
		   rs_dtx_pick(&t), "the next one is fresh"))
		return -1;
	return 0;
}

/*
 * The slides' scenario: two bytes went direct; the receiver posts A3 and
 * A4; a single send fills A3; the receiver posts A5 and A6; A4 is delayed
 * so the sender goes indirect, and A4-A6 arrive stale (A6's sequence
 * number even matches: only the phase, incremented when the sender went
 * indirect, tells it apart). The receiver holds off until it has read the
 * indirect bytes, then advertises again, and the sender matches the new
 * ADVERT: its sequence number matches and its phase is greater.
 */
static int test_paper(void)
{
	struct rs_dtx t;
	struct rs_drx r;
	struct rs_advert a[9];
	int s[9], i;

	rs_dtx_init(&t);
	rs_drx_init(&r);
	s[1] = rs_drx_advert(&r, 64, 0, &a[1]);
	s[2] = rs_drx_advert(&r, 64, 0, &a[2]);
	if (!CHECK(a[1].seq == 0 && a[2].seq == 1 && a[2].phase == 1 &&
		   rs_dtx_on_advert(&t, &a[1]) && rs_dtx_on_advert(&t, &a[2]),
		   "A1, A2") ||
	    !CHECK(direct(&t, &r, a[1].id, 1) == s[1] &&
		   direct(&t, &r, a[2].id, 1) == s[2], "one byte each") ||
	    !CHECK(t.phase == 1 && t.seq == 2 && r.in == 2 &&
		   rs_drx_estimate(&r) == 2, "two bytes sent directly"))
		return -1;
	rs_drx_release(&r, s[1]);
	rs_drx_release(&r, s[2]);
	s[3] = rs_drx_advert(&r, 64, 0, &a[3]);
	s[4] = rs_drx_advert(&r, 64, 0, &a[4]);
	if (!CHECK(a[3].seq == 2 && a[4].seq == 3 && a[4].phase == 1, "A3") ||
	    !CHECK(rs_dtx_on_advert(&t, &a[3]) &&
		   direct(&t, &r, a[3].id, 8) == s[3], "a send fills A3") ||
	    !CHECK(t.seq == 10 && r.in == 10 && rs_drx_estimate(&r) == 11,
		   "A4 is still expected to take a byte"))
		return -1;
	rs_drx_release(&r, s[3]);
	s[5] = rs_drx_advert(&r, 64, 0, &a[5]);
	s[6] = rs_drx_advert(&r, 64, 0, &a[6]);
	if (!CHECK(a[5].seq == 11 && a[6].seq == 12 && a[6].phase == 1,
		   "A5 A6") ||
	    !CHECK(!rs_dtx_pick(&t), "A4 delayed: nothing to write into"))
		return -1;
	rs_dtx_indirect_sent(&t, 2);
	if (!CHECK(t.phase == 2 && t.seq == 12 && a[6].seq == t.seq,
		   "indirect; A6's sequence number matches the sender's"))
		return -1;
	for (i = 4; i <= 6; i++)
		if (!CHECK(rs_dtx_on_advert(&t, &a[i]) && !rs_dtx_pick(&t),
			   "A%d stale", i))
			return -1;
	if (!CHECK(t.st.stale == 3 && !t.count && t.phase == 2, "all three") ||
	    !CHECK(rs_drx_on_indirect(&r, 2) == 3 && r.phase == 2 &&
		   r.in == 12 && rs_drx_estimate(&r) == 12, "A4-A6 dead") ||
	    !CHECK(!rs_drx_may_advert(&r, 2), "holds off: bytes unread"))
		return -1;
	for (i = 4; i <= 6; i++)
		rs_drx_release(&r, s[i]);
	/* A4's receive took the two bytes; A5's and A6's advertise again */
	s[7] = rs_drx_advert(&r, 64, 0, &a[7]);
	s[8] = rs_drx_advert(&r, 64, 0, &a[8]);
	if (!CHECK(a[7].phase == 3 && a[7].seq == 12 && a[8].seq == 13,
		   "caught up: A7 A8") ||
	    !CHECK(rs_dtx_on_advert(&t, &a[7]) && rs_dtx_on_advert(&t, &a[8]),
		   "taken") ||
	    !CHECK(direct(&t, &r, a[7].id, 5) == s[7] && t.phase == 3 &&
		   direct(&t, &r, a[8].id, 3) == s[8], "A7 matched, then A8") ||
	    !CHECK(t.seq == 20 && r.in == 20 && t.st.direct_bytes == 18 &&
		   r.st.direct_bytes == 18 && r.st.indirect_bytes == 2 &&
		   t.st.used == 5 && r.st.used == 5, "both ends agree"))
		return -1;
	return 0;
}

/*
 * The slides' note: the phase of a sender that throws a stale ADVERT away
 * moves past the ADVERT's, else a later ADVERT of that phase (A6) whose
 * estimate happens to match would be taken. Here the sender is already
 * indirect when A4-A6 (phase 3) are overtaken by two indirect bytes.
 */
static int test_phase_bump(void)
{
	struct rs_dtx t;
	struct rs_drx r;
	struct rs_advert a[8];
	int s[8], i;

	rs_dtx_init(&t);
	rs_drx_init(&r);
	s[1] = rs_drx_advert(&r, 64, 0, &a[1]);
	rs_dtx_indirect_sent(&t, 3);
	if (!CHECK(rs_dtx_on_advert(&t, &a[1]) && !rs_dtx_pick(&t) &&
		   t.phase == 2 && rs_drx_on_indirect(&r, 3) == 1 &&
		   r.phase == 2, "A1 overtaken: both in phase 2"))
		return -1;
	rs_drx_release(&r, s[1]);
	for (i = 4; i <= 6; i++)
		s[i] = rs_drx_advert(&r, 64, 0, &a[i]);
	rs_dtx_indirect_sent(&t, 2);
	if (!CHECK(a[4].phase == 3 && a[4].seq == 3 && a[6].seq == 5 &&
		   t.phase == 2 && t.seq == 5, "A4-A6, 2 bytes indirect") ||
	    !CHECK(a[6].phase > t.phase && a[6].seq == t.seq,
		   "on its own A6 would look fresh"))
		return -1;
	if (!CHECK(rs_dtx_on_advert(&t, &a[4]) && !rs_dtx_pick(&t) &&
		   t.phase == 4, "A4 stale by sequence: phase past it"))
		return -1;
	for (i = 5; i <= 6; i++)
		if (!CHECK(rs_dtx_on_advert(&t, &a[i]) && !rs_dtx_pick(&t),
			   "A%d stale by phase", i))
			return -1;
	if (!CHECK(t.st.stale == 4 && rs_drx_on_indirect(&r, 2) == 3 &&
		   r.phase == 4, "receiver: A4-A6 dead"))
		return -1;
	for (i = 4; i <= 6; i++)
		rs_drx_release(&r, s[i]);
	s[7] = rs_drx_advert(&r, 64, 0, &a[7]);
	if (!CHECK(a[7].phase == 5 && a[7].seq == 5 &&
		   rs_dtx_on_advert(&t, &a[7]) &&
		   direct(&t, &r, a[7].id, 9) == s[7] && t.phase == 5,
		   "the next ADVERT is matched"))
		return -1;
	return 0;
}

/*
 * The randomized model. The sender's committed indirect bytes may wait in
 * a local queue before they are posted (in order); the receiver keeps up
 * to P.outstanding receives, served in posting order. Messages:
 * S->R: INDIRECT, DIRECT, CANCEL_ACK, FIN; R->S: ADVERT, CANCEL.
 */
enum msg_type { M_INDIRECT, M_DIRECT, M_CANCEL_ACK, M_FIN, M_ADVERT,
		M_CANCEL };

struct msg {
	enum msg_type type;
	u32 id;			/* DIRECT: the ADVERT written into */
	u32 len;		/* INDIRECT, DIRECT: bytes */
	u32 flags;		/* DIRECT: RS_DIR_F_* */
	u64 off;		/* stream offset of the first byte; FIN: end */
	struct rs_advert adv;	/* ADVERT */
};

#define QMAX		8192
#define RECV_MAX	4096
#define MAX_STEPS	2000000

struct chan {
	struct msg m[QMAX];
	u32 head, tail;
};

struct params {
	u64 limit;		/* stream length */
	u32 send_max;		/* largest application send */
	u32 chunk_max;		/* largest indirect write */
	u32 recv_max;		/* largest application receive */
	u32 outstanding;	/* receives the application keeps posted */
	u32 waitall;		/* % of receives with MSG_WAITALL */
	u32 advert;		/* % a receive advertises when allowed */
	u32 force;		/* % of writes indirect despite an ADVERT */
	u32 hold;		/* % of indirect writes held back */
	u32 wait;		/* % the sender waits for an ADVERT */
	u32 cancel;		/* % chance of a cancel when tried */
	u32 lag[2];		/* % a delivery is put off: S->R, R->S */
	u32 window;		/* messages in flight at most, each way */
};

struct sender {
	struct rs_dtx t;
	u64 written;		/* bytes the application has sent */
	u64 held;		/* committed indirect bytes not posted */
	u32 acks;		/* CANCEL_ACKs sent */
	bool fin;
	bool held_advert;	/* an ADVERT came while bytes were held */
};

struct req {
	u32 len, got;
	bool waitall;
	int slot;		/* the ADVERT of the rest of buf, or -1 */
	u32 base;		/* got when it went out */
	u8 buf[RECV_MAX];
};

struct receiver {
	struct rs_drx r;
	u8 *ring;		/* the stream buffer, never wrapped here */
	u64 ring_in, ring_out;
	struct req q[RS_ADV_SLOTS];	/* outstanding receives */
	u32 head, count;
	struct req *owner[RS_ADV_SLOTS];	/* which receive a slot is */
	u32 owner_id[RS_ADV_SLOTS];		/* ...and the id it went as */
	u64 delivered;		/* stream bytes the application got */
	bool fin, eof;
	bool partial;		/* a WAITALL ADVERT died partly filled */
};

/* Cases that exercised each path, so that passing is not vacuous. */
struct totals {
	u32 cases, direct, mixed, stale, switches, redirect, cancels;
	u32 partial, held;
	u64 steps, bytes, direct_bytes;
};

static struct params P;
static struct sender S;
static struct receiver R;
static struct chan s2r, r2s;	/* in flight */
static struct chan hold;	/* the sender's held indirect writes */
static struct totals tot;
static u32 seed;
static bool tracing;		/* RS_ADV_TRACE set: print every event */

static void trace(const char *fmt, ...)
{
	va_list ap;

	if (!tracing)
		return;
	printf("#  S[p%u s%llu q%u] R[p%u in%llu live%u] ", S.t.phase,
	       (unsigned long long)S.t.seq, S.t.count, R.r.phase,
	       (unsigned long long)R.r.in, R.r.live);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static bool ch_empty(const struct chan *c)
{
	return c->head == c->tail;
}

static void ch_push(struct chan *c, const struct msg *m)
{
	if (CHECK(c->tail - c->head < QMAX, "seed %u: channel full", seed))
		c->m[c->tail++ % QMAX] = *m;
}

static u32 ch_len(const struct chan *c)
{
	return c->tail - c->head;
}

static struct msg ch_pop(struct chan *c)
{
	return c->m[c->head++ % QMAX];
}

/* rs_dtx_pick(): nothing may overtake committed indirect bytes. */
static struct rs_advert *pick(void)
{
	struct rs_advert *a = rs_dtx_pick(&S.t);

	CHECK(!a || !S.held,
	      "seed %u: ADVERT %#x fresh with %llu indirect bytes unposted",
	      seed, a ? a->id : 0, (unsigned long long)S.held);
	return a;
}

static void app_send(void)
{
	S.written += min64(1 + rnd(P.send_max), P.limit - S.written);
}

static void send_direct(struct rs_advert *a, u64 avail)
{
	struct msg m = { .type = M_DIRECT, .id = a->id, .off = S.t.seq };

	m.len = min64(a->len - a->filled, avail);
	if (!rnd(4))
		m.len = 1 + rnd(m.len);
	if (rs_dtx_direct_sent(&S.t, m.len))
		m.flags = RS_DIR_F_COMPLETE;
	trace("DIRECT %#x %u bytes at %llu flags %u", m.id, m.len,
	      (unsigned long long)m.off, m.flags);
	ch_push(&s2r, &m);
}

static void send_indirect(u64 avail)
{
	struct msg m = { .type = M_INDIRECT, .off = S.t.seq };

	m.len = min64(1 + rnd(P.chunk_max), avail);
	rs_dtx_indirect_sent(&S.t, m.len);
	if (S.held || pct(P.hold)) {
		S.held += m.len;
		ch_push(&hold, &m);
	} else {
		ch_push(&s2r, &m);
	}
	trace("INDIRECT %u bytes at %llu%s", m.len, (unsigned long long)m.off,
	      S.held ? " held" : "");
}

/* The sender's transmit path: one write, or the FIN at the end. */
static void sender_tx(void)
{
	u64 avail = S.written - S.t.seq;
	struct msg fin = { .type = M_FIN, .off = S.t.seq };
	struct rs_advert *a;

	if (ch_len(&s2r) + ch_len(&hold) >= P.window)
		return;
	if (!avail) {
		if (S.written == P.limit && !S.held && !S.fin) {
			S.fin = true;
			ch_push(&s2r, &fin);
		}
		return;
	}
	a = pick();
	if (a && !pct(P.force))
		send_direct(a, avail);
	else if (a || !pct(P.wait))
		send_indirect(avail);
}

/* Held indirect writes are posted, oldest first. */
static void post_held(void)
{
	u32 n = 1 + rnd(4);
	struct msg m;

	while (n-- && !ch_empty(&hold)) {
		m = ch_pop(&hold);
		S.held -= m.len;
		ch_push(&s2r, &m);
	}
}

static void sender_rx(const struct msg *m)
{
	struct msg ack = { .type = M_CANCEL_ACK };

	trace("sender gets %s %#x p%u s%llu len %u flags %u",
	      m->type == M_ADVERT ? "ADVERT" : "CANCEL", m->adv.id,
	      m->adv.phase, (unsigned long long)m->adv.seq, m->adv.len,
	      m->adv.flags);
	if (m->type == M_ADVERT) {
		S.held_advert |= S.held > 0;
		CHECK(rs_dtx_on_advert(&S.t, &m->adv),
		      "seed %u: ADVERT %#x refused (%u queued)", seed,
		      m->adv.id, S.t.count);
		pick();
		return;
	}
	rs_dtx_on_cancel(&S.t);
	CHECK(!S.t.count && !rs_phase_direct(S.t.phase),
	      "seed %u: ADVERTs kept after a cancel", seed);
	S.acks++;
	ch_push(&s2r, &ack);
}

static struct req *req_at(u32 i)
{
	return &R.q[(R.head + i) % RS_ADV_SLOTS];
}

static u64 ring_avail(void)
{
	return R.ring_in - R.ring_out;
}

static void rx_indirect(const struct msg *m)
{
	u32 i;

	if (!CHECK(m->off == R.r.in && m->off + m->len <= P.limit,
		   "seed %u: indirect bytes at %llu, expected %llu", seed,
		   (unsigned long long)m->off, (unsigned long long)R.r.in))
		return;
	for (i = 0; i < m->len; i++)
		R.ring[R.ring_in + i] = stream_byte(m->off + i);
	R.ring_in += m->len;
	rs_drx_on_indirect(&R.r, m->len);
}

static void rx_direct(const struct msg *m)
{
	struct req *q;
	u32 i, at;
	int slot;

	if (!CHECK(m->off == R.r.in,
		   "seed %u: direct bytes at %llu, expected %llu", seed,
		   (unsigned long long)m->off, (unsigned long long)R.r.in))
		return;
	slot = rs_drx_on_direct(&R.r, m->id, m->len, m->flags);
	if (!CHECK(slot >= 0,
		   "seed %u: DIRECT %u bytes, flags %u, into %#x refused (%u)",
		   seed, m->len, m->flags, m->id,
		   R.r.adv[rs_adv_slot(m->id) % RS_ADV_SLOTS].state))
		return;
	q = R.owner[slot];
	if (!CHECK(q && q->slot == slot && R.owner_id[slot] == m->id,
		   "seed %u: DIRECT into a released ADVERT", seed))
		return;
	at = q->base + R.r.adv[slot].filled - m->len;
	if (!CHECK(at + m->len <= q->len, "seed %u: beyond the buffer", seed))
		return;
	for (i = 0; i < m->len; i++)
		q->buf[at + i] = stream_byte(m->off + i);
}

static void receiver_rx(const struct msg *m)
{
	trace("receiver gets %u: %#x %u bytes at %llu flags %u", m->type,
	      m->id, m->len, (unsigned long long)m->off, m->flags);
	switch (m->type) {
	case M_INDIRECT:
		rx_indirect(m);
		break;
	case M_DIRECT:
		rx_direct(m);
		break;
	case M_CANCEL_ACK:
		CHECK(rs_drx_on_cancel_ack(&R.r),
		      "seed %u: CANCEL_ACK without a CANCEL", seed);
		break;
	default:
		CHECK(m->off == R.r.in && m->off == P.limit,
		      "seed %u: FIN at %llu", seed,
		      (unsigned long long)m->off);
		rs_drx_end(&R.r);
		R.fin = true;
	}
}

/* Up to four messages in flight from one end reach the other. */
static void deliver(struct chan *c, u32 lag, void (*rx)(const struct msg *))
{
	u32 n = 1 + rnd(4);
	struct msg m;

	if (pct(lag))
		return;
	while (n-- && !ch_empty(c)) {
		m = ch_pop(c);
		rx(&m);
	}
}

static void post_recv(void)
{
	struct req *q;

	if (R.eof || R.count >= P.outstanding)
		return;
	q = req_at(R.count++);
	q->len = 1 + rnd(P.recv_max);
	q->got = 0;
	q->waitall = pct(P.waitall);
	q->slot = -1;
	trace("receive %ld posted: %u bytes%s", (long)(q - R.q), q->len,
	      q->waitall ? " WAITALL" : "");
}

/* q's ADVERT is filled or dead: its bytes are q's, the slot goes. */
static void req_settle(struct req *q)
{
	struct rs_radv *v = &R.r.adv[q->slot];

	if (v->state == RS_RADV_LIVE)
		return;
	CHECK(v->state == RS_RADV_DONE || v->state == RS_RADV_DEAD,
	      "seed %u: slot %d of a receive is free", seed, q->slot);
	CHECK(q->got == q->base && v->filled <= q->len - q->got,
	      "seed %u: receive bookkeeping", seed);
	if (v->state == RS_RADV_DEAD && v->filled)
		R.partial = true;
	trace("receive %ld: slot %d %s with %u bytes", (long)(q - R.q),
	      q->slot, v->state == RS_RADV_DONE ? "done" : "dead", v->filled);
	q->got += v->filled;
	R.owner[q->slot] = NULL;
	rs_drx_release(&R.r, q->slot);
	q->slot = -1;
}

static bool req_done(const struct req *q)
{
	if (q->slot >= 0)
		return false;
	if (q->waitall ? q->got == q->len : q->got > 0)
		return true;
	return R.fin && !ring_avail();
}

static void ring_copy(struct req *q)
{
	u64 n = min64(ring_avail(), q->len - q->got);

	if (n)
		trace("receive %ld copies %llu ring bytes", (long)(q - R.q),
		      (unsigned long long)n);
	memcpy(q->buf + q->got, R.ring + R.ring_out, n);
	q->got += n;
	R.ring_out += n;
}

/* The head receive returns to the application: check every byte. */
static bool req_deliver(struct req *q)
{
	u32 i;

	for (i = 0; i < q->got; i++)
		if (!CHECK(q->buf[i] == stream_byte(R.delivered + i),
			   "seed %u: stream byte %llu wrong", seed,
			   (unsigned long long)(R.delivered + i)))
			return false;
	trace("receive %ld returns %u bytes", (long)(q - R.q), q->got);
	R.delivered += q->got;
	if (!q->got) {
		R.eof = true;
		CHECK(R.delivered == P.limit, "seed %u: EOF at %llu of %llu",
		      seed, (unsigned long long)R.delivered,
		      (unsigned long long)P.limit);
	}
	R.head = (R.head + 1) % RS_ADV_SLOTS;
	R.count--;
	return true;
}

static void advertise(struct req *q)
{
	struct msg m = { .type = M_ADVERT };
	u32 flags = q->waitall ? RS_ADV_F_WAITALL : 0;
	int slot = rs_drx_advert(&R.r, q->len - q->got, flags, &m.adv);

	if (!CHECK(slot >= 0 && !R.owner[slot], "seed %u: no slot", seed))
		return;
	q->slot = slot;
	q->base = q->got;
	R.owner[slot] = q;
	R.owner_id[slot] = m.adv.id;
	trace("ADVERT %#x p%u s%llu len %u flags %u for receive %ld",
	      m.adv.id, m.adv.phase, (unsigned long long)m.adv.seq,
	      m.adv.len, m.adv.flags, (long)(q - R.q));
	ch_push(&r2s, &m);
}

/* Receives from the head return, after copying from the stream buffer. */
static void recv_complete(void)
{
	struct req *q;
	u32 i;

	while (R.count) {
		q = req_at(0);
		if (q->slot < 0 && !req_done(q))
			ring_copy(q);
		if (!req_done(q) || !req_deliver(q))
			break;
	}
	for (i = 1; i < R.count; i++)
		CHECK(!req_done(req_at(i)),
		      "seed %u: receive %u filled before an earlier one",
		      seed, i);
}

/* Waiting receives advertise their buffers in order, while allowed. */
static void recv_advertise(void)
{
	struct req *q;
	u32 i;

	for (i = 0; i < R.count; i++) {
		q = req_at(i);
		if (q->slot >= 0)
			continue;
		if (req_done(q) || !rs_drx_may_advert(&R.r, ring_avail()) ||
		    ch_len(&r2s) >= P.window || !pct(P.advert))
			break;
		advertise(q);
	}
}

/*
 * The receiving application: settle finished ADVERTs, complete receives,
 * advertise. It may also try to advertise first: the core must refuse
 * while stream bytes are unread.
 */
static void recv_app(void)
{
	u32 i;

	for (i = 0; i < R.count; i++)
		if (req_at(i)->slot >= 0)
			req_settle(req_at(i));
	if (!rnd(4))
		recv_advertise();
	recv_complete();
	recv_advertise();
}

static void recv_cancel(void)
{
	struct msg m = { .type = M_CANCEL };

	if (pct(P.cancel) && rs_drx_cancel(&R.r)) {
		trace("CANCEL");
		ch_push(&r2s, &m);
	}
}

static void step(void)
{
	switch (rnd(10)) {
	case 0:
		app_send();
		break;
	case 1:
	case 2:
		sender_tx();
		break;
	case 3:
		post_held();
		break;
	case 4:
		deliver(&s2r, P.lag[0], receiver_rx);
		break;
	case 5:
		deliver(&r2s, P.lag[1], sender_rx);
		break;
	case 6:
		post_recv();
		break;
	case 7:
	case 8:
		recv_app();
		break;
	default:
		recv_cancel();
	}
}

/* What holds between any two steps. */
static void invariants(void)
{
	u32 i, live = 0;

	for (i = 0; i < RS_ADV_SLOTS; i++)
		live += R.r.adv[i].state == RS_RADV_LIVE;
	CHECK(live == R.r.live, "seed %u: live count %u, %u live", seed,
	      R.r.live, live);
	CHECK(!R.r.live || !ring_avail(),
	      "seed %u: an ADVERT live while stream bytes are unread", seed);
	CHECK(R.r.in == R.ring_in + R.r.st.direct_bytes && R.r.in <= S.t.seq,
	      "seed %u: receiver's S_r", seed);
	CHECK(S.t.count <= RS_ADV_SLOTS && S.t.seq <= S.written,
	      "seed %u: sender state", seed);
	CHECK(S.t.phase <= R.r.phase + 1,
	      "seed %u: sender phase %u ahead of the receiver's %u", seed,
	      S.t.phase, R.r.phase);
}

static void setup(void)
{
	static const u32 sizes[] = { 1, 7, 64, 512, 1500, 4096 };

	rng_state = 0x243f6a8885a308d3ULL ^ ((u64)seed << 29) ^ seed;
	for (int i = 0; i < 8; i++)
		rnd(0);
	P.limit = rnd(8) ? rnd(1U << (6 + rnd(9))) : rnd(8);
	P.send_max = sizes[rnd(ARRAY_SIZE(sizes))];
	P.chunk_max = sizes[rnd(ARRAY_SIZE(sizes))];
	P.recv_max = sizes[rnd(ARRAY_SIZE(sizes))];
	P.outstanding = 1 + rnd(RS_ADV_SLOTS);
	P.waitall = rnd(3) ? rnd(101) : 0;
	P.advert = rnd(6) ? 50 + rnd(51) : rnd(50);
	P.force = rnd(3) ? 0 : rnd(30);
	P.hold = rnd(2) ? rnd(50) : 0;
	P.wait = rnd(4) ? 50 + rnd(48) : 0;
	P.cancel = rnd(3) ? 0 : 1 + rnd(40);
	P.lag[0] = rnd(80);
	P.lag[1] = rnd(80);
	P.window = 1 + rnd(64);
	memset(&S, 0, sizeof(S));
	free(R.ring);
	memset(&R, 0, sizeof(R));
	rs_dtx_init(&S.t);
	rs_drx_init(&R.r);
	R.ring = malloc(P.limit + 1);
	s2r.head = s2r.tail = 0;
	r2s.head = r2s.tail = 0;
	hold.head = hold.tail = 0;
}

static bool finished(void)
{
	return S.fin && R.eof && !R.count && ch_empty(&s2r) &&
	       ch_empty(&r2s) && ch_empty(&hold);
}

/* Both ends agree at the end of a run. */
static void final_checks(u32 steps)
{
	const struct rs_dtx_stats *ts = &S.t.st;
	const struct rs_drx_stats *rs = &R.r.st;
	u32 i;

	if (!CHECK(steps < MAX_STEPS,
		   "seed %u: no end: sent %llu/%llu, got %llu, fin %d eof %d",
		   seed, (unsigned long long)S.t.seq,
		   (unsigned long long)P.limit,
		   (unsigned long long)R.delivered, S.fin, R.eof))
		return;
	CHECK(R.delivered == P.limit && S.t.seq == P.limit && R.r.in == P.limit,
	      "seed %u: stream length", seed);
	CHECK(ts->direct_bytes == rs->direct_bytes &&
	      ts->indirect_bytes == rs->indirect_bytes,
	      "seed %u: direct %llu/%llu, indirect %llu/%llu", seed,
	      (unsigned long long)ts->direct_bytes,
	      (unsigned long long)rs->direct_bytes,
	      (unsigned long long)ts->indirect_bytes,
	      (unsigned long long)rs->indirect_bytes);
	CHECK(ts->adverts == rs->adverts && ts->used == rs->used,
	      "seed %u: ADVERTs %llu/%llu, used %llu/%llu", seed,
	      (unsigned long long)ts->adverts,
	      (unsigned long long)rs->adverts,
	      (unsigned long long)ts->used, (unsigned long long)rs->used);
	CHECK(S.acks == rs->cancels && !R.r.cancel_pending,
	      "seed %u: %llu CANCELs, %u acks", seed,
	      (unsigned long long)rs->cancels, S.acks);
	for (i = 0; i < RS_ADV_SLOTS; i++)
		CHECK(R.r.adv[i].state == RS_RADV_FREE && !R.owner[i],
		      "seed %u: slot %u not released", seed, i);
}

static void count_case(u32 steps)
{
	tot.cases++;
	tot.steps += steps;
	tot.bytes += P.limit;
	tot.direct_bytes += S.t.st.direct_bytes;
	tot.direct += S.t.st.direct_bytes > 0;
	tot.stale += S.t.st.stale > 0;
	tot.switches += S.t.st.switches >= 2;
	tot.redirect += S.t.st.switches >= 3;
	tot.cancels += R.r.st.cancels > 0;
	tot.mixed += S.t.st.direct_bytes && S.t.st.indirect_bytes;
	tot.partial += R.partial;
	tot.held += S.held_advert;
}

static int run_case(u32 s)
{
	int before = failures;
	u32 steps;

	seed = s;
	setup();
	for (steps = 0; steps < MAX_STEPS && !finished(); steps++) {
		step();
		invariants();
		if (failures != before)
			break;
	}
	if (failures == before)
		final_checks(steps);
	if (failures != before) {
		printf("# seed %u failed after %u steps (rerun: %s 1 %u)\n",
		       seed, steps, "rs_adv_test", seed);
		return -1;
	}
	count_case(steps);
	return 0;
}

/* The run must not pass vacuously: enough cases exercise each path. */
static int check_coverage(u32 cases)
{
	printf("# %u cases, %llu steps, %llu bytes, %llu of them direct\n",
	       tot.cases, (unsigned long long)tot.steps,
	       (unsigned long long)tot.bytes,
	       (unsigned long long)tot.direct_bytes);
	printf("# cases with: direct %u, both paths %u, stale ADVERTs %u\n",
	       tot.direct, tot.mixed, tot.stale);
	printf("# direct then indirect %u, and direct again %u, cancels %u\n",
	       tot.switches, tot.redirect, tot.cancels);
	printf("# WAITALLs dead partly filled %u, ADVERTs met held bytes %u\n",
	       tot.partial, tot.held);
	if (cases < 200)
		return 0;
	if (!CHECK(tot.direct * 5 > cases * 2 && tot.mixed * 4 > cases &&
		   tot.stale * 2 > cases && tot.switches * 5 > cases &&
		   tot.redirect * 10 > cases,
		   "too few went direct, found stale ADVERTs or switched"))
		return -1;
	if (!CHECK(tot.cancels * 10 > cases && tot.partial * 20 > cases &&
		   tot.held * 20 > cases,
		   "too few cancelled, cut a WAITALL short or held bytes"))
		return -1;
	return 0;
}

static int random_model(u32 cases, u32 first)
{
	u32 s;

	memset(&tot, 0, sizeof(tot));
	for (s = first; s < first + cases; s++)
		if (run_case(s))
			return -1;
	free(R.ring);
	R.ring = NULL;
	return check_coverage(cases);
}

/* Policy dynamic's lessons: small messages, and ADVERTs that die. */
static bool dl_want(struct rs_dlearn *l, u32 len, u32 th)
{
	/* as rs_drecv_wanted() asks, with room for an ADVERT */
	return rs_dlearn_may(l, len, th) && !rs_dlearn_skip(l);
}

static u32 dlearn_wait(struct rs_dlearn *l, u32 th)
{
	u32 i;

	for (i = 0; i < 1000 && !dl_want(l, th, th); i++)
		rs_dlearn_ring(l, 4 * th, th);
	return i;
}

static int test_dlearn(void)
{
	const u32 th = 1000;
	struct rs_dlearn l = {};
	u32 i, want, skips[4];
	int k;

	if (!CHECK(!dl_want(&l, th - 1, th) && dl_want(&l, th, th),
		   "below the threshold, never"))
		return -1;
	for (i = 0; i < RS_DSMALL_MAX; i++)
		rs_dlearn_direct(&l, 10, th);
	if (!CHECK(!dl_want(&l, th, th) && !l.skipped,
		   "small direct receives stop it"))
		return -1;
	rs_dlearn_ring(&l, th - 1, th);
	if (!CHECK(!dl_want(&l, th, th), "a small copy does not"))
		return -1;
	rs_dlearn_ring(&l, th, th);
	if (!CHECK(dl_want(&l, th, th), "a large copy restarts it"))
		return -1;

	/*
	 * Every ADVERT dies and the ring brings large reads in between:
	 * the small rule alone never stopped here.
	 */
	for (k = 0; k < 4; k++) {
		want = 0;
		for (i = 0; i < 200 && !l.skip; i++) {
			if (!dl_want(&l, th, th))
				continue;
			rs_dlearn_direct(&l, 0, th);
			rs_dlearn_ring(&l, 4 * th, th);
			want++;
		}
		if (!CHECK(want == (k ? 1U : RS_DDEBT),
			   "round %d backs off after %u dead", k, want))
			return -1;
		skips[k] = l.skip;
		if (!CHECK(dlearn_wait(&l, th) == skips[k] && !l.skip,
			   "the skip runs out"))
			return -1;
	}
	if (!CHECK(skips[0] == RS_DSKIP_MIN && skips[1] == 2 * RS_DSKIP_MIN &&
		   skips[2] == 4 * RS_DSKIP_MIN && skips[3] == 8 * RS_DSKIP_MIN,
		   "each dead probe doubles the skip: %u %u %u %u",
		   skips[0], skips[1], skips[2], skips[3]))
		return -1;
	for (k = 0; k < 20; k++)
		rs_dlearn_direct(&l, 0, th);
	rs_dlearn_ring(&l, th, th);
	if (!CHECK(l.skip == RS_DSKIP_MAX && dlearn_wait(&l, th) == RS_DSKIP_MAX,
		   "capped: %u", l.skip))
		return -1;

	/* a filled ADVERT pays for dead ones: got / threshold of them */
	rs_dlearn_direct(&l, 10 * th, th);
	if (!CHECK(l.backoff == 0 && l.balance == 11 - RS_DDEBT,
		   "a filled ADVERT ends the back-off: %d", l.balance))
		return -1;
	for (k = 0; k < 10; k++)
		rs_dlearn_direct(&l, 0, th);
	rs_dlearn_ring(&l, th, th);
	if (!CHECK(!l.skip && dl_want(&l, th, th), "10 dead are paid"))
		return -1;
	rs_dlearn_direct(&l, 0, th);
	if (!CHECK(l.skip == RS_DSKIP_MIN, "the 11th is not"))
		return -1;
	dlearn_wait(&l, th);
	rs_dlearn_direct(&l, 1000 * th, th);
	rs_dlearn_direct(&l, 1000 * th, th);
	if (!CHECK(l.balance == RS_DCREDIT, "credit capped: %d", l.balance))
		return -1;
	for (k = 0; k < RS_DCREDIT + RS_DDEBT - 1; k++)
		rs_dlearn_direct(&l, 0, th);
	rs_dlearn_ring(&l, th, th);
	if (!CHECK(!l.skip && dl_want(&l, th, th), "up to the cap"))
		return -1;
	/* a second ADVERT that dies in the back-off it began: no double */
	dlearn_wait(&l, th);
	for (k = 0; k < RS_DCREDIT + RS_DDEBT; k++)
		rs_dlearn_direct(&l, 0, th);
	rs_dlearn_ring(&l, th, th);
	if (!CHECK(l.skip == RS_DSKIP_MIN && l.backoff == 2 * RS_DSKIP_MIN,
		   "one back-off for two ADVERTs: skip %u backoff %u", l.skip,
		   l.backoff))
		return -1;
	dlearn_wait(&l, th);
	rs_dlearn_direct(&l, th, th);	/* ends the back-off: -6 */
	rs_dlearn_direct(&l, 0, th);
	/* a partly filled one below the threshold neither pays nor costs */
	rs_dlearn_direct(&l, th / 2, th);
	rs_dlearn_direct(&l, 0, th);
	if (!CHECK(l.skip == RS_DSKIP_MIN && l.balance == 1 - RS_DDEBT,
		   "small fills pay nothing: %d", l.balance))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	u32 cases = 3000, first = 1;
	int n = 0, failed = 0, r;
	clock_t t0 = clock();
	struct {
		const char *name;
		int (*fn)(void);
	} tests[] = {
		{ "phases", test_phases },
		{ "stale", test_stale },
		{ "advert_checks", test_advert_checks },
		{ "waitall_sender", test_waitall_sender },
		{ "degrade", test_degrade },
		{ "estimate", test_estimate },
		{ "direct_checks", test_direct_checks },
		{ "may_advert", test_may_advert },
		{ "cancel", test_cancel },
		{ "paper_scenario", test_paper },
		{ "phase_bump", test_phase_bump },
		{ "dlearn", test_dlearn },
	};

	if (argc > 1)
		cases = strtoul(argv[1], NULL, 0);
	if (argc > 2)
		first = strtoul(argv[2], NULL, 0);
	tracing = getenv("RS_ADV_TRACE");
	printf("TAP version 13\n1..%zu\n", ARRAY_SIZE(tests) + 1);
	for (size_t i = 0; i < ARRAY_SIZE(tests); i++) {
		r = tests[i].fn();
		printf("%s %d %s\n", r ? "not ok" : "ok", ++n, tests[i].name);
		failed += !!r;
	}
	r = random_model(cases, first);
	printf("%s %d random_model (%u cases from seed %u, %.1f s)\n",
	       r ? "not ok" : "ok", ++n, cases, first,
	       (double)(clock() - t0) / CLOCKS_PER_SEC);
	failed += !!r;
	printf("# unit: %d passed, %d failed\n", n - failed, failed);
	return failed ? 1 : 0;
}
