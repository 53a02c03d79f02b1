// SPDX-License-Identifier: GPL-2.0
/*
 * Shutdown, close and teardown.
 *
 * A graceful close queues a FIN behind all data and leaves the connection
 * to finish on its own (the socket is orphaned, as TCP does): once the FIN
 * has completed, the peer holds every byte, and rs_teardown_work()
 * disconnects and frees the transport. Closing with unread data, an
 * orphan that cannot finish within RS_ORPHAN_TIMEOUT, a transport error or
 * the peer's disconnect abort the connection instead.
 */
#include "rs.h"

static void rs_close_listener(struct rs_sock *rs);

void rs_schedule_teardown(struct rs_sock *rs)
{
	rs->dead = true;
	if (rs->torn)
		return;
	rs->torn = true;
	sock_hold(&rs->sk);
	queue_work(rs_wq, &rs->teardown_work);
}

/* Fail the connection with err (positive errno); rs->lock is held. */
void rs_abort_locked(struct rs_sock *rs, int err)
{
	struct sock *sk = &rs->sk;

	if (rs->dead)
		return;
	trace_rdmastream_abort(sk, err, __builtin_return_address(0));
	if (rs->established)
		rs_stat_inc(sk, RS_EV_ABORTS);
	WRITE_ONCE(sk->sk_err, err);
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	rs_set_state(sk, TCP_CLOSE);
	rs_schedule_teardown(rs);
	sk_error_report(sk);
}

/*
 * A work request failed; rs->lock is held. Flushes during teardown are
 * expected; outside it they mean the QP failed. During setup the CM event
 * that follows reports why, so only an established connection is reset.
 */
void rs_wc_error_locked(struct rs_sock *rs, const struct ib_wc *wc)
{
	if (wc->status != IB_WC_WR_FLUSH_ERR || !rs->dead) {
		trace_rdmastream_wc_error(&rs->sk, wc);
		rs->stats.errors++;
	}
	if (rs->established)
		rs_abort_locked(rs, wc->status == IB_WC_RETRY_EXC_ERR ?
				ETIMEDOUT : ECONNRESET);
}

/* A closed socket whose FIN has reached the peer is done. */
void rs_maybe_finish_locked(struct rs_sock *rs)
{
	if (sock_flag(&rs->sk, SOCK_DEAD) && (rs->fin_done || rs->dead))
		rs_schedule_teardown(rs);
}

void rs_orphan_work(struct work_struct *work)
{
	struct rs_sock *rs = container_of(to_delayed_work(work),
					  struct rs_sock, orphan_work);

	spin_lock_bh(&rs->lock);
	rs_abort_locked(rs, ETIMEDOUT);
	spin_unlock_bh(&rs->lock);
	sock_put(&rs->sk);
}

/* After the drain: how the stream ended as seen by the application. */
static void rs_teardown_state(struct rs_sock *rs)
{
	struct sock *sk = &rs->sk;

	spin_lock_bh(&rs->lock);
	rs->settled = true;
	if (rs->fb_pending) {
		/* abandoned for TCP: rs_fb_after_teardown() goes on */
		spin_unlock_bh(&rs->lock);
		return;
	}
	if (rs->fin_rcvd && !sk->sk_err && !sock_flag(sk, SOCK_DEAD) &&
	    sk->sk_state == TCP_CLOSE_WAIT) {
		/* a clean close by the peer: CLOSE_WAIT until we close too */
		spin_unlock_bh(&rs->lock);
		sk->sk_state_change(sk);
		return;
	}
	if (!rs->fin_rcvd && !sk->sk_err && !sock_flag(sk, SOCK_DEAD) &&
	    sk->sk_state != TCP_CLOSE)
		WRITE_ONCE(sk->sk_err, ECONNRESET);
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	rs_set_state(sk, TCP_CLOSE);
	spin_unlock_bh(&rs->lock);
	sk->sk_state_change(sk);
	if (sk->sk_err)
		sk_error_report(sk);
}

