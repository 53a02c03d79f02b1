// SPDX-License-Identifier: GPL-2.0
/*
 * rdmastream direct-transfer core; see rs_adv.h. No kernel dependencies.
 */
#include "rs_adv.h"

void rs_dtx_init(struct rs_dtx *t)
{
	*t = (struct rs_dtx){ 0 };
}

static struct rs_advert *rs_dtx_head(struct rs_dtx *t)
{
	return t->count ? &t->q[t->head] : 0;
}

static void rs_dtx_pop(struct rs_dtx *t)
{
	t->head = (t->head + 1) % RS_ADV_SLOTS;
	t->count--;
}

/*
 * Throw the head ADVERT away. The sender's phase moves past the ADVERT's,
 * so every other ADVERT of that receiver phase is stale too.
 */
static void rs_dtx_discard(struct rs_dtx *t)
{
	struct rs_advert *a = rs_dtx_head(t);

	if (t->phase <= a->phase)
		t->phase = a->phase + 1;
	t->st.stale++;
	rs_dtx_pop(t);
}

static bool rs_dtx_stale(const struct rs_dtx *t, const struct rs_advert *a)
{
	return !rs_phase_direct(t->phase) &&
	       (a->phase < t->phase || a->seq < t->seq);
}

/*
 * The ADVERT to write into next, or NULL to go indirect. Stale ADVERTs at
 * the head are thrown away first, as in the paper's sender loop.
 */
struct rs_advert *rs_dtx_pick(struct rs_dtx *t)
{
	struct rs_advert *a;

	while ((a = rs_dtx_head(t))) {
		if (!rs_dtx_stale(t, a))
			return a;
		rs_dtx_discard(t);
	}
	return 0;
}

/*
 * An ADVERT arrived. Stale ones are dropped at once, so the queue holds
 * only ADVERTs the receiver still has outstanding; false if the peer
 * claims more of those than it may have (or an empty or odd one).
 */
bool rs_dtx_on_advert(struct rs_dtx *t, const struct rs_advert *a)
{
	if (!a->len || a->filled || !rs_phase_direct(a->phase))
		return false;
	t->st.adverts++;
	t->degraded = false;	/* the receiver does advertise */
	rs_dtx_pick(t);
	if (t->count == RS_ADV_SLOTS)
		return false;
	t->q[(t->head + t->count) % RS_ADV_SLOTS] = *a;
	t->count++;
	rs_dtx_pick(t);
	return true;
}

/*
 * n bytes went direct into the head ADVERT (the one rs_dtx_pick returned).
 * Returns true when that filled it: the sender must tell the receiver so
 * (and invalidate it) and the ADVERT leaves the queue.
 */
bool rs_dtx_direct_sent(struct rs_dtx *t, u32 n)
{
	struct rs_advert *a = rs_dtx_head(t);
	bool done;

	if (!rs_phase_direct(t->phase)) {
		t->phase = a->phase;
		t->st.switches++;
	}
	if (!a->filled)
		t->st.used++;
	t->seq += n;
	a->filled += n;
	t->st.direct_bytes += n;
	done = !(a->flags & RS_ADV_F_WAITALL) || a->filled >= a->len;
	if (done)
		rs_dtx_pop(t);
	return done;
}

/*
 * n bytes were committed to the stream buffer. ADVERTs still queued (the
 * sender chose not to use them) are thrown away: the indirect bytes tell
 * the receiver that they are dead.
 */
void rs_dtx_indirect_sent(struct rs_dtx *t, u32 n)
{
	while (rs_dtx_head(t))
		rs_dtx_discard(t);
	if (rs_phase_direct(t->phase)) {
		t->phase++;
		t->st.switches++;
	}
	t->seq += n;
	t->st.indirect_bytes += n;
}

/*
 * The receiver withdrew its outstanding ADVERTs. Every ADVERT it sent
 * before the CANCEL is here already (the QP keeps order): drop them all
 * and move to an indirect phase past theirs. The CANCEL_ACK that the
 * caller sends next tells the receiver which ADVERTs were not used.
 */
void rs_dtx_on_cancel(struct rs_dtx *t)
{
	while (rs_dtx_head(t))
		rs_dtx_discard(t);
	if (rs_phase_direct(t->phase)) {
		t->phase++;
		t->st.switches++;
	}
}

