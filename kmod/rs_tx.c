// SPDX-License-Identifier: GPL-2.0
/*
 * Sending: sendmsg copies into the send ring; rs_push_locked() turns queued
 * bytes into RDMA WRITE WITH IMMEDIATE work requests into the peer's stream
 * buffer as far as window, credits and send queue allow. Push runs from
 * sendmsg and from every completion that opens one of those limits.
 */
#include <linux/uio.h>

#include "rs.h"
#include "../uapi/linux/rdmastream.h"

#define RS_COPY_CHUNK	(64U << 10)	/* copy, then push, this much */

u32 rs_sq_free(const struct rs_sock *rs)
{
	return RS_SQ_DEPTH - (u32)(rs->sq_posted - rs->sq_done);
}

/*
 * The watchdog (rs_wedged_locked()) measures how long a signalled work
 * request has waited for a send completion. A post while none is awaited
 * starts that clock again: the last completion may be long past.
 */
static void rs_sq_clock_locked(struct rs_sock *rs)
{
	if (rs->sq_done > rs->sq_signaled)
		rs->sq_progress = jiffies;
}

/*
 * Post one work request from the next send slot. Every WR carries a cqe,
 * signalled or not, because a flushed WR completes either way.
 */
int rs_post_slot(struct rs_sock *rs, struct ib_send_wr *wr, bool signal,
		 bool fin)
{
	struct rs_send *s = &rs->sends[rs->sq_posted % RS_SQ_DEPTH];
	bool sample = rs_rtt_want_locked(rs, wr);
	int ret;

	rs_sq_clock_locked(rs);
	if (rs->sq_posted - rs->sq_signaled >= RS_SIGNAL_EVERY || sample)
		signal = true;
	s->seq = rs->sq_posted;
	s->tx_end = rs->flow.tx_sent;
	s->fin = fin;
	s->post_ns = sample ? ktime_get_ns() : 0;
	s->wait = NULL;
	wr->wr_cqe = &s->cqe;
	if (signal) {
		wr->send_flags |= IB_SEND_SIGNALED;
		rs->sq_signaled = rs->sq_posted;
	}
	ret = ib_post_send(rs->qp, wr, NULL);
	if (ret)
		return ret;
	rs->sq_posted++;
	/* signalled or not: rs_probe_timer() sees that it completes */
	rs_probe_arm_locked(rs, RS_PROBE_INTERVAL);
	return 0;
}

/*
 * Fault injection for tests (module parameter inject_post, 0644): a value
 * of kind * 100 + pos makes the next chain of that kind fail at position
 * pos (1-based; 99: the last) as a device would: the work requests before
 * it are posted, the rest are not, and bad_wr points at the first one
 * left out.
 */
static int rs_post_send(struct rs_sock *rs, struct ib_send_wr *first,
			const struct ib_send_wr **bad, enum rs_chain kind)
{
	int want = READ_ONCE(rs_inject_post);
	struct ib_send_wr *wr, *prev = NULL;
	int pos = 1, ret;

	if (likely(want <= 0) || want / 100 != kind)
		return ib_post_send(rs->qp, first, bad);
	for (wr = first; wr && pos < want % 100; wr = wr->next, pos++) {
		if (want % 100 == 99 && !wr->next)
			break;
		prev = wr;
	}
	if (!wr || cmpxchg(&rs_inject_post, want, 0) != want)
		return ib_post_send(rs->qp, first, bad);
	ret = 0;
	if (prev) {
		prev->next = NULL;
		ret = ib_post_send(rs->qp, first, bad);
		prev->next = wr;
	}
	if (!ret)
		*bad = wr;
	return -EIO;
}

/*
 * Post a chain of work requests with one doorbell, each in the next send
 * slot. The last is signalled when wait is given (its completion, or its
 * flush, sets wait->done) or when the periodic signalling asks for it.
 *
 * If the device refuses part of the chain, the part before bad_wr is on
 * the QP and may still run: the connection is fenced (aborted, so the
 * teardown moves the QP to error and drains it) and the caller must leave
 * every buffer the chain names to the fence. Returns 0 or -EIO.
 */
int rs_post_chain(struct rs_sock *rs, struct ib_send_wr *first,
		  struct rs_wait *wait, enum rs_chain kind)
{
	const struct ib_send_wr *bad = first;
	struct ib_send_wr *wr;
	u64 seq = rs->sq_posted;
	int ret;