/* A lingering orphan is done (torn down or freed): uncount it. */
void rs_orphan_done(struct rs_sock *rs)
{
	bool was;

	spin_lock_bh(&rs->lock);
	was = rs->orphan;
	rs->orphan = false;
	spin_unlock_bh(&rs->lock);
	if (was)
		atomic_dec(&rs_orphans);
}

/*
 * Never lock_sock(): a system call may hold it for ever (a user copy
 * blocked on userfaultfd), and device removal waits for this work to
 * destroy the id.
 */
void rs_teardown_work(struct work_struct *work)
{
	struct rs_sock *rs = container_of(work, struct rs_sock, teardown_work);
	struct sock *sk = &rs->sk;
	struct rdma_cm_id *id;

	if (cancel_delayed_work(&rs->orphan_work))
		sock_put(sk);
	mutex_lock(&rs->tlock);
	if (rs->transport) {
		if (rs->cm_id) {
			rs_qp_error(rs);
			rdma_disconnect(rs->cm_id);
		}
		rs_transport_destroy(rs, rs->cm_id);
	}
	rs_teardown_state(rs);
	trace_rdmastream_teardown(sk, rs->fin_rcvd, rs->fin_done);
	spin_lock_bh(&rs->lock);
	id = rs->cm_id;
	rs->cm_id = NULL;
	spin_unlock_bh(&rs->lock);
	/* a child that failed before ESTABLISHED leaves its listener now */
	rs_child_unlink(rs);
	mutex_unlock(&rs->tlock);
	rs_orphan_done(rs);
	if (id)
		rs_cm_put_id(rs, id);
	rs_fb_after_teardown(rs);
	sock_put(sk);
}

int rs_shutdown(struct socket *sock, int how)
{
	struct sock *sk = sock->sk;
	struct rs_sock *rs = rs_sk(sk);
	int err = 0;

	how++;		/* SHUT_RD/WR/RDWR to RCV_/SEND_SHUTDOWN bits */
	if (how <= 0 || how > SHUTDOWN_MASK)
		return -EINVAL;
	lock_sock(sk);
	if (sk->sk_state == TCP_LISTEN) {
		/* as TCP: SHUT_RD stops listening and wakes accept() */
		if (how & RCV_SHUTDOWN)
			rs_close_listener(rs);
		goto out;
	}
	if (sk->sk_state == TCP_CLOSE || sk->sk_state == TCP_SYN_SENT ||
	    !rs->flow.rx_size) {
		err = -ENOTCONN;
		goto out;
	}
	spin_lock_bh(&rs->lock);
	WRITE_ONCE(sk->sk_shutdown, sk->sk_shutdown | how);
	if (how & SEND_SHUTDOWN) {
		rs->flow.fin_wanted = true;
		rs_push_locked(rs);
	}
	spin_unlock_bh(&rs->lock);
out:
	sk->sk_state_change(sk);
	release_sock(sk);
	return err;
}

/*
 * Beyond max_orphans lingering closed sockets, as TCP does beyond
 * tcp_max_orphans: one closed with data the peer does not have yet is
 * reset instead of joining them. rs->lock is held.
 */
static bool rs_too_many_orphans(struct rs_sock *rs)
{
	if (rs->flow.tx_head == rs->flow.tx_done ||
	    atomic_read(&rs_orphans) < READ_ONCE(rs_max_orphans))
		return false;
	net_info_ratelimited("rdmastream: too many orphaned sockets\n");
	return true;
}

/*
 * Close a connection: FIN after the data, or abort if data is unread, if
 * asked to (a listener's unaccepted children), with SO_LINGER of 0, or
 * when too many closed sockets linger already. Under tlock.
 */
