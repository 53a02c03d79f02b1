/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rdmastream: the AF_RDMASTREAM socket family over in-kernel RDMA verbs.
 *
 * One rs_sock is one socket: a listener, or one end of a connection with
 * its own rdma_cm id, PD, QP, CQ (from the device's CQ pool) and two rings:
 * the stream buffer the peer writes into (the only memory the peer can
 * reach) and the send ring the application's bytes are copied into.
 *
 * Locking (order: lock_sock() -> tlock -> lock):
 *  - lock_sock() serialises system calls on a socket; it is held across
 *    copies from and to user memory, which may block for ever (FUSE,
 *    userfaultfd), so nothing but system calls ever takes it;
 *  - rs_sock.tlock (mutex) serialises the transport's life (create, rings,
 *    destroy) and every use of cm_id: the rdma_cm handler, the teardown
 *    work and the system calls that touch the id take it; it is never held
 *    across a user copy or a wait on the peer;
 *  - rs_sock.lock (spinlock, taken with BHs off) protects the flow state,
 *    the send queue accounting, cm_id/torn/dead and every
 *    ib_post_send/ib_post_recv, which happen both in process context and
 *    in the CQ's softirq handlers;
 *  - the rdma_cm handler runs with the id's handler mutex and takes tlock;
 *    nothing calls rdma_destroy_id() under tlock or lock_sock().
 */
#ifndef RS_H
#define RS_H

#include <linux/mutex.h>
#include <linux/sched/signal.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <net/sock.h>
#include <net/inet_sock.h>
#include <linux/ipv6.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "rs_compat.h"
#include "rs_proto.h"
#include "rs_adv.h"
#include "rs_spin.h"
#include "rs_rto.h"
#include "rs_trace.h"

/*
 * Send work requests per QP. With the ADVERT slots' LOCAL_INVs and the
 * drain's one the QP asks for 63: rdma_rxe sizes a queue to the next
 * power of two above that, of 512-byte entries (16 SGEs), so 64 slots,
 * 32 KiB per end (118 took 128 slots, 128 took 256: docs/limits.md), and
 * each end's share of a pooled CQ shrinks with it.
 */
#define RS_SQ_DEPTH		54
#define RS_RQ_DEPTH		64	/* receive slots per QP (credits) */
#define RS_SIGNAL_EVERY		(RS_SQ_DEPTH / 4)
#define RS_MAX_INLINE		256
#define RS_RESOLVE_MS		2000
#define RS_ORPHAN_TIMEOUT	(60 * HZ)
/*
 * The QP's ack timeout where the device's retry count is a real budget
 * (not rxe's "for ever", rs_rtt.c): 4.096 us << 18, 1.07 s, times 7 tries
 */
#define RS_ACK_TIMEOUT		18
#define RS_RETRY_COUNT		6
#define RS_ACK_TIMEOUT_J	\
	((unsigned long)((u64)HZ * (4096ULL << RS_ACK_TIMEOUT) / NSEC_PER_SEC) + 1)
/*
 * How often the module may post a work request only to learn about the
 * QP (a probe, a kick) once the QP has been silent and kicked. rxe from
 * 6.10 on (the requester and completer merged into one task) runs its
 * completer on every post, which pushes the retransmission timer a whole
 * ack timeout ahead: a QP that lost a packet retransmits only after an
 * ack timeout without posts, and a probe every second kept a lossy link
 * from ever recovering (docs/lossy-links.md). So after a kick, two ack
 * timeouts apart: of two such trains (the probe timer's and a LOCAL_INV
 * wait's) one always leaves a gap longer than an ack timeout.
 */
#define rs_qp_quiet(rs)		(2 * ((rs)->ack_j ?: RS_ACK_TIMEOUT_J) + HZ / 4)
#define RS_PROBE_INTERVAL	HZ	/* a sender stalled: probe, then kick */
#define RS_RTT_EVERY		(HZ / 10)	/* round trip samples, at most */
/*
 * A signalled work request with no send completion at all for this long:
 * the QP neither delivers nor fails. On rxe, whose QP retries for ever
 * (rs_rtt.c), this is the connection's time limit for a silent peer; it
 * also ends a QP that wedged (docs/lossy-links.md). Elsewhere the QP
 * fails first, within its retry budget: 7 tries of ~1.07 s for lost
 * packets plus 7 receiver-not-ready waits of <= 655 ms.
 */
#define RS_WEDGE_TIMEOUT	(20 * HZ)
#define RS_MAX_SGE		16	/* gather entries per direct WRITE */
#define RS_DIRECT_PAGES		512	/* largest advertised buffer, pages */
#define RS_CANCEL_TIMEOUT	(10 * HZ)	/* peer silent on a CANCEL */
/*
 * A direct transfer's work requests pending with no send completion on
 * the QP: as long as the silent-peer bound, else a QP that waits out a
 * queue (a thousand connections over rxe) is ended by a direct transfer
 * where an indirect one would have kept it.
 */
#define RS_DIRECT_TIMEOUT	RS_WEDGE_TIMEOUT
/*
 * LOCAL_INV pending. rxe runs it only after every earlier work request
 * has completed, so it waits out the retransmissions of a lossy link:
 * the bound must cover the QP's retry budget (RS_WEDGE_TIMEOUT), else a
 * link that would recover (a 5 s partition), or a queue that the
 * watchdog would wait out, resets the connection from the receive side.
 */