	rs_sq_clock_locked(rs);
	for (wr = first; wr; wr = wr->next, seq++) {
		struct rs_send *s = &rs->sends[seq % RS_SQ_DEPTH];

		s->seq = seq;
		s->tx_end = rs->flow.tx_sent;
		s->fin = false;
		s->post_ns = 0;
		s->wait = NULL;
		wr->wr_cqe = &s->cqe;
		if (seq - rs->sq_signaled >= RS_SIGNAL_EVERY ||
		    (!wr->next && wait)) {
			wr->send_flags |= IB_SEND_SIGNALED;
			rs->sq_signaled = seq;
		}
		if (!wr->next && wait) {
			wait->done = false;
			s->wait = wait;
		}
	}
	ret = rs_post_send(rs, first, &bad, kind);
	if (!ret) {
		rs->sq_posted = seq;
		rs_probe_arm_locked(rs, RS_PROBE_INTERVAL);
		return 0;
	}
	/* what went out completes (or flushes) in its slots as usual */
	for (wr = first; wr && wr != bad; wr = wr->next)
		rs->sq_posted++;
	if (wait && wr) {
		/* the signalled last one never went: nobody will set done */
		rs->sends[(seq - 1) % RS_SQ_DEPTH].wait = NULL;
	}
	trace_rdmastream_post_fail(&rs->sk, kind, ret);
	rs_abort_locked(rs, ECONNRESET);
	return -EIO;
}

/*
 * The gather list of len bytes at off in the send ring: a piece per MR
 * segment it touches (the ring's end is a segment's end too); inline
 * data, which the CPU copies, only splits at the ring's end. Two entries
 * at most: *len is cut to what they cover (only a device with very short
 * page lists makes segments smaller than a chunk).
 */
static int rs_tx_sges(const struct rs_ring *tx, u32 off, u32 *len, bool inl,
		      struct ib_sge *sge)
{
	u32 mask = inl ? tx->size - 1 : (1U << tx->seg_shift) - 1;
	u32 left = *len, in, piece;
	const struct ib_mr *mr;
	int n;

	for (n = 0; left && n < 2; n++) {
		in = off & mask;
		piece = min(left, mask + 1 - in);
		if (inl) {
			sge[n].addr = (uintptr_t)(tx->vaddr + off);
			sge[n].lkey = 0;
		} else {
			mr = tx->mr[off >> tx->seg_shift];
			sge[n].addr = mr->iova + in;
			sge[n].lkey = mr->lkey;
		}
		sge[n].length = piece;
		left -= piece;
		off = (off + piece) & (tx->size - 1);
	}
	*len -= left;
	return n;
}

static int rs_post_chunk(struct rs_sock *rs, const struct rs_chunk *chunk)
{
	struct rs_ring *tx = &rs->tx;
	struct rs_chunk cut = *chunk, *c = &cut;
	struct ib_sge sge[2];
	struct ib_rdma_wr wr = {};
	bool inl = c->len <= rs->max_inline;
	int n = rs_tx_sges(tx, c->local_off, &c->len, inl, sge);
	/* the last write of a batch is signalled so tx_done catches up */
	bool last = c->len == rs_flow_tx_unsent(&rs->flow), free_now;
	u32 credits;
	int err;

	/* the copy in is done: the HCA's from here (inline: the CPU reads) */
	if (!inl)
		rs_ring_sync(tx, c->local_off, c->len, false);
	credits = rs_flow_take_owed(&rs->flow);
	wr.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM;
	wr.wr.ex.imm_data =
		cpu_to_be32(rs_flow_imm(&rs->flow, c->len, credits));
	wr.wr.sg_list = sge;
	wr.wr.num_sge = n;
	wr.wr.send_flags = inl ? IB_SEND_INLINE : 0;
	wr.remote_addr = rs->peer_addr + c->remote_off;
	wr.rkey = rs->peer_rkey;

	rs_flow_chunk_sent(&rs->flow, c);
	/*
	 * Inline data is in the work request once it is posted: its ring
	 * space is free then (when all before it is), and the write needs
	 * no completion of its own. Not before the post: a writer in
	 * sendmsg() reads tx_done without rs->lock and would copy the next
	 * lap's bytes over the ones the post is still to copy.
	 */
	free_now = inl && rs->flow.tx_done == rs->flow.tx_sent - c->len;
	if (free_now)
		last = false;
	else if (rs_flow_capped(&rs->flow))
		last = true;	/* the budget's share: its completion frees room */
	err = rs_post_slot(rs, &wr.wr, !inl || last, false);
	if (!err && free_now)
		/* pairs with the acquire in rs_tx_space() */
		smp_store_release(&rs->flow.tx_done, rs->flow.tx_sent);
	rs_budget_update_locked(rs);
	if (err) {
		/* the QP is broken; the CM or a completion will report it */
		rs->flow.owed += credits;
		rs_abort_locked(rs, ECONNRESET);
		return -EIO;
	}
	rs->stats.writes++;
	if (inl)
		rs->stats.inline_writes++;
	return 0;
}

