// SPDX-License-Identifier: GPL-2.0
/*
 * Connection management through rdma_cm.
 *
 * Active side: connect() resolves the address; the handler resolves the
 * route, builds the transport (no rings yet) and sends a REQ; the REP
 * (CONNECT_RESPONSE) readies our QP, sends the RTU, adds the rings and
 * completes connect(). The module creates its QPs and moves them through
 * their states itself (rs_qp_move()); rdma_cm only carries the
 * handshake. Passive side: a CONNECT_REQUEST
 * on the listener's id is admitted (a place in the backlog, ring memory
 * under mem_max) or rejected at once with a reason; an admitted one gets
 * a child socket with its transport (no rings yet) and is accepted; the
 * child gets its rings and joins the listener's accept queue when it is
 * ESTABLISHED.
 *
 * The handler never takes lock_sock(): a system call may hold it for ever
 * while it copies from or to user memory (userfaultfd, FUSE), and rdma_cm
 * runs every id's events, device removal included, on shared work queues.
 * State changes are made under rs->lock, transport changes under
 * rs->tlock, which no one holds across a user copy.
 *
 * Every cm id holds a reference on its socket (dropped by rs_cm_put_id()
 * after rdma_destroy_id(), or when the handler returns non-zero so that
 * rdma_cm destroys the id itself).
 */
#include <linux/memcontrol.h>
#include <linux/security.h>
#include <rdma/ib_cm.h>

#include "rs.h"

/* A new cm id of the socket, holding it (rs_cm_put_id() lets go). */
static struct rdma_cm_id *rs_cm_new_id(struct rs_sock *rs)
{
	struct rdma_cm_id *id;

	id = rdma_create_id(sock_net(&rs->sk), rs_cm_handler, rs, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (!IS_ERR(id))
		sock_hold(&rs->sk);
	return id;
}

int rs_cm_create_id(struct rs_sock *rs)
{
	struct rdma_cm_id *id = rs_cm_new_id(rs);

	if (IS_ERR(id))
		return PTR_ERR(id);
	rs->cm_id = id;
	return 0;
}

/*
 * A socket bound to [::] (IPv6 and IPv4) that connects to an IPv4 address,
 * as TCP's may: rdma_cm resolves only a destination of its id's family,
 * so bind a new id to 0.0.0.0 on the same port and take it. The old id is
 * made IPv6-only first, which hands the port's IPv4 side to the new one;
 * the fallback's TCP socket holds the port in TCP's space all along.
 * (Between the two calls the IPv4 side is free in rdma_cm's space, and
 * after, the IPv6 side: another rdma_cm user could bind it.) *stale gets
 * the id the socket no longer uses, the old one or, on failure, the new
 * one, for the caller to destroy outside lock_sock() (rs_cm_put_id()).
 * A failure is EADDRNOTAVAIL (ENOMEM as such): AUTO fallback takes TCP,
 * which can connect. Under tlock.
 */
int rs_cm_rebind_v4(struct rs_sock *rs, const struct sockaddr *dst,
		    struct rdma_cm_id **stale)
{
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct rdma_cm_id *old = rs->cm_id, *id;
	struct sockaddr_in6 *src;
	int err;