#define RS_INV_TIMEOUT		RS_WEDGE_TIMEOUT
#define RS_DRAIN_TIMEOUT	(5 * HZ)	/* a fenced caller's wait */
/* LOCAL_INV late: kick the QP after this, then every RS_QP_QUIET */
#define RS_INV_KICK		(HZ / 10)
#define RS_DGRACE_MS		10	/* direct-only: wait for an ADVERT */
#define RS_TX_START		(16U << 10)	/* send ring, unless SO_SNDBUF */
#define RS_TX_GROW_MAX		(4U << 20)	/* ...grown at most to this */
#define RS_BUDGET_MIN		(1U << 10)	/* one connection's share, least */
#define RS_TX_GROW_RETRY	HZ	/* after a failed allocation */
#define RS_RX_START		(64U << 10)	/* stream buffer, if it can grow */
#define RS_RX_GROW_MAX		(4U << 20)	/* ...grown at most to this */
/* Work requests a direct transfer may need: WRITEs plus the DIRECT. */

/* Control message types (wire format: docs/wire-format.md). */
enum rs_ctl_type {
	RS_MSG_SETUP = 1,	/* my stream buffer: address, rkey, size */
	RS_MSG_ACK = 2,		/* credits and consumed bytes */
	RS_MSG_FIN = 3,		/* no more data after the totals given */
	RS_MSG_RESET = 4,	/* abort: drop the connection */
	RS_MSG_ADVERT = 5,	/* write the next bytes here (direct) */
	RS_MSG_DIRECT = 6,	/* bytes written into an ADVERT */
	RS_MSG_CANCEL = 7,	/* withdraw my outstanding ADVERTs */
	RS_MSG_CANCEL_ACK = 8,	/* ADVERTs before the CANCEL are dropped */
	RS_MSG_RING = 9,	/* a bigger stream buffer: address, rkey, size */
	RS_MSG_RING_ACK = 10,	/* ...written from this byte on */
};

struct rs_ctl {
	u8 type;
	u8 version;
	__be16 credits;		/* receive slots returned */
	__be32 len;		/* SETUP, RING: ring size; ADVERT, DIRECT: bytes */
	__be64 cons;		/* ring bytes consumed (window), every message */
	__be64 addr;		/* SETUP, RING, ADVERT: address; FIN: ring total */
	__be64 seq;		/* ADVERT: estimate; DIRECT: offset; FIN: total;
				 * RING_ACK: the new buffer's first byte
				 */
	__be32 rkey;		/* SETUP, RING, ADVERT */
	__be32 phase;		/* ADVERT */
	__be32 id;		/* ADVERT, DIRECT: the receiver's name for it */
	__be32 flags;		/* ADVERT: RS_ADV_F_*; DIRECT: RS_DIR_F_* */
	u8 reserved[16];
} __packed;

#define RS_MSG_SIZE		64

/* Private data of a REJ sent by a listener (wire-format.md). */
enum rs_rej_reason {
	RS_REJ_NOT_LISTENING = 1,	/* closed, or shut down for reading */
	RS_REJ_BACKLOG = 2,		/* accept queue and half-open full */
	RS_REJ_NOBUFS = 3,		/* mem_max, or a cap on connections */
	RS_REJ_VERSION = 4,		/* malformed or foreign REQ */
	RS_REJ_ERROR = 5,		/* no resources for the connection */
};

struct rs_cm_rej {
	u8 version;
	u8 reason;
	__be16 reserved;
} __packed;

/* Private data of the rdma_cm REQ and REP. */
#define RS_CM_F_RING	0x01	/* grows its stream buffer: RING, RING_ACK */
#define RS_CM_F_WSEQ	0x02	/* numbers its writes: RS_IMM_PARITY */
#define RS_CM_F_SHRINK	0x04	/* takes a RING smaller than the buffer */
#define RS_CM_F_KNOWN	(RS_CM_F_RING | RS_CM_F_WSEQ | RS_CM_F_SHRINK)

struct rs_cm_pdata {
	u8 version;
	u8 flags;
	__be16 recv_slots;	/* receive slots the sender of this posts */
	__be32 ring_size;	/* its stream buffer, for information */
} __packed;

#define RS_RING_SEGS	8	/* MRs per ring, at most */

struct rs_ring {
	struct page **pages;
	unsigned int npages;
	u32 size;
	void *vaddr;		/* vmap() of pages: contiguous for the CPU */
	u32 seg_shift;		/* bytes per MR, log2 (rs_ring_map()) */
	unsigned int nseg;	/* MRs: size >> seg_shift */
	unsigned int nmapped;	/* segments DMA-mapped */
	struct sg_table sgt[RS_RING_SEGS];
	bool need_sync;		/* the DMA API must be told of hand-offs */
	struct ib_device *dev;	/* while mapped */
	enum dma_data_direction dir;
	dma_addr_t *dma;	/* per page, when need_sync */
	struct ib_mr *mr[RS_RING_SEGS];	/* fast-registered: each
					 * segment contiguous for the HCA
					 */
};

/* Someone sleeping on the completion of one work request. */
struct rs_wait {
	bool done;
	enum ib_wc_status status;
};

/* A send queue slot: completion context and control message buffer. */
struct rs_send {
	struct ib_cqe cqe;
	struct rs_sock *rs;
	u64 seq;		/* number of this work request on the QP */
	u64 tx_end;		/* tx_sent after it (signalled writes) */
	bool fin;
	u64 post_ns;		/* a round trip sample: posted then */
	struct rs_wait *wait;	/* signalled WR a thread waits for */
	struct rs_ctl *msg;
	u64 msg_dma;
};