/*
 * The connection's share of the in-flight budget is used up (rs_budget.c):
 * the completion of a signalled work request posted after its last data
 * frees room and pushes again. If none is outstanding (the last chunk went
 * unsignalled: the share shrank since, as connections joined), a signalled
 * zero-length WRITE behind it brings that completion.
 */
static void rs_budget_stall_locked(struct rs_sock *rs)
{
	const struct rs_send *last = &rs->sends[rs->sq_signaled % RS_SQ_DEPTH];
	struct ib_rdma_wr wr = {};

	rs->stats.cap_stalls++;
	if ((rs->sq_done <= rs->sq_signaled &&
	     last->tx_end == rs->flow.tx_sent) ||
	    !rs->peer_ready || !rs_sq_free(rs))
		return;
	wr.wr.opcode = IB_WR_RDMA_WRITE;
	wr.remote_addr = rs->peer_addr;
	wr.rkey = rs->peer_rkey;
	if (rs_post_slot(rs, &wr.wr, true, false))
		rs_abort_locked(rs, ECONNRESET);
}

/* Post whatever may go now, as the protocol core decides. */
void rs_push_locked(struct rs_sock *rs)
{
	struct rs_chunk c;
	enum rs_tx_action act;

	/*
	 * Nothing goes before our SETUP, which follows the rings'
	 * registration: until then an accepted socket's QP may still be in
	 * RTR (rs_child_rtu()), where a post fails and would reset the
	 * connection. A CANCEL_ACK the peer asked for meanwhile goes right
	 * after the SETUP (rs_reg_done() pushes).
	 */
	if (!rs->transport || !rs->flow.setup_sent)
		return;
	rs->flow.tx_cap = rs_budget_cap(rs);
	while (!rs->dead && rs_sq_free(rs)) {
		if (rs->cancel_wanted || rs->cancel_ack_wanted) {
			enum rs_ctl_type t = rs->cancel_ack_wanted ?
				RS_MSG_CANCEL_ACK : RS_MSG_CANCEL;

			if (rs_ctrl_post_locked(rs, t))
				return;	/* credits come back with the peer's next */
			continue;
		}
		act = rs_flow_next(&rs->flow, &c);
		switch (act) {
		case RS_TX_DATA:
			if (rs_post_chunk(rs, &c))
				return;
			continue;
		case RS_TX_FIN:
		case RS_TX_ACK:
			/* the core checked credits: failing means the QP is dead */
			if (rs_ctrl_post_locked(rs, act == RS_TX_FIN ?
						RS_MSG_FIN : RS_MSG_ACK))
				return;
			continue;
		case RS_TX_RING:
			if (rs_ctrl_post_locked(rs, rs->flow.ring_ack_wanted ?
						RS_MSG_RING_ACK : RS_MSG_RING))
				return;
			continue;
		case RS_TX_STALL_CREDIT:
			rs->stats.credit_stalls++;
			rs_probe_arm_locked(rs, RS_PROBE_INTERVAL);
			return;
		case RS_TX_STALL_WINDOW:
			rs->stats.window_stalls++;
			rs_probe_arm_locked(rs, RS_PROBE_INTERVAL);
			return;
		case RS_TX_STALL_CAP:
			rs_budget_stall_locked(rs);
			return;
		default:
			return;
		}
	}
}

/*
 * A zero-length RDMA WRITE: it needs no receive slot and touches no
 * memory, but the peer's HCA must acknowledge it, so a dead peer shows up
 * as a retry-exceeded completion even when no data can move (closed
 * window, no credits) or none is queued (keepalive).
 */