	*stale = NULL;
	if (!old || dst->sa_family != AF_INET)
		return 0;
	src = (struct sockaddr_in6 *)&old->route.addr.src_addr;
	if (src->sin6_family != AF_INET6 || !ipv6_addr_any(&src->sin6_addr))
		return 0;
	any.sin_port = src->sin6_port;
	id = rs_cm_new_id(rs);
	if (IS_ERR(id))
		return PTR_ERR(id) == -ENOMEM ? -ENOMEM : -EADDRNOTAVAIL;
	if (rs->sk.sk_reuse)
		rdma_set_reuseaddr(id, 1);
	err = rdma_set_afonly(old, 1);
	if (!err) {
		err = rdma_bind_addr(id, (struct sockaddr *)&any);
		if (err)
			rdma_set_afonly(old, 0);
	}
	if (err) {
		*stale = id;
		return err == -ENOMEM ? err : -EADDRNOTAVAIL;
	}
	spin_lock_bh(&rs->lock);
	rs->cm_id = id;
	spin_unlock_bh(&rs->lock);
	*stale = old;
	return 0;
}

/* Not from id's own handler, and never under lock_sock(). */
void rs_cm_put_id(struct rs_sock *rs, struct rdma_cm_id *id)
{
	rdma_destroy_id(id);
	sock_put(&rs->sk);
}

static void rs_pdata_fill(struct rs_cm_pdata *p, struct rs_sock *rs)
{
	memset(p, 0, sizeof(*p));
	p->version = RS_PROTO_VERSION;
	p->recv_slots = cpu_to_be16(RS_RQ_DEPTH);
	p->flags = RS_CM_F_RING | RS_CM_F_WSEQ | RS_CM_F_SHRINK;
	p->ring_size = cpu_to_be32(rs->flow.rx_size);
}

static bool rs_pdata_ok(const void *data, u8 len)
{
	const struct rs_cm_pdata *p = data;

	/* a flag we do not know: the peer is not our kind */
	return data && len >= sizeof(*p) && p->version == RS_PROTO_VERSION &&
	       !(p->flags & ~RS_CM_F_KNOWN) &&
	       be16_to_cpu(p->recv_slots) == RS_RQ_DEPTH;
}

/* What the peer's private data (checked by rs_pdata_ok()) says it does. */
static void rs_pdata_peer(struct rs_sock *rs, const void *data)
{
	const struct rs_cm_pdata *p = data;

	rs->peer_ring = p->flags & RS_CM_F_RING;
	rs->peer_shrink = rs->peer_ring && (p->flags & RS_CM_F_SHRINK);
	rs->peer_wseq = p->flags & RS_CM_F_WSEQ;
}

/*
 * Transport retries (rs_rtt.c): 7 on rxe, which then retries for ever,
 * so that a short ack timeout does not turn a short outage into a reset
 * (the module's watchdog ends a QP that completes nothing for
 * RS_WEDGE_TIMEOUT); RS_RETRY_COUNT (6) elsewhere, where with the 1.07 s
 * timeout a dead peer surfaces after about 7 s.
 * Receiver-not-ready retries: 6. An honest peer never sends RNR
 * (credits), and 7 would again mean forever: a peer that stops posting
 * receives could hold our sends, and the user pages a zero-copy send has
 * pinned, for ever. With 6, the QP fails after at most 7 RNR waits of the
 * peer's choosing (at most 655 ms each by the IB spec).
 */
#define RS_RNR_RETRY	6

/*
 * The IB CM lets the peer choose our retry counts: the passive side's QP
 * takes both counts from the REQ, the active side's RNR count comes from
 * the REP. A peer asking for an RNR count of 7 ("forever") could stall
 * our sends, and pin user pages, for ever: refuse it (our own ends ask
 * for 6). A retry count of 7 is seven tries on hardware and "for ever" on
 * rxe, where our own ends ask for it (rs_rtt.c): a QP that stops
 * completing is then ended by the module's watchdog (rs_wedged_locked()).
 */
static bool rs_retries_ok(const struct rdma_conn_param *cp)
{
	return cp->rnr_retry_count < 7;
}

/*
 * The retry count is the REQ's, which both QPs take: 7 on rxe, where it
 * means "for ever" and the module's watchdog is the bound (rs_rtt.c).
 */
static void rs_conn_param(struct rdma_conn_param *cp, struct rs_cm_pdata *p,
			  struct rs_sock *rs)
{
	memset(cp, 0, sizeof(*cp));
	cp->private_data = p;
	cp->private_data_len = sizeof(*p);
	cp->retry_count = rs->qp_retry;
	cp->rnr_retry_count = RS_RNR_RETRY;
	cp->qp_num = rs->qp->qp_num;	/* ours: rdma_cm has none (rs_qp_move) */
}

/* Detach a child that will never be accepted from its listener. */
void rs_child_unlink(struct rs_sock *rs)
{
	struct rs_sock *parent = rs->parent;

	if (!parent)
		return;
	rs->parent = NULL;
	spin_lock_bh(&parent->lock);
	parent->pending--;
	spin_unlock_bh(&parent->lock);
	sock_put(&parent->sk);
	/* nobody will ever accept it: drop the reference accept() would own */
	sock_set_flag(&rs->sk, SOCK_DEAD);
	sock_put(&rs->sk);
}

/*
 * Connection setup failed with err (positive errno). The caller holds
 * tlock and a reference that outlives this call.
 */
void rs_conn_fail(struct rs_sock *rs, int err)
{
	struct sock *sk = &rs->sk;

	rs_stat_inc(sk, RS_EV_ATTEMPT_FAILS);
	spin_lock_bh(&rs->lock);
	WRITE_ONCE(sk->sk_err, err);
	rs_set_state(sk, TCP_CLOSE);
	rs_schedule_teardown(rs);
	spin_unlock_bh(&rs->lock);
	sk->sk_state_change(sk);
	sk_error_report(sk);
	rs_child_unlink(rs);
}

/*
 * The errno connect() reports for a failed resolution (negative), as TCP
 * would: no route is ENETUNREACH; anything else, a neighbour that never
 * answered (rdma_cm's resolution timeout) included, is EHOSTUNREACH, which
 * TCP reports when the neighbour entry fails during SYN_SENT.
 */
static int rs_addr_errno(int status)
{
	return status == -ENETUNREACH ? status : -EHOSTUNREACH;
}

/* An unspecified or loopback address, as a GID (v4-mapped or IPv6). */
static bool rs_gid_local_only(const union ib_gid *gid)
{
	struct in6_addr a;

	memcpy(&a, gid->raw, sizeof(a));
	if (ipv6_addr_v4mapped(&a))
		return ipv4_is_zeronet(a.s6_addr32[3]) ||
		       ipv4_is_loopback(a.s6_addr32[3]);
	return ipv6_addr_any(&a) || ipv6_addr_loopback(&a);
}

/*
 * May the CM send a REQ on this route? rdma_cm builds the path's GIDs
 * from the socket's addresses as they are: a socket bound to the host's
 * IPv6 address that connects to :: or ::1 gets dgid :: or ::1. ib_cm
 * sends the REQ there from QP1; rxe finds no route out of its netdev,
 * and one failed send leaves rxe's QP1 unable to receive until the link
 * is added again (docs/kernels.md): no handshake on the device works
 * after. A source GID like that would do the same to the peer, which
 * answers to it. Neither leaves the host over RDMA; the fallback (if on)
 * takes TCP, which can.
 */
static bool rs_route_sendable(const struct rdma_cm_id *id)
{
	const struct sa_path_rec *path = id->route.path_rec;

	/* iWARP has no path record: its CM is TCP's handshake */
	if (!path)
		return true;
	return !rs_gid_local_only(&path->dgid) &&
	       !rs_gid_local_only(&path->sgid);
}

static void rs_route_resolved(struct rs_sock *rs, struct rdma_cm_id *id)
{
	struct rdma_conn_param cp;
	struct rs_cm_pdata p;
	int ret;

	if (!rs_route_sendable(id)) {
		if (!rs_fb_cm_fail(rs, NULL, 0))
			rs_conn_fail(rs, EHOSTUNREACH);
		return;
	}
	ret = rs_transport_create(rs, id);
	if (!ret) {
		rs_pdata_fill(&p, rs);
		rs_ack_choose(rs, id, -1);
		rs_conn_param(&cp, &p, rs);
		rs->req_ns = ktime_get_ns();	/* rs_ack_handshake() */
		ret = rdma_connect_locked(id, &cp);
	}
	if (ret == -ENOMEM || ret == -ENOBUFS || ret == -EPROTONOSUPPORT)
		rs_conn_fail(rs, -ret);
	else if (ret)
		rs_conn_fail(rs, EHOSTUNREACH);
}

static void rs_save_names(struct rs_sock *rs, struct rdma_cm_id *id)
{
	memcpy(&rs->local_sa, &id->route.addr.src_addr, sizeof(rs->local_sa));
	memcpy(&rs->peer_sa, &id->route.addr.dst_addr, sizeof(rs->peer_sa));
}

/* A child is up: queue it for accept(), unless its listener is gone. */
static void rs_child_established(struct rs_sock *rs)
{
	struct rs_sock *parent = rs->parent;
	struct sock *psk = &parent->sk;
	bool queued = false;

	spin_lock_bh(&parent->lock);
	parent->pending--;
	if (psk->sk_state == TCP_LISTEN) {
		list_add_tail(&rs->accept_node, &parent->accept_q);
		sk_acceptq_added(psk);
		queued = true;
	}
	spin_unlock_bh(&parent->lock);
	rs->parent = NULL;
	if (queued) {
		rs_stat_inc(psk, RS_EV_PASSIVE_OPENS);
		rs_wake(psk, EPOLLIN | EPOLLRDNORM);
	} else {
		spin_lock_bh(&rs->lock);
		rs_abort_locked(rs, ECONNABORTED);
		spin_unlock_bh(&rs->lock);
		sock_set_flag(&rs->sk, SOCK_DEAD);
		sock_put(&rs->sk);
	}
	sock_put(psk);
}

static unsigned int rs_write_pkts = RS_WRITE_PKTS_DEFAULT;
module_param_named(write_pkts, rs_write_pkts, uint, 0644);
MODULE_PARM_DESC(write_pkts,
		 "largest indirect write to another host over rxe, in packets, for connections established from now on (default 8 before 6.10, 0: no limit, from 6.10)");

/*
 * The path MTU rdma_cm gave the QP: for RoCE the largest IB MTU that fits
 * the netdev's MTU with the RoCE headers (iboe_get_mtu()), for
 * RDMASTREAM_INFO (docs/lossy-links.md, MTU).
 */
static void rs_path_mtu(struct rs_sock *rs)
{
	struct ib_qp_init_attr init;
	struct ib_qp_attr attr;
	int mtu;

	if (ib_query_qp(rs->qp, &attr, IB_QP_PATH_MTU, &init))
		return;
	mtu = ib_mtu_enum_to_int(attr.path_mtu);
	if (mtu > 0)
		rs->path_mtu = mtu;
}

/*
 * Writes of at most write_pkts packets to another host over rxe. rxe's
 * completer ignores a NAK while it goes back N until an ACK comes, and
 * asks for one only at the end of a message or every 65 packets: a
 * second loss inside a long write's retransmission waits out the ack
 * timeout (268 ms before 6.10). Short writes bring an ACK every few
 * packets (docs/lossy-links.md, "Short writes"). Under rs->lock.
 */
static void rs_write_cap_set(struct rs_sock *rs)
{
	u64 pkts = READ_ONCE(rs_write_pkts);

	/* a cap of RS_CHUNK_MAX or more caps nothing (and cannot wrap) */
	if (rs->budgeted && pkts && rs->path_mtu &&
	    pkts * rs->path_mtu < RS_CHUNK_MAX)
		rs->flow.write_cap = pkts * rs->path_mtu;
}

static void rs_established(struct rs_sock *rs, struct rdma_cm_id *id)
{
	struct sock *sk = &rs->sk;
	int err;

	err = rs_transport_rings(rs);
	if (err) {
		rs_conn_fail(rs, err == -ENOMEM ? ENOMEM : ECONNRESET);
		return;
	}
	rs_save_names(rs, id);
	rs_path_mtu(rs);
	spin_lock_bh(&rs->lock);
	rs->flow.ring_ok = rs->peer_ring;
	rs->flow.shrink_ok = rs->peer_shrink;
	rs->flow.wseq = rs->peer_wseq;
	rs_write_cap_set(rs);
	rs->established = true;
	rs_set_state(sk, TCP_ESTABLISHED);
	spin_unlock_bh(&rs->lock);
	err = rs_post_regs(rs);
	if (err) {
		pr_warn("rdmastream: registering the rings failed: %d\n", err);
		rs_conn_fail(rs, ECONNRESET);
		return;
	}
	if (sock_flag(sk, SOCK_KEEPOPEN))
		rs_keepalive(sk, 1);
	if (rs->parent)
		rs_child_established(rs);
	sk->sk_state_change(sk);
}

/*
 * The active side's REP: our QP (rdma_cm has none) goes to RTR and RTS,
 * rdma_accept() sends the RTU, and the connection is established; rdma_cm
 * reports no ESTABLISHED on this side then. A REP that is not our kind
 * (private data, retry counts) is rejected before our QP takes a packet.
 */
static void rs_connect_response(struct rs_sock *rs, struct rdma_cm_id *id,
				struct rdma_cm_event *ev)
{
	int ret;