/* User pages pinned for one direct transfer, as the HCA sees them. */
struct rs_pin {
	struct page **pages;
	unsigned int npages;
	struct mm_struct *mm;	/* charged: npages in its pinned_vm */
	u32 len;
	struct sg_table sgt;
	int nents;		/* DMA-mapped entries; 0 while unmapped */
	enum dma_data_direction dir;
};

/* The kernel side of an advertised receive (rs_drx slot of the same index). */
struct rs_dslot {
	struct ib_cqe inv_cqe;	/* LOCAL_INV: outside the send slots */
	struct rs_sock *rs;
	struct ib_mr *mr;	/* fast-registration MR, reused */
	struct rs_pin pin;
	struct rs_wait inv;	/* local invalidation */
	bool busy;		/* a receive owns it */
	bool registered;	/* the MR is valid: the peer may write */
	bool orphan;		/* its receive gave up: the fence releases it */
	bool inv_local;		/* our LOCAL_INV took the peer's access */
};

/*
 * A zero-copy send in flight. Its sender frees it once the work requests
 * are done; a sender that gives up (timeout, fatal signal, failed post)
 * leaves it to the fence: rs_transport_destroy() frees orphans after the
 * drain.
 */
struct rs_zsend {
	struct list_head node;	/* rs_sock.zsends */
	struct rs_pin pin;
	struct rs_wait wait;
	bool orphan;
};

struct rs_recv {
	struct ib_cqe cqe;
	struct rs_sock *rs;
	struct ib_sge sge;
	struct rs_ctl *msg;
};

struct rs_reg {
	struct ib_cqe cqe;
	struct rs_sock *rs;
};

struct rs_stats {
	u64 writes;
	u64 inline_writes;
	u64 ctrl_sent;
	u64 ctrl_received;
	u64 window_stalls;
	u64 credit_stalls;
	u64 cap_stalls;			/* ...by the in-flight budget */
	u64 completions;
	u64 probes;
	u64 kicks;			/* probes that restarted a silent SQ */
	u64 zcopy_sends;
	u64 local_invs;
	u64 inv_fences;			/* rs_dslot_inv_fence() waited */
	u64 direct_refused;		/* receive pins rs_pin_writable() refused */
	u64 remote_invs;
	u64 errors;
	u64 spin_hits;			/* waits ended by spinning, and */
	u64 spin_misses;		/* ...that spun, then slept: lock_sock */
};

struct rs_sock {
	union {				/* first: rs_sk() casts */
		struct sock sk;
		struct inet_sock inet;	/* for inet_create(), rs_inet.c */
	};
	struct rdma_cm_id *cm_id;	/* owned; destroyed by rs_teardown */
	bool cm_ref;			/* the cm id holds a sock reference */
	bool is_bound;			/* bind() succeeded */
	bool v4mapped;			/* named ::ffff:a.b.c.d: report so */
	bool listener;			/* listen() succeeded */
	int nodelay;			/* TCP_NODELAY, accepted and kept */
	/* the last send could not go direct (sendfile, splice): */
	bool tx_nodirect;		/* then no POLLOUT for an ADVERT */
	int policy;			/* RDMASTREAM_POLICY_* */
	u32 dthresh;			/* direct threshold, 0: module's */
	spinlock_t lock;		/* guards the "under lock" fields */
	wait_queue_head_t dwait;	/* waits that signals do not end */
	struct list_head zsends;	/* zero-copy sends in flight (lock) */