static void rs_close_conn(struct rs_sock *rs, bool abort)
{
	struct sock *sk = &rs->sk;

	if ((sock_flag(sk, SOCK_LINGER) && !sk->sk_lingertime) ||
	    sk->sk_state == TCP_SYN_SENT)
		abort = true;
	spin_lock_bh(&rs->lock);
	sock_set_flag(sk, SOCK_DEAD);
	if (abort || rs_flow_rx_avail(&rs->flow) || !rs->transport ||
	    rs_too_many_orphans(rs)) {
		/* no-op once the transport is gone: then it is dead already */
		rs_abort_locked(rs, ECONNRESET);
	} else {
		rs->flow.fin_wanted = true;
		WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
		rs_push_locked(rs);
		rs_maybe_finish_locked(rs);
		if (!rs->torn) {
			rs->orphan = true;
			atomic_inc(&rs_orphans);
			sock_hold(sk);
			if (!queue_delayed_work(rs_wq, &rs->orphan_work,
						RS_ORPHAN_TIMEOUT))
				sock_put(sk);
		}
	}
	spin_unlock_bh(&rs->lock);
}

static bool rs_linger_done(struct rs_sock *rs)
{
	return READ_ONCE(rs->fin_done) || READ_ONCE(rs->dead);
}

/* SO_LINGER with a timeout: close() waits until the peer has every byte. */
static void rs_linger(struct rs_sock *rs)
{
	struct sock *sk = &rs->sk;
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	long timeo = sk->sk_lingertime;

	if (!sock_flag(sk, SOCK_LINGER) || !timeo)
		return;
	add_wait_queue(sk_sleep(sk), &wait);
	while (!rs_linger_done(rs) && timeo && !signal_pending(current))
		sk_wait_event(sk, &timeo, rs_linger_done(rs), &wait);
	remove_wait_queue(sk_sleep(sk), &wait);
}

int rs_release(struct socket *sock)
{
	struct sock *sk = sock->sk;
	struct rs_sock *rs;
	struct rdma_cm_id *id = NULL;
	bool linger;

	if (!sk)
		return 0;
	rs = rs_sk(sk);
	rs_fb_release(rs);
	lock_sock(sk);
	if (rs->listener) {
		rs_close_listener(rs);
	} else {
		/* tlock: the handler is not half way through building it */
		mutex_lock(&rs->tlock);
		linger = rs->transport || rs->torn;
		if (linger) {
			rs_close_conn(rs, false);
		} else {
			/* never connected: only an id to drop, if any */
			spin_lock_bh(&rs->lock);
			id = rs->cm_id;
			rs->cm_id = NULL;
			spin_unlock_bh(&rs->lock);
		}
		mutex_unlock(&rs->tlock);
		if (linger)
			rs_linger(rs);
	}
	rs_set_state(sk, TCP_CLOSE);
	sock_orphan(sk);
	sock->sk = NULL;
	release_sock(sk);
	if (id)
		rs_cm_put_id(rs, id);
	sock_put(sk);
	return 0;
}

/* Stop listening: drop the id, then every child not yet accepted. */
static void rs_close_listener(struct rs_sock *rs)
{
	struct sock *sk = &rs->sk;
	struct rs_sock *child, *tmp;
	struct rdma_cm_id *id;
	LIST_HEAD(children);

	rs_fb_stop_listen(rs);
	mutex_lock(&rs->tlock);
	spin_lock_bh(&rs->lock);
	id = rs->cm_id;
	rs->cm_id = NULL;
	rs_set_state(sk, TCP_CLOSE);
	spin_unlock_bh(&rs->lock);
	mutex_unlock(&rs->tlock);
	release_sock(sk);
	/* after this no CONNECT_REQUEST handler runs for this listener */
	if (id)
		rs_cm_put_id(rs, id);
	lock_sock(sk);
	spin_lock_bh(&rs->lock);
	list_splice_init(&rs->accept_q, &children);
	spin_unlock_bh(&rs->lock);
	list_for_each_entry_safe(child, tmp, &children, accept_node) {
		list_del_init(&child->accept_node);
		sk_acceptq_removed(sk);
		lock_sock_nested(&child->sk, SINGLE_DEPTH_NESTING);
		mutex_lock(&child->tlock);
		rs_close_conn(child, true);
		rs_set_state(&child->sk, TCP_CLOSE);
		mutex_unlock(&child->tlock);
		release_sock(&child->sk);
		sock_put(&child->sk);
	}
	rs->listener = false;
}