	if (!rs_pdata_ok(ev->param.conn.private_data,
			 ev->param.conn.private_data_len) ||
	    !rs_retries_ok(&ev->param.conn)) {
		rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
		rs_conn_fail(rs, EPROTO);
		return;
	}
	rs_pdata_peer(rs, ev->param.conn.private_data);
	rs_ack_handshake(rs, id);	/* before RTS: a first contact's */
	ret = rs_qp_ready(rs, id);
	if (ret)
		rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
	else
		ret = rdma_accept(id, NULL);	/* the RTU (rejects on failure) */
	if (ret) {
		rs_conn_fail(rs, ret == -ENOMEM ? ENOMEM : ECONNRESET);
		return;
	}
	rs_established(rs, id);
}

/*
 * The passive side's RTU. Its QP waited in RTR since the REP: it takes
 * the peer's packets and acknowledges them, but sends nothing: the first
 * send is the rings' REG_MR (rs_post_regs()), here after the move, and
 * rs_push_locked() posts nothing before our SETUP, which follows it (the
 * peer may already be established and, say, CANCEL an ADVERT). A first contact
 * takes its ack timeout from the REP to RTU time now (rs_ack_handshake()),
 * as the active side takes its own from the REQ to REP time.
 */
static void rs_child_rtu(struct rs_sock *rs, struct rdma_cm_id *id)
{
	rs_ack_handshake(rs, id);
	if (rs_qp_move(rs, id, IB_QPS_RTS)) {
		rs_conn_fail(rs, ECONNRESET);
		return;
	}
	rs_established(rs, id);
}

/*
 * What an accepted socket inherits from its listener, as sk_clone_lock()
 * gives TCP's: owner (until accept() grafts the acceptor's; the child's
 * transport stays charged to this one, rs_limit.c), buffers, timeouts,
 * linger, keepalive, low-water mark, v6only and the LSM label. RDMA
 * children and TCP ones (rs_fallback.c).
 */
void rs_sk_inherit(struct sock *sk, const struct sock *lsk)
{
	security_sk_clone(lsk, sk);
	WRITE_ONCE(sk->sk_uid, READ_ONCE(lsk->sk_uid));
	sk->sk_rcvbuf = lsk->sk_rcvbuf;
	sk->sk_sndbuf = lsk->sk_sndbuf;
	sk->sk_rcvtimeo = lsk->sk_rcvtimeo;
	sk->sk_sndtimeo = lsk->sk_sndtimeo;
	sk->sk_lingertime = lsk->sk_lingertime;
	WRITE_ONCE(sk->sk_rcvlowat, READ_ONCE(lsk->sk_rcvlowat));
	if (sock_flag(lsk, SOCK_LINGER))
		sock_set_flag(sk, SOCK_LINGER);
	if (sock_flag(lsk, SOCK_KEEPOPEN))
		sock_set_flag(sk, SOCK_KEEPOPEN);
	sk->sk_ipv6only = lsk->sk_ipv6only;
}

static struct rs_sock *rs_child_alloc(struct rs_sock *lrs,
				      struct rdma_cm_id *id)
{
	struct sock *lsk = &lrs->sk;
	struct rs_sock *rs;
	struct sock *sk;