static void rs_post_probe_locked(struct rs_sock *rs)
{
	struct ib_rdma_wr wr = {};
	bool track = !rs->probe_out;

	if (!rs->peer_ready || !rs_sq_free(rs))
		return;
	wr.wr.opcode = IB_WR_RDMA_WRITE;
	wr.remote_addr = rs->peer_addr;
	wr.rkey = rs->peer_rkey;
	/* signalled (one at a time), so rs_probe_timer() sees it complete */
	if (rs_post_slot(rs, &wr.wr, track, false)) {
		rs_abort_locked(rs, ECONNRESET);
		return;
	}
	rs->stats.probes++;
	if (track) {
		rs->probe_out = true;
		rs->probe_seq = rs->sq_posted - 1;
	}
}

/*
 * A signalled work request (a probe, or any other) has waited
 * RS_WEDGE_TIMEOUT for a send completion, and none came, nor an error.
 * On rxe this is the connection's time limit: its QP retries for ever
 * (rs_rtt.c), so a peer that stopped answering ends here, with ETIMEDOUT
 * as TCP's retransmission limit would. It also ends a wedged QP: seen
 * with rxe (6.1) after a retransmission made it run a completed REG_MR
 * again: the requester stops, the completer waits for an acknowledgement
 * that no packet asks for, and without this every caller would wait for
 * ever.
 */
static bool rs_wedged_locked(struct rs_sock *rs)
{
	bool waiting = rs->sq_signaled < rs->sq_posted &&
		       rs->sq_done <= rs->sq_signaled;

	return (rs->probe_out || waiting) &&
	       time_after(jiffies, rs->sq_progress + RS_WEDGE_TIMEOUT);
}

/*
 * Make the QP look at its send queue again: a zero-length write behind
 * whatever waits there. rxe (6.1) holds a LOCAL_INV until every earlier
 * work request has completed and can miss the completion that allows it
 * (the completer may finish just before the requester starts to wait);
 * the next post runs the requester again and the LOCAL_INV goes.
 */
void rs_kick_locked(struct rs_sock *rs)
{
	if (!rs->dead && rs->transport)
		rs_post_probe_locked(rs);
}

void rs_probe_arm_locked(struct rs_sock *rs, unsigned long delay)
{
	if (!rs->dead && !timer_pending(&rs->probe_timer))
		mod_timer(&rs->probe_timer, jiffies + delay);
}

/*
 * The send queue's watchdog: a signalled work request is outstanding and
 * no send completion came for a whole interval. On hardware that is a
 * peer that stopped acknowledging (the QP's retries end it). rxe (6.1)
 * can also park its requester for good: it tests a condition and then
 * sets the flag that asks to be run again (need_req_skb after counting
 * the packets in flight, wait_fence before a LOCAL_INV), and a completion
 * that lands in between finds the flag still clear. Nothing runs the
 * requester until the next post, and a sender waiting for those
 * completions posts nothing. A zero-length write is that post; where the
 * peer is merely slow it costs one packet a second.
 */
static bool rs_sq_stuck_locked(struct rs_sock *rs)
{
	bool waiting = rs->sq_done <= rs->sq_signaled;
	bool stuck = waiting && rs->sq_done == rs->wd_sq_done;

	rs->wd_sq_done = rs->sq_done;
	return stuck;
}

void rs_probe_timer(struct timer_list *t)
{
	struct rs_sock *rs = timer_container_of(rs, t, probe_timer);
	bool stalled, stuck, keep = sock_flag(&rs->sk, SOCK_KEEPOPEN);

	spin_lock(&rs->lock);
	if (!rs->dead && rs->transport && rs_wedged_locked(rs)) {
		rs_abort_locked(rs, ETIMEDOUT);
	} else if (!rs->dead && rs->transport) {
		/*
		 * Data to post, or posted and not known to be done, or any
		 * work request not known to have completed: on rxe the QP
		 * retries it for ever (rs_rtt.c), and only a signalled
		 * probe behind it lets the watchdog see a dead peer.
		 */
		stalled = rs_flow_tx_unsent(&rs->flow) > 0 ||
			  rs->flow.tx_done != rs->flow.tx_sent ||
			  rs->sq_done < rs->sq_posted;
		stuck = rs_sq_stuck_locked(rs);
		if (stalled || stuck || keep)
			rs_post_probe_locked(rs);
		if (stuck)
			rs->stats.kicks++;
		/*
		 * kicked: now let rxe's retransmission come first (rs.h);
		 * mod_timer, not rs_probe_arm_locked(): the probe's own post
		 * has armed it a second ahead
		 */
		if (stalled || rs->sq_done <= rs->sq_signaled)
			mod_timer(&rs->probe_timer, jiffies +
				  (stuck ? rs_qp_quiet(rs) : RS_PROBE_INTERVAL));
		else if (keep)
			mod_timer(&rs->probe_timer,
				  jiffies + rs_keepalive_secs * HZ);
	}
	spin_unlock(&rs->lock);
}