/*
 * Direct-only found no ADVERT to write into when it needed one: the
 * receiver is not advertising (indirect-only, non-blocking or small
 * receives, MSG_PEEK). Send indirect from now on, without waiting for
 * ADVERTs, until the next one arrives.
 */
void rs_dtx_degrade(struct rs_dtx *t)
{
	if (t->degraded)
		return;
	t->degraded = true;
	t->st.degrades++;
}

void rs_drx_init(struct rs_drx *r)
{
	*r = (struct rs_drx){ 0 };
}

/* Bytes a live ADVERT is expected to take: one, or all of it for WAITALL. */
static u64 rs_radv_expect(const struct rs_radv *a)
{
	return a->flags & RS_ADV_F_WAITALL ? a->len - a->filled : 1;
}

/*
 * S'_r of the paper: the bytes arrived plus what the live ADVERTs are
 * expected to take. With none live it is exact, which is what lets the
 * first ADVERT of a direct phase be matched by sequence number.
 */
u64 rs_drx_estimate(const struct rs_drx *r)
{
	u64 est = r->in;
	int i;

	for (i = 0; i < RS_ADV_SLOTS; i++)
		if (r->adv[i].state == RS_RADV_LIVE)
			est += rs_radv_expect(&r->adv[i]);
	return est;
}

/* The slot the next ADVERT takes (the lowest free one), or -1. */
int rs_drx_free_slot(const struct rs_drx *r)
{
	int i;

	for (i = 0; i < RS_ADV_SLOTS; i++)
		if (r->adv[i].state == RS_RADV_FREE)
			return i;
	return -1;
}

/*
 * The receiver holds ADVERTs back while indirect bytes are unread (they
 * come first in the stream), while a cancel is in flight, and at the end.
 */
bool rs_drx_may_advert(const struct rs_drx *r, u32 ring_avail)
{
	return !ring_avail && !r->cancel_pending && !r->fin &&
	       rs_drx_free_slot(r) >= 0;
}

/* Advertise a buffer of len bytes: fills a, returns its slot or -1. */
int rs_drx_advert(struct rs_drx *r, u32 len, u32 flags, struct rs_advert *a)
{
	int slot = rs_drx_free_slot(r);
	struct rs_radv *v;

	if (slot < 0 || !len || r->cancel_pending || r->fin)
		return -1;
	if (!rs_phase_direct(r->phase)) {
		r->phase++;
		r->st.switches++;
	}
	v = &r->adv[slot];
	*a = (struct rs_advert){
		.seq = rs_drx_estimate(r),
		.len = len,
		.phase = r->phase,
		.id = rs_adv_id(slot, v->gen),
		.flags = flags & RS_ADV_F_WAITALL,
	};
	v->seq = a->seq;
	v->len = len;
	v->filled = 0;
	v->flags = a->flags;
	v->state = RS_RADV_LIVE;
	r->live++;
	r->st.adverts++;
	return slot;
}

static u32 rs_drx_kill_live(struct rs_drx *r)
{
	u32 n = 0;
	int i;

	for (i = 0; i < RS_ADV_SLOTS; i++) {
		if (r->adv[i].state != RS_RADV_LIVE)
			continue;
		r->adv[i].state = RS_RADV_DEAD;
		n++;
	}
	r->live = 0;
	return n;
}

/*
 * n bytes arrived in the stream buffer. The sender sent them because it
 * held no fresh ADVERT, so every live one is dead: it will find them
 * stale. Returns how many died (their receivers must stop waiting).
 */
u32 rs_drx_on_indirect(struct rs_drx *r, u32 n)
{
	u32 killed = rs_drx_kill_live(r);

	r->in += n;
	r->st.indirect_bytes += n;
	r->st.dead += killed;
	if (rs_phase_direct(r->phase)) {
		r->phase++;
		r->st.switches++;
	}
	return killed;
}

/*
 * n bytes arrived direct in the ADVERT named id. Returns its slot, or -1
 * if the peer names no live ADVERT, overfills it, or ends a WAITALL one
 * early or a plain one late.
 */