	sk = rs_sock_alloc(sock_net(lsk), lsk, NULL, 0);
	if (!sk)
		return NULL;
	rs_sk_inherit(sk, lsk);
	/* the listener's SO_RCVBUF/SO_SNDBUF end autotuning, as TCP's clone */
	sk->sk_userlocks |= lsk->sk_userlocks &
			    (SOCK_RCVBUF_LOCK | SOCK_SNDBUF_LOCK);
	rs = rs_sk(sk);
	rs->rcvbuf_ring = lrs->rcvbuf_ring;
	rs->v4mapped = lrs->v4mapped;
	rs->sndbuf_ring = lrs->sndbuf_ring;
	rs->nodelay = lrs->nodelay;
	rs->policy = READ_ONCE(lrs->policy);
	rs->dthresh = READ_ONCE(lrs->dthresh);
	if (lrs->memcg)
		css_get(&lrs->memcg->css);
	rs->memcg = lrs->memcg;		/* the listener's owner pays */
	rs_set_state(sk, TCP_SYN_RECV);
	rs->cm_id = id;
	id->context = rs;
	sock_hold(sk);			/* the cm id's reference */
	rs->parent = lrs;		/* lrs->pending counts it already */
	sock_hold(lsk);
	return rs;
}

/*
 * Refuse a REQ with a reason (wire-format.md); returns err, non-zero, so
 * that rdma_cm destroys id. The peer's connect() fails with ECONNREFUSED.
 */
static int rs_reject(struct rdma_cm_id *id, u8 reason, int err)
{
	struct rs_cm_rej rej = {
		.version = RS_PROTO_VERSION,
		.reason = reason,
	};

	rdma_reject(id, &rej, sizeof(rej), IB_CM_REJ_CONSUMER_DEFINED);
	return err;
}

/*
 * May the listener take one more connection? Half-open and established
 * but unaccepted children together stay below the backlog (at least one,
 * as listen(fd, 0) must admit one), so neither a connect storm nor peers
 * that never finish their handshake get more; and the connection's ring
 * bytes must fit under mem_max. Cheap: nothing is allocated before this.
 * Returns 0 and counts the child in lrs->pending, or the reject reason.
 */
static int rs_admit(struct rs_sock *lrs, unsigned long bytes)
{
	struct sock *lsk = &lrs->sk;
	u32 max = max_t(u32, READ_ONCE(lsk->sk_max_ack_backlog), 1);
	int reason = 0;

	spin_lock_bh(&lrs->lock);
	if (lsk->sk_state != TCP_LISTEN)
		reason = RS_REJ_NOT_LISTENING;
	else if (lrs->pending + READ_ONCE(lsk->sk_ack_backlog) >= max)
		reason = RS_REJ_BACKLOG;
	else if (!rs_mem_charge(bytes))
		reason = RS_REJ_NOBUFS;
	else
		lrs->pending++;
	spin_unlock_bh(&lrs->lock);
	return reason;
}

static void rs_admit_undo(struct rs_sock *lrs, unsigned long bytes)
{
	spin_lock_bh(&lrs->lock);
	lrs->pending--;
	spin_unlock_bh(&lrs->lock);
	rs_mem_uncharge(bytes);
}

/* Build the child's transport and accept; on failure undo all of it. */
static int rs_child_accept(struct rs_sock *rs, struct rdma_cm_id *id,
			   int req_retry)
{
	struct rdma_conn_param cp;
	struct rs_cm_pdata p;
	int ret;

	mutex_lock(&rs->tlock);
	ret = rs_transport_create(rs, id);
	if (!ret) {
		rs_pdata_fill(&p, rs);
		/* only to a peer that offered it: an older one refuses flags */
		if (!rs->peer_ring)
			p.flags &= ~RS_CM_F_RING;
		if (!rs->peer_shrink)
			p.flags &= ~RS_CM_F_SHRINK;
		if (!rs->peer_wseq)
			p.flags &= ~RS_CM_F_WSEQ;
		rs_ack_choose(rs, id, req_retry);
		rs_conn_param(&cp, &p, rs);
		/* RTR before the REP, RTS at the RTU (rs_child_rtu()) */
		ret = rs_qp_rtr(rs, id);
		rs->req_ns = ktime_get_ns();
		if (!ret)
			ret = rdma_accept(id, &cp);
	}
	if (ret) {
		/* rdma_cm destroys id when we return non-zero */
		spin_lock_bh(&rs->lock);
		rs->dead = true;
		rs->torn = true;
		rs->cm_id = NULL;
		spin_unlock_bh(&rs->lock);
		rs_transport_destroy(rs, id);
		rs_child_unlink(rs);
	}
	mutex_unlock(&rs->tlock);
	return ret;
}

/*
 * CONNECT_REQUEST on a listener: returning non-zero rejects and frees id.
 * Runs on rdma_cm's work queue with the new id's handler mutex held; the
 * listener is only looked at under its rs->lock.
 */
static int rs_conn_request(struct rs_sock *lrs, struct rdma_cm_id *id,
			   struct rdma_cm_event *ev)
{
	unsigned long bytes;
	struct rs_sock *rs;
	int ret;