	/*
	 * Everything that belongs to one connection, and only that: zero
	 * when a socket is created and again when connect() is retried
	 * after a failed attempt (rs_conn_reset()). A field added here
	 * cannot be forgotten by either.
	 */
	struct_group(conn,
	struct sockaddr_storage local_sa;	/* names once established */
	struct sockaddr_storage peer_sa;
	struct rs_dlearn dlearn;	/* policy dynamic (lock_sock) */
	/* adaptive receive polling (rs_rx_wait(), rs_spin.h) */
	struct rs_spin spin;		/* lock_sock; read locklessly */
	u64 rx_wait_ns;			/* the latest wait began (lock_sock) */
	u64 rx_data_ns;			/* the first ring data after it came
					 * (written under lock, read without)
					 */
	/* the QP's ack timeout and retry count (rs_rtt.c) */
	u32 base_rtt_us;		/* cached SRTT the timeout came from,
					 * 0: the peer was new to us
					 */
	u32 base_rttvar_us;		/* ...and its RTTVAR */
	u32 path_mtu;			/* the QP's, bytes, once established */
	unsigned long ack_j;		/* ack timeout in jiffies, 0: none */
	u8 ack_exp;			/* ...as the QP has it: 4.096 us << */
	u8 qp_retry;			/* 7 on rxe: for ever (rs_rtt.c) */
	u64 req_ns;			/* when our REQ (active) or REP
					 * (passive) went: rs_ack_handshake()
					 */
	struct rs_rtt rtt;		/* round trips measured (under lock) */
	unsigned long rtt_next;		/* jiffies: no sample before */

	/* verbs resources, alive while transport is set */
	bool transport;
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	unsigned int cq_size;
	struct ib_qp *qp;
	u32 max_inline;
	u32 max_sge;			/* per direct WRITE */
	u32 dsend_wrs;			/* WRs one direct transfer may need */
	u32 dsend_pages;		/* ...and the pages it may gather */
	u32 dmax;			/* largest ADVERT, bytes */
	struct rs_ring rx;		/* the peer writes here */
	struct rs_ring tx;		/* we copy here and write from here */
	struct rs_ring tx_new;		/* what tx grows into (rs_txgrow.c):
					 * the teardown's once posted
					 */
	struct rs_ring tx_old;		/* what tx grew from: WRITEs may read
					 * it below tx_old_end
					 */
	u64 tx_old_end;
	u64 tx_old_seq;			/* sq_posted after its successor's
					 * REG_MRs (rs_tx_reapable())
					 */
	struct rs_wait tx_reg;		/* ...the last of them, signalled */
	unsigned long tx_grow_next;	/* jiffies: no growth before */
	/* stream buffer autotuning (rs_rxgrow.c), under lock */
	bool peer_ring;			/* the peer's CM flag RS_CM_F_RING */
	bool peer_shrink;		/* ...and RS_CM_F_SHRINK */
	bool peer_wseq;			/* ...and RS_CM_F_WSEQ */
	bool rx_grow_want;		/* the rate asks for a bigger buffer */
	unsigned long rx_grow_next;	/* jiffies: no growth before */
	struct rs_ring rx_new;		/* offered in RING; the peer writes it
					 * from flow.rx_switch on
					 */
	struct rs_ring rx_old;		/* what rx grew from, read out: the
					 * peer may write it until the
					 * LOCAL_INV ending at rx_old_seq
					 */
	u64 rx_old_seq;			/* sq_posted after that LOCAL_INV */
	struct rs_wait rx_inv;		/* ...signalled */
	u64 peer_new_addr;		/* the peer's RING, until RING_ACK */
	u32 peer_new_rkey;
	struct rs_send *sends;		/* RS_SQ_DEPTH slots */
	struct rs_ctl *send_msgs;
	u64 send_msgs_dma;
	struct rs_recv *recvs;		/* RS_RQ_DEPTH slots */
	struct rs_ctl *recv_msgs;
	u64 recv_msgs_dma;
	struct rs_reg reg_cqe;

	/* under lock */
	struct rs_flow flow;
	u64 sq_posted;
	u64 sq_done;
	u64 sq_signaled;
	u64 wd_sq_done;			/* sq_done at the last watchdog tick */
	u64 probe_seq;			/* the signalled probe outstanding */
	unsigned long sq_progress;	/* jiffies: last send completion */
	bool probe_out;			/* ...since sq_progress or later */
	u32 regs_pending;		/* REG_MR work requests outstanding */
	bool peer_ready;		/* SETUP received */
	bool fin_done;			/* FIN completed: the peer has it */
	bool fin_rcvd;
	bool reset_rcvd;
	bool dead;			/* no more posting: torn down or dying */
	bool budgeted;			/* the device takes a budget */
	bool budget_counted;		/* ...and rs counts in it */
	bool budget_joined;		/* in rs_budget_conns(); tlock */
	struct rs_limit_user *limit_user; /* charged the transport
					   * (rs_limit.c); tlock
					   */
	bool torn;			/* teardown started */
	bool settled;			/* teardown chose EOF or an error */
	bool established;		/* was connected: names are valid */
	u64 peer_addr;
	u32 peer_rkey;
	struct rs_stats stats;
	struct rs_dtx dtx;		/* direct transfers: sending end */
	struct rs_drx drx;		/* ...receiving end */
	struct rs_dslot dslot[RS_ADV_SLOTS];
	bool cancel_wanted;		/* CANCEL to post */
	bool cancel_ack_wanted;		/* CANCEL_ACK to post */
	bool drained;			/* QP drained: no peer access left */
	u32 rcvbuf_ring;		/* ring sizes fixed at connect time */
	u32 sndbuf_ring;		/* 0: autotuned from RS_TX_START */

	); /* conn */

	/* listener */
	struct list_head accept_q;	/* established children */
	struct list_head accept_node;	/* in parent's accept_q */
	struct rs_sock *parent;		/* child: listener until accepted */
	unsigned int pending;		/* listener: children not established */

	struct mutex tlock;		/* transport life and cm_id (rs.h) */
	struct mutex mr_lock;		/* creating vs freeing slot MRs */
	unsigned int dactive;		/* threads in a direct transfer that
					 * may sleep (lock_sock; rs_drecv())
					 */
	u32 budget_direct;		/* direct transfers in flight (rs_budget.c) */
	struct mem_cgroup *memcg;	/* charged for the rings */
	unsigned long mem;		/* ring bytes counted in rs_mem_used */
	bool orphan;			/* counted in rs_orphans (under lock) */

	struct list_head diag_node;	/* on the list sock_diag dumps */

	/* TCP fallback (rs_fallback.c, docs/fallback.md) */
	struct socket *fb;		/* the caller's TCP socket, owned
					 * (tlock), until rs_release()
					 */
	struct socket *fbc;		/* fb while ops forward to it (release
					 * store; cleared by rs_fb_retry()):
					 * load it once per call
					 */
	struct sock *fb_sk;		/* fbc's sock, held until destruct:
					 * what sock_diag reads (rs_fb_sk())
					 */
	int fb_mode;			/* RDMASTREAM_FALLBACK_* */
	atomic_t fb_connects;		/* forwarded connect()s running */
	u8 fb_reason;			/* RDMASTREAM_FB_* (tlock) */
	bool fb_pending;		/* CM attempt abandoned: TCP next */
	bool fb_closed;			/* released: no TCP socket any more */
	struct sockaddr_storage fb_dst;	/* where connect() goes */
	struct delayed_work fb_work;	/* fallback_ms: the CM is silent */
	void (*fb_data_ready)(struct sock *sk);	/* the TCP socket's own */
	void (*fb_write_space)(struct sock *sk);
	void (*fb_state_change)(struct sock *sk);
	void (*fb_error_report)(struct sock *sk);

