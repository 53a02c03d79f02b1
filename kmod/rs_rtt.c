// SPDX-License-Identifier: GPL-2.0
/*
 * rdmastream per-connection ack timeout: a small cache of the round trip
 * measured to each peer (as TCP keeps one in tcp_metrics), fed by every
 * connection's handshake, and the QP ack timeout and retry count a new
 * connection takes from it (rs_rto.h has the arithmetic).
 *
 * Why it matters: an RC QP recovers a packet whose loss no later packet
 * reveals only when its ack timer fires, and go-back-N resends what
 * followed. rdma_cm's RoCE default, and ours until now, was 1.07 s per
 * such loss: at 1 % loss a stream moved a twentieth of what TCP moved
 * (docs/lossy-links.md). A LAN's round trip is well under a millisecond.
 *
 * The trade-off is the retry budget: a QP fails after its retry count of
 * timeouts in a row, so a short timeout alone would turn a short outage
 * into a reset. rdma_rxe retries for ever when the count is 7 (the count
 * is only decremented when it is not 7), so on rxe the QP asks for 7 and
 * the connection's time limit is the module's own (rs_wedged_locked():
 * no send completion for RS_WEDGE_TIMEOUT while one is awaited). Other
 * devices take 7 as seven tries; there the floor stays RS_ACK_TIMEOUT, so
 * their budget is what it was, and the measured round trip only raises
 * the timeout on a path longer than that.
 */
#include <linux/spinlock.h>
#include <net/ipv6.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>

#include "rs.h"

#define RS_RTT_SLOTS	32
#define RS_RTT_AGE	(10 * 60 * HZ)	/* an entry older than this is gone */

struct rs_rtt_entry {
	struct sockaddr_in6 peer;	/* family and address only (or sin) */
	struct rs_rtt rtt;
	unsigned long stamp;		/* jiffies: last sample */
};

/*
 * One cache per network namespace: peers are addresses of that
 * namespace, and one namespace's connections never evict another's.
 */
struct rs_rtt_net {
	spinlock_t lock;		/* the entries */
	struct rs_rtt_entry e[RS_RTT_SLOTS];
};

static unsigned int rs_rtt_net_id;

static struct rs_rtt_net *rs_rtt_net(const struct net *net)
{
	return net_generic(net, rs_rtt_net_id);
}

static bool rs_rtt_match(const struct rs_rtt_entry *e,
			 const struct sockaddr *sa)
{
	const struct sockaddr_in6 *a6, *b6;
	const struct sockaddr_in *a4, *b4;

	if (e->peer.sin6_family != sa->sa_family)
		return false;
	if (sa->sa_family == AF_INET) {
		a4 = (const struct sockaddr_in *)&e->peer;
		b4 = (const struct sockaddr_in *)sa;
		return a4->sin_addr.s_addr == b4->sin_addr.s_addr;
	}
	if (sa->sa_family == AF_INET6) {
		a6 = (const struct sockaddr_in6 *)&e->peer;
		b6 = (const struct sockaddr_in6 *)sa;
		return ipv6_addr_equal(&a6->sin6_addr, &b6->sin6_addr) &&
		       a6->sin6_scope_id == b6->sin6_scope_id;
	}
	return false;
}

static bool rs_rtt_live(const struct rs_rtt_entry *e)
{
	return e->peer.sin6_family &&
	       time_before(jiffies, e->stamp + RS_RTT_AGE);
}

/* The live entry for the peer, or NULL. Under the cache's lock. */
static struct rs_rtt_entry *rs_rtt_find(struct rs_rtt_net *c,
					const struct sockaddr *sa)
{
	int i;

	for (i = 0; i < RS_RTT_SLOTS; i++)
		if (rs_rtt_live(&c->e[i]) && rs_rtt_match(&c->e[i], sa))
			return &c->e[i];
	return NULL;
}

/* A free or the least recently sampled slot. Under the cache's lock. */
static struct rs_rtt_entry *rs_rtt_victim(struct rs_rtt_net *c)
{
	struct rs_rtt_entry *v = &c->e[0];
	int i;

