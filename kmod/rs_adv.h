/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rdmastream direct-transfer core: ADVERT matching, byte sequence numbers
 * and phase numbers (MacArthur and Russell, IPDPS 2014).
 *
 * A receiver whose stream buffer holds no unread byte may advertise the
 * application's own buffer. The sender writes the next bytes of the stream
 * straight into it (direct) when it holds a fresh ADVERT, and into the
 * receiver's stream buffer (indirect) otherwise. An ADVERT carries the
 * receiver's estimate of the sequence number of the first byte that will
 * land in it and the receiver's phase. Both ends count phases: even phases
 * are indirect, odd phases direct, and each end steps to the next phase
 * whenever it switches between the two. In an indirect phase the sender
 * takes an ADVERT only if its phase is not older than the sender's and its
 * sequence number is not behind the sender's; otherwise the ADVERT is
 * stale (indirect bytes already went out for its place in the stream) and
 * is thrown away. The receiver declares all its outstanding ADVERTs dead as
 * soon as an indirect byte arrives, because the sender will then discard
 * them; see docs/direct.md for why both ends always agree.
 *
 * Pure C with no kernel dependencies, shared with the unit tests. Callers
 * serialise access (the module holds rs_sock.lock).
 */
#ifndef RS_ADV_H
#define RS_ADV_H

#include "rs_proto.h"

/* ADVERTs a receiver may have outstanding; also the sender's queue. */
#define RS_ADV_SLOTS		8

#define RS_ADV_F_WAITALL	(1U << 0)	/* fill completely: MSG_WAITALL */
#define RS_DIR_F_COMPLETE	(1U << 0)	/* DIRECT: this fills the ADVERT */

static inline bool rs_phase_direct(u32 phase)
{
	return phase & 1;
}

/* An ADVERT as the sender keeps it. */
struct rs_advert {
	u64 seq;		/* estimated stream offset of its first byte */
	u64 addr;		/* where in the receiver's address space */
	u32 rkey;
	u32 len;
	u32 filled;		/* bytes written into it so far */
	u32 phase;
	u32 id;			/* the receiver's name for it */
	u32 flags;		/* RS_ADV_F_* */
};

struct rs_dtx_stats {
	u64 adverts;		/* ADVERTs received */
	u64 used;		/* ...that received direct data */
	u64 stale;		/* ...thrown away: stale or cancelled */
	u64 direct_bytes;
	u64 indirect_bytes;
	u64 switches;		/* phase switches */
	u64 degrades;		/* direct-only went indirect: no ADVERT */
};

/* The sending end. */
struct rs_dtx {
	struct rs_advert q[RS_ADV_SLOTS];	/* fresh ADVERTs, oldest first */
	u32 head;
	u32 count;
	u32 phase;		/* P_S */
	u64 seq;		/* S_S: stream bytes committed to either path */
	/*
	 * Direct-only: the receiver had no ADVERT when one was wanted, so
	 * the sender goes indirect, as dynamic does, until an ADVERT comes.
	 */
	bool degraded;
	struct rs_dtx_stats st;
};

enum rs_radv_state {
	RS_RADV_FREE,
	RS_RADV_LIVE,		/* advertised, the sender may write */
	RS_RADV_DONE,		/* filled: the sender is done with it */
	RS_RADV_DEAD,		/* the sender will never write (more) into it */
};

/* One advertised receive as the receiver keeps it. */
struct rs_radv {
	u64 seq;		/* the estimate it was advertised with */
	u32 len;
	u32 filled;
	u32 gen;		/* bumped on release: ids are not reused soon */
	u32 flags;
	u8 state;		/* enum rs_radv_state */
};

struct rs_drx_stats {
	u64 adverts;		/* ADVERTs sent */
	u64 used;		/* ...that received direct data */
	u64 dead;		/* ...overtaken by indirect data or the FIN */
	u64 cancelled;		/* ...withdrawn by a cancel */
	u64 cancels;		/* CANCEL messages sent */
	u64 direct_bytes;
	u64 indirect_bytes;
	u64 switches;		/* phase switches */
};