	struct timer_list probe_timer;	/* persist and keepalive probes */
	struct work_struct teardown_work;
	struct delayed_work orphan_work;
	struct work_struct rx_tune_work;	/* old stream buffer: retire, free */
};

static inline struct rs_sock *rs_sk(const struct sock *sk)
{
	return (struct rs_sock *)sk;
}

/*
 * A socket of the IPPROTO route's AF_INET6 side: inet6_create() finds the
 * ipv6_pinfo at the end of the object (inet6_sk_generic()).
 */
struct rs6_sock {
	struct rs_sock rs;
	struct ipv6_pinfo inet6;
};

/* TCP_* state, published for lockless readers such as poll. */
static inline void rs_set_state(struct sock *sk, int state)
{
	trace_rdmastream_state(sk, state);
	/* pairs with the acquire in inet_sk_state_load() */
	smp_store_release(&sk->sk_state, state);
}

/*
 * Before a blocking wait: -EAGAIN when no time is left (or the call is
 * non-blocking), the signal's errno when one is pending, else 0.
 */
static inline int rs_may_wait(long timeo)
{
	if (!timeo)
		return -EAGAIN;
	if (signal_pending(current))
		return sock_intr_errno(timeo);
	return 0;
}

/*
 * Sleep until cond, at most tmo jiffies, with lock_sock() dropped; only a
 * fatal signal cuts it short. For waits on the HCA, which still uses the
 * caller's pages: a caller that stops waiting before cond must fence the
 * connection and leave its pages to the fence. Returns what
 * wait_event_killable_timeout() does: > 0 cond, 0 timeout, < 0 killed.
 */
#define rs_dwait(rs, cond, tmo) ({					\
	long __left;							\
	release_sock(&(rs)->sk);					\
	__left = wait_event_killable_timeout((rs)->dwait, cond, tmo);	\
	lock_sock(&(rs)->sk);						\
	__left; })

/*
 * rs_dwait() that times out only after tmo without any send completion.
 * On a lossy link the QP may need longer than tmo to get through what was
 * queued before our request while it keeps completing work; giving up
 * then would reset a connection that works (docs/lossy-links.md). A QP
 * that stops completing fails within its retry budget (the condition
 * then holds once drained) or is ended by RS_WEDGE_TIMEOUT.
 */
#define rs_dwait_progress(rs, cond, tmo) ({				\
	long __l;							\
	for (;;) {							\
		__l = rs_dwait(rs, cond, tmo);				\
		if (__l || !time_before(jiffies,			\
				READ_ONCE((rs)->sq_progress) + (tmo)))	\
			break;						\
	}								\
	__l; })

/* A thread leaves a direct transfer; see rs_drecv(). Under lock_sock(). */
static inline void rs_dactive_put(struct rs_sock *rs)
{
	WRITE_ONCE(rs->dactive, rs->dactive - 1);
	if (!rs->dactive)
		wake_up_all(&rs->dwait);
}

extern struct proto rs_proto;
extern const struct proto_ops rs_proto_ops;
extern const struct proto_ops rs_inet_ops;
extern const struct proto_ops rs_inet6_ops;
extern int rs_ipproto;
extern struct workqueue_struct *rs_wq;
extern struct workqueue_struct *rs_tune_wq;
extern int rs_family;
extern unsigned int rs_keepalive_secs;
extern int rs_default_policy;
extern unsigned int rs_default_threshold;
extern unsigned int rs_max_send_sge;
extern int rs_inject_post;
extern unsigned int rs_spin_max_us;
extern unsigned int rs_ack_min;
extern unsigned int rs_ack_first;

/* Work request chains, named for fault injection (rs_inject_post). */
enum rs_chain {
	RS_CHAIN_ADVERT = 1,	/* LOCAL_INV, REG_MR, ADVERT */
	RS_CHAIN_ZCOPY = 2,	/* WRITE..., DIRECT */
	RS_CHAIN_INLINE = 3,	/* inline WRITE, DIRECT */
	RS_CHAIN_TXGROW = 4,	/* REG_MR of a grown send ring */
	RS_CHAIN_RXGROW = 5,	/* LOCAL_INV, REG_MR of a grown stream buffer;
				 * LOCAL_INV of the buffer it replaced
				 */
};

extern unsigned int rs_inflight_max;
extern unsigned long rs_mem_max;
extern atomic_long_t rs_mem_used;
extern unsigned int rs_max_orphans;
extern atomic_t rs_orphans;

/* Data may flow: established, or the peer has closed its side only. */
static inline bool rs_state_open(int state)
{
	return state == TCP_ESTABLISHED || state == TCP_CLOSE_WAIT;
}

/* rs_af.c */
void rs_sock_setup(struct sock *sk, struct socket *sock);
struct sock *rs_sock_alloc(struct net *net, const struct sock *like,
			   struct socket *sock, int kern);
void rs_conn_reset(struct rs_sock *rs);
int rs_param_ignore(const char *val, const struct kernel_param *kp);
void rs_sk_inherit(struct sock *sk, const struct sock *lsk);
void rs_wake(struct sock *sk, __poll_t mask);
/* what writers wait for, in a wake-up's key */
#define RS_POLLOUT	(EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND)
void rs_write_space(struct sock *sk);
void rs_nospace(struct sock *sk);