/* SO_KEEPALIVE: probe an idle connection every keepalive_secs. */
void rs_keepalive(struct sock *sk, int on)
{
	struct rs_sock *rs = rs_sk(sk);

	struct socket *fb = rs_fbc(rs);

	if (fb) {
		rs_fb_keepalive(fb, on);
		return;
	}
	spin_lock_bh(&rs->lock);
	if (on && rs->transport)
		rs_probe_arm_locked(rs, rs_keepalive_secs * HZ);
	spin_unlock_bh(&rs->lock);
}

/*
 * Free send-ring bytes, without rs->lock: tx_head only moves under
 * lock_sock() in sendmsg, and tx_done only grows, so a stale tx_done
 * merely understates the space. tx_size changes under lock_sock() too:
 * a caller that holds it (sendmsg) sees the truth; poll may see a size
 * just given back (rs_tx_tune(): the ring was empty) and report
 * EPOLLOUT once where the send then waits.
 */
u32 rs_tx_space(struct rs_sock *rs)
{
	const struct rs_flow *f = &rs->flow;
	u32 used, size;
	u64 done;

	/* acquire: the HCA is done with the bytes below tx_done */
	done = smp_load_acquire(&f->tx_done);
	used = (u32)(READ_ONCE(f->tx_head) - done);
	/* a size older than tx_head (the ring just grew) only understates */
	size = READ_ONCE(f->tx_size);
	return used < size ? size - used : 0;
}

/*
 * Poll's EPOLLOUT: a send would make progress now, and more than a byte
 * of it. Send-ring space above rs_tx_writeable()'s threshold, or an
 * ADVERT a direct send can write into at once, unless the writer sends
 * pages (sendfile, splice), which never go direct.
 */
bool rs_tx_poll_writeable(struct rs_sock *rs)
{
	if (rs_tx_writeable(rs_tx_space(rs), READ_ONCE(rs->flow.tx_size)))
		return true;
	/* the ring it grew from can go: a send may grow it again */
	if (rs_tx_reapable(rs))
		return true;
	return rs_policy(rs) != RDMASTREAM_POLICY_INDIRECT_ONLY &&
	       !READ_ONCE(rs->tx_nodirect) &&
	       READ_ONCE(rs->dtx.count) && rs_dsend_ready(rs);
}

/* What writers wait for, before a completion handler changes it. */
void rs_writers_snap_locked(struct rs_sock *rs, struct rs_writers *w)
{
	w->space = rs_flow_tx_space(&rs->flow);
	w->sq_free = rs_sq_free(rs);
	w->unsent = rs_flow_tx_unsent(&rs->flow);
}

/*
 * Should a completion handler wake writers? When the send ring crossed
 * the writeable threshold (not on every freed byte: TCP's
 * sk_stream_write_space()), and, while an ADVERT is queued, when a
 * direct send may go on: enough send queue slots came back, or the last
 * queued indirect byte went out. rs->lock is held.
 */
bool rs_writers_wake_locked(struct rs_sock *rs, const struct rs_writers *w)
{
	u32 size = rs->flow.tx_size;

	if (!rs_tx_writeable(w->space, size) &&
	    rs_tx_writeable(rs_flow_tx_space(&rs->flow), size))
		return true;
	if (!rs->dtx.count)
		return false;
	return (w->sq_free < rs->dsend_wrs &&
		rs_sq_free(rs) >= rs->dsend_wrs) ||
	       (w->unsent && !rs_flow_tx_unsent(&rs->flow));
}