/* The receiving end. */
struct rs_drx {
	struct rs_radv adv[RS_ADV_SLOTS];
	u64 in;			/* S_r: stream bytes arrived by either path */
	u32 phase;		/* P_r */
	u32 live;		/* slots in RS_RADV_LIVE */
	bool cancel_pending;	/* CANCEL sent, CANCEL_ACK not yet seen */
	bool fin;		/* the stream has ended: advertise no more */
	struct rs_drx_stats st;
};

/* sender */
void rs_dtx_init(struct rs_dtx *t);
bool rs_dtx_on_advert(struct rs_dtx *t, const struct rs_advert *a);
struct rs_advert *rs_dtx_pick(struct rs_dtx *t);
bool rs_dtx_direct_sent(struct rs_dtx *t, u32 n);
void rs_dtx_indirect_sent(struct rs_dtx *t, u32 n);
void rs_dtx_on_cancel(struct rs_dtx *t);
void rs_dtx_degrade(struct rs_dtx *t);

/* receiver */
void rs_drx_init(struct rs_drx *r);
u64 rs_drx_estimate(const struct rs_drx *r);
bool rs_drx_may_advert(const struct rs_drx *r, u32 ring_avail);
int rs_drx_free_slot(const struct rs_drx *r);
int rs_drx_advert(struct rs_drx *r, u32 len, u32 flags, struct rs_advert *a);
u32 rs_drx_on_indirect(struct rs_drx *r, u32 n);
int rs_drx_on_direct(struct rs_drx *r, u32 id, u32 n, u32 flags);
bool rs_drx_cancel(struct rs_drx *r);
bool rs_drx_on_cancel_ack(struct rs_drx *r);
u32 rs_drx_end(struct rs_drx *r);
void rs_drx_release(struct rs_drx *r, int slot);

/*
 * What policy dynamic has learned from a socket's receives: whether
 * advertising pays (rs_dlearn_*(), docs/direct.md "When dynamic stops
 * advertising"). Two lessons:
 * - small: a large buffer that small messages arrive in gets one message
 *   per ADVERT, and registering, advertising and invalidating it costs
 *   more than copying a few bytes. After RS_DSMALL_MAX direct receives in
 *   a row below the threshold, stop until a receive takes at least the
 *   threshold from the stream buffer (bulk data flows again).
 * - dead: a sender that is always ahead overtakes ADVERTs with indirect
 *   bytes already in flight, and an ADVERT that dies empty costs about
 *   what copying the threshold's worth of bytes costs (that is what the
 *   threshold means), while a filled one saves copying what it got. The
 *   balance counts thresholds: -1 per dead ADVERT, +got/threshold per
 *   filled one (at most RS_DCREDIT). At -RS_DDEBT the next skip waits
 *   that could advertise do not (a receive may wait more than once);
 *   then one ADVERT probes, and each probe that dies
 *   doubles the skip, up to RS_DSKIP_MAX. Bytes from the stream buffer do
 *   not count: they are what overtook the ADVERTs.
 */
#define RS_DSMALL_MAX	4
#define RS_DDEBT	8
#define RS_DCREDIT	64
#define RS_DSKIP_MIN	4
#define RS_DSKIP_MAX	64

struct rs_dlearn {
	u32 small;		/* direct receives in a row below threshold */
	int balance;		/* thresholds saved by ADVERTs, net */
	u32 skip;		/* receives left that will not advertise */
	u32 backoff;		/* skip after the next dead probe; 0: min */
	u64 skipped;		/* waits that did not advertise for it */
};

void rs_dlearn_ring(struct rs_dlearn *l, u32 got, u32 threshold);
void rs_dlearn_direct(struct rs_dlearn *l, u32 got, u32 threshold);
bool rs_dlearn_may(const struct rs_dlearn *l, u32 len, u32 threshold);
bool rs_dlearn_skip(struct rs_dlearn *l);

static inline u32 rs_adv_id(int slot, u32 gen)
{
	return (u32)slot | (gen << 8);
}

static inline int rs_adv_slot(u32 id)
{
	return (int)(id & 0xff);
}

#endif /* RS_ADV_H */