	if (!rs_pdata_ok(ev->param.conn.private_data,
			 ev->param.conn.private_data_len) ||
	    !rs_retries_ok(&ev->param.conn))
		return rs_reject(id, RS_REJ_VERSION, -EPROTO);
	bytes = rs_ring_bytes(lrs, id->device);
	ret = rs_admit(lrs, bytes);
	if (ret)
		return rs_reject(id, ret, -ECONNREFUSED);
	rs = rs_child_alloc(lrs, id);
	if (!rs) {
		rs_admit_undo(lrs, bytes);
		return rs_reject(id, RS_REJ_ERROR, -ENOMEM);
	}
	rs->mem = bytes;		/* the child owns the reservation now */
	rs_pdata_peer(rs, ev->param.conn.private_data);
	ret = rs_child_accept(rs, id, ev->param.conn.retry_count);
	if (ret) {
		sock_put(&rs->sk);	/* the cm id's reference */
		/* ENOBUFS: the listener's owner or netns is at its cap */
		return rs_reject(id, ret == -ENOBUFS ? RS_REJ_NOBUFS :
				 RS_REJ_ERROR, ret);
	}
	return 0;
}

/*
 * The device is going away: free everything on it now, from this handler,
 * and have rdma_cm destroy the id by returning non-zero. If a teardown is
 * already under way it owns the id and will destroy it. Never lock_sock():
 * a system call may be blocked in a user copy holding it (the rings'
 * pages it copies stay until the socket is freed).
 */
static int rs_device_removal(struct rs_sock *rs, struct rdma_cm_id *id)
{
	struct sock *sk = &rs->sk;

	mutex_lock(&rs->tlock);
	spin_lock_bh(&rs->lock);
	if (rs->torn || rs->cm_id != id) {
		spin_unlock_bh(&rs->lock);
		mutex_unlock(&rs->tlock);
		return 0;
	}
	rs->torn = true;
	rs->dead = true;
	WRITE_ONCE(sk->sk_err, ENETDOWN);
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	rs_set_state(sk, TCP_CLOSE);
	spin_unlock_bh(&rs->lock);
	rs_transport_destroy(rs, id);
	spin_lock_bh(&rs->lock);
	rs->cm_id = NULL;
	spin_unlock_bh(&rs->lock);
	rs_child_unlink(rs);
	mutex_unlock(&rs->tlock);
	/* nothing left for a closed socket's orphan timer to abort */
	if (cancel_delayed_work(&rs->orphan_work))
		sock_put(sk);
	rs_orphan_done(rs);
	sk->sk_state_change(sk);
	sk_error_report(sk);
	sock_put(sk);			/* the cm id's reference */
	return 1;
}

static void rs_cm_event(struct rs_sock *rs, struct rdma_cm_id *id,
			struct rdma_cm_event *ev)
{
	struct sock *sk = &rs->sk;
	int ret;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rdma_resolve_route(id, RS_RESOLVE_MS);
		if (ret)
			rs_conn_fail(rs, -rs_addr_errno(ret));
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		rs_route_resolved(rs, id);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		if (!rs->parent && sk->sk_state == TCP_SYN_SENT)
			rs_connect_response(rs, id, ev);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		/* the passive side's RTU (or first packet, COMM_EST) */
		if (rs->parent && sk->sk_state == TCP_SYN_RECV)
			rs_child_rtu(rs, id);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		if (!rs_fb_cm_fail(rs, ev, 0))
			rs_conn_fail(rs, -rs_addr_errno(ev->status));
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		if (!rs_fb_cm_fail(rs, ev, 0))
			rs_conn_fail(rs, ev->status == -ETIMEDOUT ? ETIMEDOUT :
				     EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (!rs_fb_cm_fail(rs, ev, 0))
			rs_conn_fail(rs, ECONNREFUSED);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		rs_conn_fail(rs, ECONNREFUSED);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (sk->sk_state == TCP_SYN_SENT ||
		    sk->sk_state == TCP_SYN_RECV) {
			rs_conn_fail(rs, ECONNRESET);
			break;
		}
		/* the drain decides between end of stream and reset */
		spin_lock_bh(&rs->lock);
		rs_schedule_teardown(rs);
		spin_unlock_bh(&rs->lock);
		break;
	default:
		break;
	}
}

/* Is id still rs's own, and rs not being torn down? */
static bool rs_cm_owns(struct rs_sock *rs, struct rdma_cm_id *id)
{
	bool ret;

	spin_lock_bh(&rs->lock);
	ret = !rs->torn && rs->cm_id == id;
	spin_unlock_bh(&rs->lock);
	return ret;
}

int rs_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct rs_sock *rs = id->context;
	struct sock *sk = &rs->sk;

	trace_rdmastream_cm_event(sk, ev);
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		return rs_conn_request(rs, id, ev);
	if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
		return rs_device_removal(rs, id);
	sock_hold(sk);
	mutex_lock(&rs->tlock);
	if (rs_cm_owns(rs, id))
		rs_cm_event(rs, id, ev);
	mutex_unlock(&rs->tlock);
	sock_put(sk);
	return 0;
}
