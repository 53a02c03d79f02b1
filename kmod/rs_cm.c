// SPDX-License-Identifier: GPL-2.0
/*
 * Connection management through rdma_cm.
 *
 * Active side: connect() resolves the address; the handler resolves the
 * route, builds the transport and sends a REQ; ESTABLISHED completes
 * connect(). Passive side: a CONNECT_REQUEST on the listener's id creates
 * a child socket with its transport and accepts; the child joins the
 * listener's accept queue when it is ESTABLISHED.
 *
 * Every cm id holds a reference on its socket (dropped by rs_cm_put_id()
 * after rdma_destroy_id(), or when the handler returns non-zero so that
 * rdma_cm destroys the id itself).
 */
#include "rs.h"

int rs_cm_create_id(struct rs_sock *rs)
{
	struct sock *sk = &rs->sk;
	struct rdma_cm_id *id;

	id = rdma_create_id(sock_net(sk), rs_cm_handler, rs, RDMA_PS_TCP,
			    IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	sock_hold(sk);
	rs->cm_id = id;
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
	p->ring_size = cpu_to_be32(rs->rx.size);
}

static bool rs_pdata_ok(const void *data, u8 len)
{
	const struct rs_cm_pdata *p = data;

	/* flags: none defined yet; a peer that sets one is not our kind */
	return data && len >= sizeof(*p) && p->version == RS_PROTO_VERSION &&
	       !p->flags && be16_to_cpu(p->recv_slots) == RS_RQ_DEPTH;
}

/*
 * Transport retries: 6, because 7 means "retry forever" to some HCAs (rxe
 * among them) and a dead peer must surface as an error; with the ack
 * timeout below (4.096 us << 18, about 1 s) that takes about 7 s.
 * Receiver-not-ready retries: 6 as well. An honest peer never sends RNR
 * (credits), and 7 would again mean forever: a peer that stops posting
 * receives could hold our sends, and the user pages a zero-copy send has
 * pinned, for ever. With 6, the QP fails after at most 7 RNR waits of the
 * peer's choosing (at most 655 ms each by the IB spec).
 */
#define RS_RETRY_COUNT	6
#define RS_RNR_RETRY	6
#define RS_ACK_TIMEOUT	18

/*
 * The IB CM lets the peer choose our retry counts: the passive side's QP
 * takes both counts from the REQ, the active side's RNR count comes from
 * the REP. A peer asking for 7 ("forever") could stall our sends, and
 * pin user pages, for ever: refuse it (our own ends always ask for 6).
 */
static bool rs_retries_ok(const struct rdma_conn_param *cp, bool req)
{
	return cp->rnr_retry_count < 7 && (!req || cp->retry_count < 7);
}

static void rs_conn_param(struct rdma_conn_param *cp, struct rs_cm_pdata *p,
			  struct rdma_cm_id *id)
{
	memset(cp, 0, sizeof(*cp));
	cp->private_data = p;
	cp->private_data_len = sizeof(*p);
	cp->retry_count = RS_RETRY_COUNT;
	cp->rnr_retry_count = RS_RNR_RETRY;
	rdma_set_ack_timeout(id, RS_ACK_TIMEOUT);
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
 * lock_sock() and a reference that outlives this call.
 */
void rs_conn_fail(struct rs_sock *rs, int err)
{
	struct sock *sk = &rs->sk;

	spin_lock_bh(&rs->lock);
	WRITE_ONCE(sk->sk_err, err);
	rs_set_state(sk, TCP_CLOSE);
	rs_schedule_teardown(rs);
	spin_unlock_bh(&rs->lock);
	sk->sk_state_change(sk);
	sk_error_report(sk);
	rs_child_unlink(rs);
}

/* The errno connect() reports for a failed resolution (negative). */
static int rs_addr_errno(int status)
{
	switch (status) {
	case -ETIMEDOUT:
	case -ENETUNREACH:
		return status;
	default:
		return -EHOSTUNREACH;
	}
}

static void rs_route_resolved(struct rs_sock *rs, struct rdma_cm_id *id)
{
	struct rdma_conn_param cp;
	struct rs_cm_pdata p;
	int ret;

	ret = rs_transport_create(rs, id);
	if (!ret) {
		rs_pdata_fill(&p, rs);
		rs_conn_param(&cp, &p, id);
		ret = rdma_connect_locked(id, &cp);
	}
	if (ret)
		rs_conn_fail(rs, ret == -ENOMEM || ret == -EPROTONOSUPPORT ?
			     -ret : EHOSTUNREACH);
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

static void rs_established(struct rs_sock *rs, struct rdma_cm_id *id,
			   struct rdma_cm_event *ev)
{
	struct sock *sk = &rs->sk;
	int err;

	if (!rs->parent && (!rs_pdata_ok(ev->param.conn.private_data,
					 ev->param.conn.private_data_len) ||
			    !rs_retries_ok(&ev->param.conn, false))) {
		rs_conn_fail(rs, EPROTO);
		return;
	}
	rs_save_names(rs, id);
	rs->established = true;
	rs_set_state(sk, TCP_ESTABLISHED);
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

static struct rs_sock *rs_child_alloc(struct rs_sock *lrs,
				      struct rdma_cm_id *id)
{
	struct sock *lsk = &lrs->sk;
	struct rs_sock *rs;
	struct sock *sk;

	sk = rs_sock_alloc(sock_net(lsk), NULL, 0, GFP_KERNEL);
	if (!sk)
		return NULL;
	rs = rs_sk(sk);
	rs->rcvbuf_ring = lrs->rcvbuf_ring;
	rs->sndbuf_ring = lrs->sndbuf_ring;
	sk->sk_rcvbuf = lsk->sk_rcvbuf;
	sk->sk_sndbuf = lsk->sk_sndbuf;
	/* what sk_clone_lock() copies for TCP and applies to us */
	sk->sk_rcvtimeo = lsk->sk_rcvtimeo;
	sk->sk_sndtimeo = lsk->sk_sndtimeo;
	sk->sk_lingertime = lsk->sk_lingertime;
	WRITE_ONCE(sk->sk_rcvlowat, READ_ONCE(lsk->sk_rcvlowat));
	if (sock_flag(lsk, SOCK_LINGER))
		sock_set_flag(sk, SOCK_LINGER);
	rs->nodelay = lrs->nodelay;
	rs->policy = READ_ONCE(lrs->policy);
	rs->dthresh = READ_ONCE(lrs->dthresh);
	if (sock_flag(lsk, SOCK_KEEPOPEN))
		sock_set_flag(sk, SOCK_KEEPOPEN);
	rs_set_state(sk, TCP_SYN_RECV);
	rs->cm_id = id;
	id->context = rs;
	sock_hold(sk);			/* the cm id's reference */
	rs->parent = lrs;
	sock_hold(lsk);
	spin_lock_bh(&lrs->lock);
	lrs->pending++;
	spin_unlock_bh(&lrs->lock);
	return rs;
}

/* CONNECT_REQUEST on a listener: returning non-zero rejects and frees id. */
static int rs_conn_request(struct rs_sock *lrs, struct rdma_cm_id *id,
			   struct rdma_cm_event *ev)
{
	struct sock *lsk = &lrs->sk;
	struct rdma_conn_param cp;
	struct rs_cm_pdata p;
	struct rs_sock *rs;
	int ret;

	if (!rs_pdata_ok(ev->param.conn.private_data,
			 ev->param.conn.private_data_len) ||
	    !rs_retries_ok(&ev->param.conn, true))
		return -EPROTO;
	lock_sock(lsk);
	if (lsk->sk_state != TCP_LISTEN ||
	    lrs->pending + READ_ONCE(lsk->sk_ack_backlog) >
	    READ_ONCE(lsk->sk_max_ack_backlog)) {
		release_sock(lsk);
		return -ECONNREFUSED;
	}
	rs = rs_child_alloc(lrs, id);
	release_sock(lsk);
	if (!rs)
		return -ENOMEM;

	lock_sock(&rs->sk);
	ret = rs_transport_create(rs, id);
	if (!ret) {
		rs_pdata_fill(&p, rs);
		rs_conn_param(&cp, &p, id);
		ret = rdma_accept(id, &cp);
	}
	if (ret) {
		/* rdma_cm destroys id when we return non-zero */
		spin_lock_bh(&rs->lock);
		rs->dead = true;
		rs->torn = true;
		spin_unlock_bh(&rs->lock);
		rs_transport_destroy(rs, id);
		rs->cm_id = NULL;
		release_sock(&rs->sk);
		rs_child_unlink(rs);
		sock_put(&rs->sk);	/* the cm id's reference */
		return ret;
	}
	release_sock(&rs->sk);
	return 0;
}

/*
 * The device is going away: free everything on it now, from this handler,
 * and have rdma_cm destroy the id by returning non-zero. If a teardown is
 * already under way it owns the id and will destroy it.
 */
static int rs_device_removal(struct rs_sock *rs, struct rdma_cm_id *id)
{
	struct sock *sk = &rs->sk;

	lock_sock(sk);
	spin_lock_bh(&rs->lock);
	if (rs->torn || rs->cm_id != id) {
		spin_unlock_bh(&rs->lock);
		release_sock(sk);
		return 0;
	}
	rs->torn = true;
	rs->dead = true;
	WRITE_ONCE(sk->sk_err, ENETDOWN);
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	rs_set_state(sk, TCP_CLOSE);
	spin_unlock_bh(&rs->lock);
	rs_transport_destroy(rs, id);
	rs->cm_id = NULL;
	release_sock(sk);
	/* nothing left for a closed socket's orphan timer to abort */
	if (cancel_delayed_work(&rs->orphan_work))
		sock_put(sk);
	sk->sk_state_change(sk);
	sk_error_report(sk);
	if (rs->parent) {
		lock_sock(sk);
		rs_child_unlink(rs);
		release_sock(sk);
	}
	sock_put(sk);			/* the cm id's reference */
	return 1;
}

static void rs_cm_event(struct rs_sock *rs, struct rdma_cm_id *id,
			struct rdma_cm_event *ev)
{
	struct sock *sk = &rs->sk;
	int ret;

	if (rs->torn || rs->cm_id != id)
		return;
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rdma_resolve_route(id, RS_RESOLVE_MS);
		if (ret)
			rs_conn_fail(rs, -rs_addr_errno(ret));
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		rs_route_resolved(rs, id);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		rs_established(rs, id, ev);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		rs_conn_fail(rs, -rs_addr_errno(ev->status));
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		rs_conn_fail(rs, ev->status == -ETIMEDOUT ? ETIMEDOUT :
			     EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_REJECTED:
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
	lock_sock(sk);
	rs_cm_event(rs, id, ev);
	release_sock(sk);
	sock_put(sk);
	return 0;
}