/* rs_fallback.c */
struct rdmastream_info;
extern int rs_fallback_default;
extern unsigned int rs_fallback_ms;
static inline struct socket *rs_fbc(struct rs_sock *rs)
{
	/* pairs with the releases in rs_fallback.c */
	return smp_load_acquire(&rs->fbc);
}

void rs_fb_init(struct rs_sock *rs);
int rs_fb_bind(struct rs_sock *rs, struct sockaddr *addr);
int rs_fb_reserve(struct rs_sock *rs);
int rs_fb_listen(struct rs_sock *rs, int backlog);
bool rs_fb_accept_ready(struct rs_sock *rs);
int rs_fb_accept(struct rs_sock *lrs, struct socket *newsock);
__poll_t rs_fb_listen_poll(struct rs_sock *rs);
__poll_t rs_fb_poll(struct file *file, struct rs_sock *rs, struct socket *fb);
bool rs_fb_names(struct rs_sock *rs, struct sockaddr_storage *local,
		 struct sockaddr_storage *peer);
bool rs_fb_queues(struct rs_sock *rs, u32 *rqueue, u32 *wqueue);
int rs_fb_connect(struct rs_sock *rs, struct socket *fb,
		  struct sockaddr *addr, int flags, bool started);
struct socket *rs_fb_connect_get(struct rs_sock *rs);
struct socket *rs_fb_retry(struct rs_sock *rs);
void rs_fb_precreate(struct rs_sock *rs, const struct sockaddr *addr);
int rs_fb_connect_start(struct rs_sock *rs, struct sockaddr *addr, int err);
void rs_fb_arm(struct rs_sock *rs);
bool rs_fb_cm_fail(struct rs_sock *rs, struct rdma_cm_event *ev, int err);
void rs_fb_after_teardown(struct rs_sock *rs);
bool rs_fb_wait(struct rs_sock *rs, long *timeo);
void rs_fb_release(struct rs_sock *rs);
void rs_fb_destruct(struct rs_sock *rs);
void rs_fb_stop_listen(struct rs_sock *rs);
void rs_fb_info(struct rs_sock *rs, struct rdmastream_info *info);
int rs_fb_setsockopt(struct rs_sock *rs, int val);
void rs_fb_set_dst(struct rs_sock *rs, const struct sockaddr *addr);
int rs_fb_sendmsg(struct socket *sock, struct msghdr *msg, size_t len);
int rs_fb_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
		  int flags);
ssize_t rs_fb_sendpage(struct socket *sock, struct page *page, int offset,
		       size_t size, int flags);
int rs_fb_shutdown(struct socket *sock, int how);
int rs_fb_set(struct socket *sock, int level, int optname,
	      sockptr_t optval, unsigned int optlen);
int rs_fb_get(struct socket *sock, int level, int optname,
	      char __user *optval, int __user *optlen);
void rs_fb_keepalive(struct socket *fb, int on);

/* rs_fbopt.c */
int rs_fbopt_set_ok(int level, int optname);
int rs_fbopt_get_ok(int level, int optname);
bool rs_fbopt_ioctl_ok(unsigned int cmd);

/* rs_inet.c */
int rs_inet_check(void);
int rs_inet_register(void);
void rs_inet_unregister(void);
void rs_inet_sock_init(struct sock *sk);
void rs_inet_destruct(struct sock *sk);

/* rs_cm.c */
int rs_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev);
int rs_cm_create_id(struct rs_sock *rs);
void rs_cm_put_id(struct rs_sock *rs, struct rdma_cm_id *id);
int rs_cm_rebind_v4(struct rs_sock *rs, const struct sockaddr *dst,
		    struct rdma_cm_id **stale);
void rs_conn_fail(struct rs_sock *rs, int err);
void rs_child_unlink(struct rs_sock *rs);

/* rs_res.c */
bool rs_mem_charge(unsigned long bytes);
void rs_mem_charge_force(unsigned long bytes);
void rs_mem_uncharge(unsigned long bytes);
unsigned long rs_ring_bytes(const struct rs_sock *rs, struct ib_device *dev);
int rs_transport_create(struct rs_sock *rs, struct rdma_cm_id *id);
int rs_qp_move(struct rs_sock *rs, struct rdma_cm_id *id,
	       enum ib_qp_state state);
int rs_qp_rtr(struct rs_sock *rs, struct rdma_cm_id *id);
int rs_qp_ready(struct rs_sock *rs, struct rdma_cm_id *id);
void rs_qp_error(struct rs_sock *rs);
int rs_transport_rings(struct rs_sock *rs);
u32 rs_dev_ring_max(struct ib_device *dev);
u32 rs_dev_seg_max(struct ib_device *dev);
u32 rs_tx_start(const struct rs_sock *rs, u32 max);
u32 rs_rx_start(const struct rs_sock *rs, u32 max);
void rs_ring_sizes_set(struct rs_sock *rs);
void rs_transport_destroy(struct rs_sock *rs, struct rdma_cm_id *id);
void rs_transport_free_rings(struct rs_sock *rs);
int rs_post_regs(struct rs_sock *rs);
bool rs_fence(struct rs_sock *rs, int err);

/* rs_txgrow.c */
bool rs_tx_grow(struct rs_sock *rs);

/*
 * The send ring grew and the ring it replaced can go: every work request
 * that may use it has completed. Read locklessly too (a writer's wait,
 * poll): the writer that frees it holds lock_sock().
 */