void rs_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rs_send *s = container_of(wc->wr_cqe, struct rs_send, cqe);
	struct rs_sock *rs = s->rs;
	struct rs_writers w;
	bool writable, reapable;

	spin_lock(&rs->lock);
	if (s->wait) {
		s->wait->status = wc->status;
		s->wait->done = true;
		s->wait = NULL;
		wake_up_all(&rs->dwait);
	}
	if (wc->status != IB_WC_SUCCESS) {
		rs_wc_error_locked(rs, wc);
		spin_unlock(&rs->lock);
		return;
	}
	rs->stats.completions++;
	if (s->post_ns)
		rs_rtt_done_locked(rs, s);
	rs_writers_snap_locked(rs, &w);
	reapable = rs_tx_reapable(rs);
	rs->sq_progress = jiffies;
	if (rs->probe_out && s->seq >= rs->probe_seq)
		rs->probe_out = false;
	if (s->seq + 1 > rs->sq_done)
		WRITE_ONCE(rs->sq_done, s->seq + 1);	/* rs_tx_reapable() */
	/* an old stream buffer to retire or free: not only at a recvmsg */
	if (unlikely(rs->rx_old.vaddr || rs->rx_new.vaddr) &&
	    rs_rx_settle_due_locked(rs))
		rs_rx_tune_later_locked(rs);
	if (s->tx_end > rs->flow.tx_done) {
		/* the HCA is done reading: back to the CPU, then publish */
		rs_tx_sync_done_locked(rs, rs->flow.tx_done, s->tx_end);
		/* pairs with the acquire in rs_tx_space() */
		smp_store_release(&rs->flow.tx_done, s->tx_end);
		rs_budget_update_locked(rs);
	}
	if (s->fin)
		rs->fin_done = true;
	rs_push_locked(rs);
	rs_maybe_finish_locked(rs);
	writable = rs_writers_wake_locked(rs, &w) ||
		   (!reapable && rs_tx_reapable(rs));	/* it may grow again */
	spin_unlock(&rs->lock);
	if (s->fin)		/* a lingering close() waits for it */
		rs_wake(&rs->sk, RS_POLLOUT);
	else if (writable)
		rs_write_space(&rs->sk);
}

/*
 * Why sending is impossible now (-EPIPE), or 0 when it is possible. A
 * pending socket error stays pending: rs_sendmsg() returns what it copied
 * if anything, and only a call that copied nothing reports (and clears)
 * the error, through sk_stream_error(), as TCP does. Clearing it here
 * lost it when the bytes copied before the failure were returned: the
 * next send got EPIPE and a receive EOF, and nobody saw ETIMEDOUT or
 * ECONNRESET (lossy.loss5, teardown.conn.reset_after_partial_send).
 */
static int rs_send_error(struct rs_sock *rs)
{
	struct sock *sk = &rs->sk;

	if (READ_ONCE(sk->sk_err))
		return -EPIPE;
	if (sk->sk_shutdown & SEND_SHUTDOWN)
		return -EPIPE;
	if (!rs_state_open(sk->sk_state))
		return -EPIPE;
	if (rs->dead)
		return -EPIPE;
	return 0;
}