	for (i = 0; i < RS_RTT_SLOTS; i++) {
		if (!rs_rtt_live(&c->e[i]))
			return &c->e[i];
		if (time_before(c->e[i].stamp, v->stamp))
			v = &c->e[i];
	}
	return v;
}

static void rs_rtt_get(const struct net *net, const struct sockaddr *sa,
		       struct rs_rtt *rtt)
{
	struct rs_rtt_net *c = rs_rtt_net(net);
	struct rs_rtt_entry *e;

	spin_lock_bh(&c->lock);
	e = rs_rtt_find(c, sa);
	if (e)
		*rtt = e->rtt;
	spin_unlock_bh(&c->lock);
}

static void rs_rtt_put(const struct net *net, const struct sockaddr *sa,
		       u32 us)
{
	struct rs_rtt_net *c = rs_rtt_net(net);
	struct rs_rtt_entry *e;

	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return;
	spin_lock_bh(&c->lock);
	e = rs_rtt_find(c, sa);
	if (!e) {
		e = rs_rtt_victim(c);
		memset(e, 0, sizeof(*e));
		memcpy(&e->peer, sa, sa->sa_family == AF_INET ?
		       sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
	}
	rs_rtt_sample(&e->rtt, us);
	e->stamp = jiffies;
	spin_unlock_bh(&c->lock);
}

static int __net_init rs_rtt_net_init(struct net *net)
{
	spin_lock_init(&rs_rtt_net(net)->lock);
	return 0;
}

static struct pernet_operations rs_rtt_net_ops = {
	.init	= rs_rtt_net_init,
	.id	= &rs_rtt_net_id,
	.size	= sizeof(struct rs_rtt_net),
};

/* Before any socket exists, after the last is gone. */
int rs_rtt_register(void)
{
	return register_pernet_subsys(&rs_rtt_net_ops);
}

void rs_rtt_unregister(void)
{
	unregister_pernet_subsys(&rs_rtt_net_ops);
}

/* rdma_rxe retries for ever on a retry count of 7 (rxe_comp.c). */
static bool rs_dev_retries_forever(const struct ib_device *dev)
{
	return dev->ops.driver_id == RDMA_DRIVER_RXE;
}

/*
 * The floor under a QP's ack timeout where the QP retries for ever: the
 * module's, raised on a connection to another host over rxe when the
 * host already has many such (rs_rto_load_floor(): their QPs share one
 * netdev queue that no congestion control keeps short).
 */
static u32 rs_ack_floor(const struct rs_sock *rs)
{
	u32 floor = READ_ONCE(rs_ack_min);

	return rs->budgeted ? rs_rto_load_floor(floor, rs_budget_conns()) :
			      floor;
}

/*
 * Choose the QP's ack timeout and retry count before connect (active) or
 * accept (passive): req_retry is the retry count of the peer's REQ, which
 * the passive QP takes (-1 on the active side, which chooses it).
 */
void rs_ack_choose(struct rs_sock *rs, struct rdma_cm_id *id, int req_retry)
{
	bool forever = rs_dev_retries_forever(id->device) &&
		       (req_retry < 0 || req_retry == 7);
	u32 floor = forever ? rs_ack_floor(rs) : RS_ACK_TIMEOUT;
	u32 first = forever ? READ_ONCE(rs_ack_first) : RS_ACK_TIMEOUT;
	struct rs_rtt rtt = {};

	rs_rtt_get(sock_net(&rs->sk),
		   (struct sockaddr *)&id->route.addr.dst_addr, &rtt);
	rs->ack_exp = rs_rto_exp(&rtt, floor, first);
	rs->ack_j = usecs_to_jiffies(rs_rto_exp_us(rs->ack_exp)) + 1;
	rs->base_rtt_us = rtt.valid ? rtt.srtt_us : 0;
	rs->base_rttvar_us = rtt.valid ? rtt.rttvar_us : 0;
	if (req_retry >= 0)		/* the passive QP takes the REQ's */
		rs->qp_retry = req_retry;
	else
		rs->qp_retry = forever ? 7 : RS_RETRY_COUNT;
	rdma_set_ack_timeout(id, rs->ack_exp);
	trace_rdmastream_ack_timeout(&rs->sk, rs->ack_exp, rs->qp_retry,
				     rs->base_rtt_us);
}

/*
 * A first contact: no round trip was cached for the peer, so
 * rs_ack_choose() took ack_timeout_first. The active side's REP came a
 * round trip plus the peer's handling of our REQ after the REQ went; the
 * passive side's RTU a round trip plus the peer's handling of our REP
 * after the REP went: never sooner than a round trip, a sample on the
 * safe side. The QP, which the module moves to RTS only now (at the REP,
 * rs_connect_response(); at the RTU, rs_child_rtu()), takes the timeout
 * it gives, as TCP takes its first round trip from the handshake (RFC
 * 6298, 2.2), but never more than ack_timeout_first. Only where the QP
 * retries for ever (rxe with a retry count of 7), as the floor is only
 * there.
 */
void rs_ack_handshake(struct rs_sock *rs, struct rdma_cm_id *id)
{
	struct rs_rtt rtt = {};
	u64 us;
	u32 exp;

	if (rs->base_rtt_us || !rs->req_ns ||
	    !rs_dev_retries_forever(id->device) || rs->qp_retry != 7)
		return;
	us = div_u64(ktime_get_ns() - rs->req_ns, NSEC_PER_USEC);
	rs_rtt_sample(&rtt, clamp_t(u64, us, 1, RS_RTT_SAMPLE_MAX_US));
	exp = rs_rto_exp(&rtt, rs_ack_floor(rs), rs->ack_exp);
	if (exp >= rs->ack_exp)
		return;
	rs->ack_exp = exp;
	rs->ack_j = usecs_to_jiffies(rs_rto_exp_us(exp)) + 1;
	rdma_set_ack_timeout(id, exp);
	trace_rdmastream_ack_timeout(&rs->sk, exp, rs->qp_retry, 0);
}

/*
 * Sample the round trip with this work request? A small one (a control
 * message, a probe, an inline write) posted on a send queue known to be
 * empty (every earlier request completed: a signalled one completed last
 * and nothing was posted since), at most every RS_RTT_EVERY: its
 * completion needs the peer's acknowledgement, so post to completion is
 * the round trip that the ack timer has to cover (plus the completion's
 * delivery), not time spent behind earlier data. The caller signals it.
 * The first is the SETUP each end sends; then request-response traffic
 * samples every RS_RTT_EVERY, a bulk stream seldom.
 */
bool rs_rtt_want_locked(struct rs_sock *rs, const struct ib_send_wr *wr)
{
	u32 len = 0;
	int i;

	if (rs->sq_done != rs->sq_posted ||
	    (rs->rtt_next && time_before(jiffies, rs->rtt_next)))
		return false;
	/* a probe goes out because something is stuck, or idle: no */
	if (wr->opcode == IB_WR_RDMA_WRITE && !wr->num_sge)
		return false;
	for (i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	return len <= RS_MAX_INLINE;
}

/*
 * A sampled work request completed: the connection's round trip, and the
 * peer's in the cache for the connections that come next, unless it
 * waited out a retransmission (rs_rtt_resent()).
 */
void rs_rtt_done_locked(struct rs_sock *rs, struct rs_send *s)
{
	u64 ns = ktime_get_ns() - s->post_ns;
	u32 us = min_t(u64, ns / NSEC_PER_USEC, RS_RTT_SAMPLE_MAX_US);

	s->post_ns = 0;
	rs->rtt_next = jiffies + RS_RTT_EVERY;
	if (rs_rtt_resent(&rs->rtt, us, rs->ack_exp))
		return;
	rs_rtt_sample(&rs->rtt, us);
	if (rs->established)
		rs_rtt_put(sock_net(&rs->sk), (struct sockaddr *)&rs->peer_sa,
			   us);
}