static inline bool rs_tx_reapable(const struct rs_sock *rs)
{
	return READ_ONCE(rs->tx_old.vaddr) &&
	       READ_ONCE(rs->sq_done) >= READ_ONCE(rs->tx_old_seq);
}

void rs_tx_tune(struct rs_sock *rs);
void rs_tx_sync_done_locked(struct rs_sock *rs, u64 from, u64 to);
bool rs_mem_pressure(void);
int rs_ring_new(struct rs_sock *rs, struct rs_ring *r, u32 size,
		enum dma_data_direction dir, u32 seg);
void rs_ring_drop(struct rs_sock *rs, struct rs_ring *r,
		  enum dma_data_direction dir);

/* rs_rxgrow.c */
void rs_rx_rate_locked(struct rs_sock *rs);
void rs_rx_announced_locked(struct rs_sock *rs);
void rs_rx_tune(struct rs_sock *rs);
bool rs_rx_settle_due_locked(struct rs_sock *rs);
void rs_rx_tune_later_locked(struct rs_sock *rs);
void rs_rx_tune_work(struct work_struct *work);
bool rs_ctrl_ring(struct rs_sock *rs, const struct rs_ctl *m);

/* The buffer that holds stream byte off: the new one past the switch. */
static inline struct rs_ring *rs_rx_ring(struct rs_sock *rs, u64 off)
{
	return rs_flow_rx_in_new(&rs->flow, off) ? &rs->rx_new : &rs->rx;
}

/* rs_ring.c */
int rs_ring_alloc(struct rs_ring *r, u32 size, gfp_t extra);
void rs_ring_move(struct rs_ring *dst, const struct rs_ring *src, u64 from,
		  u64 to);
int rs_ring_map(struct rs_ring *r, struct ib_device *dev, struct ib_pd *pd,
		enum dma_data_direction dir, u32 seg);
void rs_ring_unmap(struct rs_ring *r, struct ib_device *dev,
		   enum dma_data_direction dir);
void rs_ring_free(struct rs_ring *r);
u32 rs_mr_pages(struct ib_device *dev, u32 npages);
void rs_ring_sync(struct rs_ring *r, u32 off, u32 len, bool for_cpu);
void rs_mr_hide_iova(struct ib_mr *mr);
int rs_ring_copy_in(struct rs_ring *r, u32 off, struct iov_iter *from,
		    u32 len);
int rs_ring_copy_out(struct rs_ring *r, u32 off, struct iov_iter *to,
		     u32 len);

/*
 * Send-ring space worth waking a writer for and reporting EPOLLOUT: as
 * TCP's sk_stream_is_writeable(), free space of at least half of what is
 * queued, i.e. a third of the ring.
 */
static inline bool rs_tx_writeable(u32 space, u32 size)
{
	return (u64)space * 3 >= size;
}

/* What writers wait for (rs_writers_wake_locked()). */
struct rs_writers {
	u32 space;		/* free send-ring bytes */
	u32 sq_free;		/* free send queue slots */
	u32 unsent;		/* queued indirect bytes */
};

/* rs_tx.c */
bool rs_tx_poll_writeable(struct rs_sock *rs);
void rs_writers_snap_locked(struct rs_sock *rs, struct rs_writers *w);
bool rs_writers_wake_locked(struct rs_sock *rs, const struct rs_writers *w);
int rs_sendmsg(struct socket *sock, struct msghdr *msg, size_t len);
ssize_t rs_sendpage(struct socket *sock, struct page *page, int offset,
		    size_t size, int flags);
void rs_push_locked(struct rs_sock *rs);
void rs_send_done(struct ib_cq *cq, struct ib_wc *wc);
u32 rs_tx_space(struct rs_sock *rs);
void rs_probe_timer(struct timer_list *t);
/* rs_rtt.c */
void rs_ack_choose(struct rs_sock *rs, struct rdma_cm_id *id, int req_retry);
void rs_ack_handshake(struct rs_sock *rs, struct rdma_cm_id *id);
bool rs_rtt_want_locked(struct rs_sock *rs, const struct ib_send_wr *wr);
void rs_rtt_done_locked(struct rs_sock *rs, struct rs_send *s);
int rs_rtt_register(void);
void rs_rtt_unregister(void);
void rs_probe_arm_locked(struct rs_sock *rs, unsigned long delay);
void rs_kick_locked(struct rs_sock *rs);
void rs_keepalive(struct sock *sk, int on);
u32 rs_sq_free(const struct rs_sock *rs);
int rs_wait_connect(struct rs_sock *rs, long *timeo);
int rs_post_slot(struct rs_sock *rs, struct ib_send_wr *wr, bool signal,
		 bool fin);
int rs_post_chain(struct rs_sock *rs, struct ib_send_wr *first,
		  struct rs_wait *wait, enum rs_chain kind);
bool rs_send_blocked(struct rs_sock *rs);

/* rs_ctrl.c */
void rs_ctl_fill(struct rs_sock *rs, struct rs_ctl *m, enum rs_ctl_type type,
		 u32 credits);
void rs_ctl_sge(struct rs_sock *rs, struct rs_send *s, struct ib_sge *sge,
		struct ib_send_wr *wr);
int rs_ctrl_post_locked(struct rs_sock *rs, enum rs_ctl_type type);
__poll_t rs_ctrl_recv_locked(struct rs_sock *rs, const struct rs_ctl *msg,
			     const struct ib_wc *wc);
void rs_reg_done(struct ib_cq *cq, struct ib_wc *wc);

/* rs_rx.c */
int rs_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
	       int flags);