int rs_wait_connect(struct rs_sock *rs, long *timeo)
{
	struct sock *sk = &rs->sk;
	DEFINE_WAIT_FUNC(wait, woken_wake_function);

	int err;

	/* ...or for the fallback to TCP (rs_fallback.c) */
	while (sk->sk_state == TCP_SYN_SENT && !rs_fbc(rs)) {
		err = rs_may_wait(*timeo);
		if (err)
			return err;
		add_wait_queue(sk_sleep(sk), &wait);
		sk_wait_event(sk, timeo, sk->sk_state != TCP_SYN_SENT ||
			      rs_fbc(rs), &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
	}
	return 0;
}

/*
 * Wait for send ring space; returns the space, 0 when a usable ADVERT came
 * first (direct set: the caller tries a direct send), or a negative error.
 */
static long rs_wait_space(struct rs_sock *rs, long *timeo, bool direct)
{
	struct sock *sk = &rs->sk;
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	bool asked = false;
	u32 space;
	int err;

	for (;;) {
		err = rs_send_error(rs);
		if (err)
			return err;
		space = rs_tx_space(rs);
		if (space)
			return space;
		if (direct && rs_dsend_ready(rs))
			return 0;
		/* a full ring may grow instead (rs_txgrow.c) */
		if (rs_tx_grow(rs))
			continue;
		/*
		 * Before EAGAIN too, as TCP: an epoll ET loop waits for the
		 * edge. Then look again: room that came first gave none.
		 */
		if (!asked) {
			rs_nospace(sk);
			asked = true;
			continue;
		}
		err = rs_may_wait(*timeo);
		if (err)
			return err;
		add_wait_queue(sk_sleep(sk), &wait);
		rs_nospace(sk);
		sk_wait_event(sk, timeo, rs_tx_space(rs) ||
			      rs_send_error(rs) || rs_tx_reapable(rs) ||
			      (direct && rs_dsend_ready(rs)), &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
	}
}

/*
 * Direct-only: wait for an ADVERT to write into, for RS_DGRACE_MS at most
 * and never longer than the send timeout. 0 when one came, 1 when none
 * did, or an errno.
 */
static int rs_wait_advert(struct rs_sock *rs, long *timeo)
{
	struct sock *sk = &rs->sk;
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	long left = min_t(long, *timeo, msecs_to_jiffies(RS_DGRACE_MS));
	long was;
	int err;

	for (;;) {
		err = rs_send_error(rs);
		if (err)
			return err;
		if (rs_dsend_ready(rs))
			return 0;
		if (!left)
			return 1;
		if (signal_pending(current))
			return sock_intr_errno(*timeo);
		was = left;
		add_wait_queue(sk_sleep(sk), &wait);
		rs_nospace(sk);
		sk_wait_event(sk, &left, rs_dsend_ready(rs) ||
			      rs_send_error(rs), &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
		if (*timeo != MAX_SCHEDULE_TIMEOUT)
			*timeo -= min(*timeo, was - left);
	}
}

/*
 * Direct-only found no ADVERT: 0 when one came within the grace period
 * (send direct), 1 when the bytes go indirect, or an errno. A sender
 * that found none stays degraded, and sends indirect without waiting,
 * until the receiver advertises again (rs_dtx_degrade()).
 */
static int rs_direct_only_wait(struct rs_sock *rs, long *timeo)
{
	int ret = 1;

	if (!READ_ONCE(rs->dtx.degraded))
		ret = rs_wait_advert(rs, timeo);
	if (ret == 1) {
		spin_lock_bh(&rs->lock);
		rs_dtx_degrade(&rs->dtx);
		spin_unlock_bh(&rs->lock);
	}
	return ret;
}

/*
 * May the bytes just queued wait for the next call instead of being
 * pushed? Only when that call is sure to come (a sendpage() with more
 * pages behind it in the same splice: MSG_SENDPAGE_NOTLAST), a little is
 * queued, and earlier bytes are still in flight: their send completion
 * pushes whatever is queued (rs_send_done), so a splice cut short (the
 * next page failed to read, or was truncated away) cannot leave bytes
 * behind. TCP corks such a splice too; here it saves an RDMA WRITE (and
 * a receive credit) per page.
 */
static bool rs_push_deferred_locked(const struct rs_sock *rs, bool more)
{
	const struct rs_flow *f = &rs->flow;

	return more && f->tx_sent != f->tx_done &&
	       rs_flow_tx_unsent(f) < min_t(u32, RS_COPY_CHUNK, f->tx_size / 4);
}

/* Copy up to space bytes into the send ring and commit them indirect. */
static int rs_send_indirect(struct rs_sock *rs, struct msghdr *msg,
			    u32 space, size_t left, size_t *copied, bool more)
{
	u32 n = min_t(size_t, min_t(u32, space, RS_COPY_CHUNK), left);
	u32 off = (u32)rs->flow.tx_head & (rs->tx.size - 1);
	int err;

	err = rs_ring_copy_in(&rs->tx, off, &msg->msg_iter, n);
	if (err)
		return err;
	*copied += n;
	spin_lock_bh(&rs->lock);
	WRITE_ONCE(rs->flow.tx_head, rs->flow.tx_head + n);
	rs_dtx_indirect_sent(&rs->dtx, n);
	if (!rs_push_deferred_locked(rs, more && n == left))
		rs_push_locked(rs);
	spin_unlock_bh(&rs->lock);
	return 0;
}

/*
 * A send found the connection dead (-EPIPE) before the teardown decided
 * between the peer's clean close (EPIPE is right then, as TCP's reset in
 * CLOSE_WAIT) and a reset (ECONNRESET): the drain may still deliver a FIN.
 * Wait for the decision, a bounded and interruptible while, so that the
 * error reported is the one the teardown sets, not whichever came first.
 */
static void rs_send_settle(struct rs_sock *rs, int flags)
{
	struct sock *sk = &rs->sk;
	long timeo = sock_sndtimeo(sk, flags & MSG_DONTWAIT);

	/* a non-blocking send never waits: it says EPIPE, as before */
	if (!timeo || !READ_ONCE(rs->dead) || READ_ONCE(sk->sk_err) ||
	    READ_ONCE(rs->settled))
		return;
	wait_event_interruptible_timeout(*sk_sleep(sk),
					 READ_ONCE(rs->settled) ||
					 READ_ONCE(sk->sk_err),
					 min_t(long, timeo, RS_DRAIN_TIMEOUT));
}

/* more: the caller's next call follows at once (rs_push_deferred_locked) */
static int rs_send(struct socket *sock, struct msghdr *msg, size_t len,
		   bool more)
{
	struct sock *sk = sock->sk;
	struct rs_sock *rs = rs_sk(sk);
	int flags = msg->msg_flags;
	size_t copied = 0;
	long timeo, ret;
	bool direct;
	int err;

	if (flags & MSG_OOB)
		return -EOPNOTSUPP;
	lock_sock(sk);
	rs_tx_tune(rs);		/* a ring it grew from, once unused */
	timeo = sock_sndtimeo(sk, flags & MSG_DONTWAIT);
	err = rs_wait_connect(rs, &timeo);
	if (!err)
		err = rs_send_error(rs);
	direct = rs_policy(rs) != RDMASTREAM_POLICY_INDIRECT_ONLY &&
		 user_backed_iter(&msg->msg_iter);
	/* poll() answers for the kind of call the writer makes */
	if (READ_ONCE(rs->tx_nodirect) == user_backed_iter(&msg->msg_iter))
		WRITE_ONCE(rs->tx_nodirect, !user_backed_iter(&msg->msg_iter));
	while (!err && copied < len) {
		if (direct) {
			ret = rs_dsend(rs, msg, min_t(size_t, len - copied,
						      1U << 30), &timeo);
			if (ret > 0) {
				copied += ret;
				continue;
			}
			if (ret == -ENOBUFS) {
				/* over RLIMIT_MEMLOCK: the rest goes indirect */
				direct = false;
				continue;
			}
			err = ret ? ret : rs_send_error(rs);
			if (err)
				continue;
			if (rs_policy(rs) == RDMASTREAM_POLICY_DIRECT_ONLY) {
				ret = rs_direct_only_wait(rs, &timeo);
				if (ret < 0)
					err = ret;
				if (ret <= 0)
					continue;
			}
		}
		ret = rs_wait_space(rs, &timeo, direct);
		if (ret < 0)
			err = ret;
		else if (ret > 0)
			err = rs_send_indirect(rs, msg, ret, len - copied,
					       &copied, more);
	}
	release_sock(sk);
	if (copied)
		return copied;
	if (err == -EPIPE)
		rs_send_settle(rs, flags);
	return sk_stream_error(sk, flags, err);
}

int rs_sendmsg(struct socket *sock, struct msghdr *msg, size_t len)
{
	return rs_send(sock, msg, len, false);
}

/*
 * sendfile() and splice() into the socket (6.1's ->sendpage): the page's
 * bytes are copied straight into the send ring. A bio_vec is not user
 * memory, so they always go indirect, whatever the policy, and the page
 * is never pinned or registered. Flags are sendmsg()'s: MSG_DONTWAIT for
 * a non-blocking socket, MSG_NOSIGNAL, and MSG_SENDPAGE_NOTLAST when the
 * splice has more pages queued behind this one. From 6.5 the same calls
 * reach rs_sendmsg() with a bio_vec iterator instead (rs_compat.h).
 */
#ifdef RS_HAVE_SENDPAGE
ssize_t rs_sendpage(struct socket *sock, struct page *page, int offset,
		    size_t size, int flags)
{
	struct bio_vec bvec = {
		.bv_page = page,
		.bv_offset = offset,
		.bv_len = size,
	};
	struct msghdr msg = { .msg_flags = flags };

	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, &bvec, 1, size);
	return rs_send(sock, &msg, size, flags & MSG_SENDPAGE_NOTLAST);
}
#endif