int rs_drx_on_direct(struct rs_drx *r, u32 id, u32 n, u32 flags)
{
	int slot = rs_adv_slot(id);
	struct rs_radv *v;
	bool complete;

	if (slot >= RS_ADV_SLOTS)
		return -1;
	v = &r->adv[slot];
	if (v->state != RS_RADV_LIVE || rs_adv_id(slot, v->gen) != id ||
	    !n || n > v->len - v->filled)
		return -1;
	complete = !(v->flags & RS_ADV_F_WAITALL) || v->filled + n == v->len;
	if (complete != !!(flags & RS_DIR_F_COMPLETE))
		return -1;
	if (!v->filled)
		r->st.used++;
	v->filled += n;
	r->in += n;
	r->st.direct_bytes += n;
	if (complete) {
		v->state = RS_RADV_DONE;
		r->live--;
	}
	return slot;
}

/* Withdraw the live ADVERTs: true if a CANCEL must go to the sender now. */
bool rs_drx_cancel(struct rs_drx *r)
{
	if (!r->live || r->cancel_pending)
		return false;
	r->cancel_pending = true;
	r->st.cancels++;
	return true;
}

/*
 * The sender has dropped every ADVERT sent before the CANCEL; those that
 * got no (complete) direct data by now are dead. False if none was asked.
 */
bool rs_drx_on_cancel_ack(struct rs_drx *r)
{
	if (!r->cancel_pending)
		return false;
	r->cancel_pending = false;
	r->st.cancelled += rs_drx_kill_live(r);
	if (rs_phase_direct(r->phase)) {
		r->phase++;
		r->st.switches++;
	}
	return true;
}

/*
 * The stream ended (FIN: the sender writes no more) or the connection
 * died. Live ADVERTs are dead; no new ones go out. Returns how many died.
 */
u32 rs_drx_end(struct rs_drx *r)
{
	u32 n = rs_drx_kill_live(r);

	r->fin = true;
	r->st.dead += n;
	return n;
}

/* The receive that owned slot has invalidated and unpinned its buffer. */
void rs_drx_release(struct rs_drx *r, int slot)
{
	struct rs_radv *v = &r->adv[slot];

	if (v->state == RS_RADV_LIVE)
		r->live--;
	v->state = RS_RADV_FREE;
	v->gen = (v->gen + 1) & 0xffffff;
}

/* A receive took got bytes from the stream buffer. */
void rs_dlearn_ring(struct rs_dlearn *l, u32 got, u32 threshold)
{
	if (got >= threshold)
		l->small = 0;
}

/* A receive's ADVERT ended with got bytes in it (0: it died empty). */
void rs_dlearn_direct(struct rs_dlearn *l, u32 got, u32 threshold)
{
	u32 credit = threshold ? got / threshold : got;

	if (got >= threshold)
		l->small = 0;
	else if (l->small < RS_DSMALL_MAX)
		l->small++;
	if (got) {
		if (credit) {
			l->balance += credit < RS_DCREDIT ? (int)credit :
				      RS_DCREDIT;
			if (l->balance > RS_DCREDIT)
				l->balance = RS_DCREDIT;
			l->backoff = 0;
		}
		return;
	}
	/* a second ADVERT out when the back-off began: already counted */
	if (l->skip || --l->balance > -RS_DDEBT)
		return;
	l->skip = l->backoff ? l->backoff : RS_DSKIP_MIN;
	l->backoff = l->skip < RS_DSKIP_MAX / 2 ? 2 * l->skip : RS_DSKIP_MAX;
	l->balance = 1 - RS_DDEBT;	/* the probe decides alone */
}

/*
 * May a receive of len bytes advertise, as far as the small-message rule
 * knows? A check only: the caller asks it before taking any lock.
 */
bool rs_dlearn_may(const struct rs_dlearn *l, u32 len, u32 threshold)
{
	return len >= threshold && l->small < RS_DSMALL_MAX;
}

/*
 * A wait that could advertise (rs_dlearn_may() and room for an ADVERT):
 * true if the dead-ADVERT back-off spends it instead.
 */
bool rs_dlearn_skip(struct rs_dlearn *l)
{
	if (!l->skip)
		return false;
	l->skip--;
	RS_STORE_ONCE(&l->skipped, l->skipped + 1);	/* RDMASTREAM_INFO */
	return true;
}