void rs_recv_done(struct ib_cq *cq, struct ib_wc *wc);
int rs_post_recv_locked(struct rs_sock *rs, struct rs_recv *r);
u32 rs_rx_avail(struct rs_sock *rs);

/* rs_close.c */
int rs_shutdown(struct socket *sock, int how);
int rs_release(struct socket *sock);
void rs_abort_locked(struct rs_sock *rs, int err);
void rs_wc_error_locked(struct rs_sock *rs, const struct ib_wc *wc);
void rs_schedule_teardown(struct rs_sock *rs);
void rs_teardown_work(struct work_struct *work);
void rs_orphan_work(struct work_struct *work);
void rs_maybe_finish_locked(struct rs_sock *rs);
void rs_orphan_done(struct rs_sock *rs);

/* rs_pin.c */
int rs_pin_user(struct rs_pin *p, struct iov_iter *it, u32 max, bool write);
int rs_pin_map(struct rs_pin *p, struct ib_device *dev);
void rs_pin_unmap(struct rs_pin *p, struct ib_device *dev);
void rs_pin_release(struct rs_pin *p);

/* rs_drecv.c */
int rs_drecv(struct rs_sock *rs, struct msghdr *msg, u32 len, int flags,
	     long *timeo);
bool rs_drecv_wanted(struct rs_sock *rs, struct msghdr *msg, u32 len,
		     int flags, long timeo);
__poll_t rs_drecv_on_direct(struct rs_sock *rs, const struct rs_ctl *m,
			    const struct ib_wc *wc);
void rs_dslots_unmap_locked(struct rs_sock *rs);
void rs_dslots_init(struct rs_sock *rs);
void rs_dslots_free(struct rs_sock *rs);
void rs_dslots_release_orphans(struct rs_sock *rs);

/* rs_dsend.c */
long rs_dsend(struct rs_sock *rs, struct msghdr *msg, u32 len, long *timeo);
bool rs_dsend_ready(struct rs_sock *rs);
bool rs_dsend_on_advert(struct rs_sock *rs, const struct rs_ctl *m);
void rs_zsends_unmap_locked(struct rs_sock *rs, struct list_head *orphans);
void rs_zsends_free(struct rs_sock *rs, struct list_head *orphans);
int rs_policy(const struct rs_sock *rs);
u32 rs_threshold(const struct rs_sock *rs);

/* rs_sockopt.c */
int rs_setsockopt(struct socket *sock, int level, int optname,
		  sockptr_t optval, unsigned int optlen);
int rs_getsockopt(struct socket *sock, int level, int optname,
		  char __user *optval, int __user *optlen);

/* rs_diag.c: module-wide counters (/proc/net/rdmastream_stat) */
enum rs_ev {
	RS_EV_ACTIVE_OPENS,	/* connect() started */
	RS_EV_PASSIVE_OPENS,	/* connections queued for accept() */
	RS_EV_ATTEMPT_FAILS,	/* connection setups that failed */
	RS_EV_ABORTS,		/* established connections aborted */
	RS_EV_FB_FORCED,	/* connections over TCP: forced */
	RS_EV_FB_NO_DEVICE,	/* ...no RDMA device on the route */
	RS_EV_FB_REJECTED,	/* ...no rdmastream at the peer */
	RS_EV_FB_TIMEOUT,	/* ...the peer's CM silent */
	RS_EV_FB_ACCEPTED,	/* ...accepted from TCP clients */
	RS_EV_MAX
};

enum rs_bytes {
	RS_BYTES_DIRECT_OUT,
	RS_BYTES_INDIRECT_OUT,
	RS_BYTES_DIRECT_IN,
	RS_BYTES_INDIRECT_IN,
	RS_BYTES_MAX
};

void rs_stat_inc(const struct sock *sk, enum rs_ev ev);
void rs_diag_link(struct rs_sock *rs);
void rs_diag_unlink(struct rs_sock *rs);
int rs_stat_register(void);
void rs_stat_unregister(void);
int rs_diag_register(void);
void rs_diag_unregister(void);

/* rs_budget.c: bytes in flight to other hosts on rxe */
bool rs_budget_wanted(struct rs_sock *rs, struct rdma_cm_id *id);
void rs_budget_join(struct rs_sock *rs);
void rs_budget_leave(struct rs_sock *rs);
u32 rs_budget_conns(void);
void rs_budget_update_locked(struct rs_sock *rs);
u32 rs_budget_cap(const struct rs_sock *rs);
bool rs_budget_direct_start(struct rs_sock *rs);
void rs_budget_direct_end(struct rs_sock *rs, bool counted);

/* rs_limit.c: connections with HCA objects, per owner and netns */
int rs_limit_charge(struct rs_sock *rs);
void rs_limit_uncharge(struct rs_sock *rs);
atomic_t *rs_net_conns(const struct net *net);

/* rs_pd.c: a connection's PD back to the device (RS_PD_LINGER) */
#ifdef RS_PD_LINGER
void rs_pd_put(struct ib_pd *pd);
int rs_pd_init(void);
void rs_pd_exit(void);
#else
static inline void rs_pd_put(struct ib_pd *pd)
{
	ib_dealloc_pd(pd);
}

static inline int rs_pd_init(void)
{
	return 0;
}

static inline void rs_pd_exit(void)
{
}
#endif
struct rdmastream_info;
void rs_info_fill(struct rs_sock *rs, struct rdmastream_info *info);
void rs_map_addr(struct sockaddr_storage *ss);

#endif /* RS_H */
