// SPDX-License-Identifier: GPL-2.0
/*
 * Receiving: the peer's RDMA WRITE WITH IMMEDIATE lands in our stream
 * buffer and consumes a receive slot; its completion advances rx_prod.
 * recvmsg copies out of the ring and advances rx_cons, which flows back
 * to the peer in ACKs as its window.
 */
#include <linux/uio.h>
#include <net/busy_poll.h>

#include "rs.h"

int rs_post_recv_locked(struct rs_sock *rs, struct rs_recv *r)
{
	struct ib_recv_wr wr = {
		.wr_cqe = &r->cqe,
		.sg_list = &r->sge,
		.num_sge = 1,
	};
	int ret;

	if (rs->dead)
		return -ECONNABORTED;
	ib_dma_sync_single_for_device(rs->dev, r->sge.addr, RS_MSG_SIZE,
				      DMA_FROM_DEVICE);
	ret = ib_post_recv(rs->qp, &wr, NULL);
	if (!ret)
		rs_flow_on_recv_posted(&rs->flow);
	return ret;
}

/*
 * Indirect bytes landed in the stream buffer; false if that is invalid.
 * The immediate says how many, the completion how many really arrived
 * (the write's length): a peer that claims more than it wrote would have
 * recvmsg() return whatever the buffer held before.
 */
static bool rs_recv_data_locked(struct rs_sock *rs, u32 imm, u32 arrived)
{
	struct rs_ring *r = rs_rx_ring(rs, rs->flow.rx_prod);
	u32 len, credits, off = (u32)rs->flow.rx_prod & (r->size - 1);

	if (!rs_flow_imm_ok(&rs->flow, imm))
		return false;
	rs_imm_decode(imm, &len, &credits);
	if (len != arrived || !rs_flow_on_credits(&rs->flow, credits))
		return false;
	/* the HCA is done with them: the CPU's before rx_prod says so */
	if (len <= rs_flow_rx_room(&rs->flow))
		rs_ring_sync(r, off, len, true);
	if (!rs_flow_on_data(&rs->flow, len))
		return false;
	rs_rx_rate_locked(rs);
	/* the first data since a receive began to wait: when it came */
	if (rs->rx_data_ns < READ_ONCE(rs->rx_wait_ns))
		WRITE_ONCE(rs->rx_data_ns, ktime_get_ns());
	/* our live ADVERTs are overtaken: their receivers go to the ring */
	rs_drx_on_indirect(&rs->drx, len);
	return true;
}

static __poll_t rs_recv_msg_locked(struct rs_sock *rs, struct rs_recv *r,
				   const struct ib_wc *wc)
{
	if (wc->opcode == IB_WC_RECV_RDMA_WITH_IMM) {
		if (!rs_recv_data_locked(rs, be32_to_cpu(wc->ex.imm_data),
					 wc->byte_len))
			rs_abort_locked(rs, EPROTO);
		else if (sock_flag(&rs->sk, SOCK_DEAD))
			/* nobody will read it: reset the peer, as TCP does */
			rs_abort_locked(rs, ECONNRESET);
		return EPOLLIN | EPOLLRDNORM;
	}
	if (wc->opcode == IB_WC_RECV && wc->byte_len >= RS_MSG_SIZE) {
		ib_dma_sync_single_for_cpu(rs->dev, r->sge.addr, RS_MSG_SIZE,
					   DMA_FROM_DEVICE);
		return rs_ctrl_recv_locked(rs, r->msg, wc);
	}
	rs_abort_locked(rs, EPROTO);
	return EPOLLERR;
}

void rs_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rs_recv *r = container_of(wc->wr_cqe, struct rs_recv, cqe);
	struct rs_sock *rs = r->rs;
	struct rs_writers w;
	__poll_t mask;
	u32 credits;

	spin_lock(&rs->lock);
	if (wc->status != IB_WC_SUCCESS) {
		rs_wc_error_locked(rs, wc);
		spin_unlock(&rs->lock);
		return;
	}
	credits = rs->flow.credits;
	rs_writers_snap_locked(rs, &w);
	mask = rs_recv_msg_locked(rs, r, wc);
	/* a direct sender may be waiting for its first spare credits */
	if (credits < 2 && rs->flow.credits >= 2)
		mask |= EPOLLOUT;
	if (!rs->dead && rs_post_recv_locked(rs, r))
		rs_abort_locked(rs, ECONNRESET);
	rs_push_locked(rs);
	/* what the window let go: inline writes free their space at once */
	if (rs_writers_wake_locked(rs, &w))
		mask |= EPOLLOUT | EPOLLWRNORM;
	spin_unlock(&rs->lock);
	/*
	 * SETUP and ACK move the window; the send completions that follow
	 * wake writers (send ring space frees on completion, not on ACK).
	 */
	mask &= ~EPOLLERR;	/* the abort reported it */
	/* uninterruptible waits of direct transfers; usually nobody */
	if ((mask & EPOLLIN) && wq_has_sleeper(&rs->dwait))
		wake_up_all(&rs->dwait);
	/* writers only if one found no room (TCP's write_space) */
	if (mask & ~RS_POLLOUT)
		rs_wake(&rs->sk, mask & ~RS_POLLOUT);
	if (mask & RS_POLLOUT)
		rs_write_space(&rs->sk);
}

/*
 * Unread stream-buffer bytes, without rs->lock: rx_prod only grows (in
 * softirq, after the bytes have landed) and rx_cons only moves under
 * lock_sock() in recvmsg, so a stale rx_prod merely understates them.
 */
u32 rs_rx_avail(struct rs_sock *rs)
{
	const struct rs_flow *f = &rs->flow;

	/* acquire: the bytes below rx_prod are in the ring before we copy */
	return (u32)(smp_load_acquire(&f->rx_prod) - READ_ONCE(f->rx_cons));
}

static bool rs_rx_stop(struct rs_sock *rs, u32 skip)
{
	struct sock *sk = &rs->sk;

	return rs_rx_avail(rs) > skip || READ_ONCE(sk->sk_err) ||
	       (READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN);
}

/*
 * Spin, without lock_sock(), until there is something to read or error
 * or EOF to report, the CPU is wanted elsewhere or a signal is pending,
 * or until (ktime ns) has passed. Returns when it saw something to
 * report (ktime ns), 0 if it did not. The completion that brings the
 * data runs in softirq on any CPU and takes only rs->lock; releasing the
 * socket lock lets a writer on another thread go on meanwhile, as TCP's
 * busy polling does.
 */
static u64 rs_spin_until(struct rs_sock *rs, u32 skip, u64 until)
{
	struct sock *sk = &rs->sk;
	u64 now, seen = 0;

	release_sock(sk);
	do {
		now = ktime_get_ns();
		if (rs_rx_stop(rs, skip)) {
			seen = now;
			break;
		}
		if (need_resched() || signal_pending(current))
			break;
		cpu_relax();
	} while (now < until);
	lock_sock(sk);
	return seen;
}

static void rs_wait_data(struct rs_sock *rs, long *timeo, u32 skip)
{
	struct sock *sk = &rs->sk;
	DEFINE_WAIT_FUNC(wait, woken_wake_function);

	add_wait_queue(sk_sleep(sk), &wait);
	sk_wait_event(sk, timeo, rs_rx_stop(rs, skip), &wait);
	remove_wait_queue(sk_sleep(sk), &wait);
}

/* After a sleep: when the data came, or now if it did not (yet). */
static u64 rs_rx_arrival(struct rs_sock *rs, u64 since)
{
	u64 at = READ_ONCE(rs->rx_data_ns);

	return at >= since ? at : ktime_get_ns();
}

/*
 * Wait for data, error or EOF, up to *timeo. SO_BUSY_POLL (default: sysctl
 * net.core.busy_read) spins a fixed sk_ll_usec first; without it the
 * socket spins as long as its recent waits say the data will come soon
 * (rs_spin.h, module parameter spin_max_us), and sleeps otherwise.
 * *since is when this receive began to wait (0: now); the caller clears
 * it once there is something to report, and the delay from *since to
 * the arrival of the data teaches the estimate.
 */
static void rs_rx_wait(struct rs_sock *rs, long *timeo, u32 skip, u64 *since)
{
	u32 budget, max = READ_ONCE(rs_spin_max_us) * NSEC_PER_USEC;
	struct sock *sk = &rs->sk;
	u64 until, end = 0;

	if (!*since) {
		*since = ktime_get_ns();
		WRITE_ONCE(rs->rx_wait_ns, *since);
	}
	if (sk_can_busy_loop(sk)) {
		until = *since + (u64)READ_ONCE(sk->sk_ll_usec) * NSEC_PER_USEC;
		if (ktime_get_ns() >= until || !rs_spin_until(rs, skip, until))
			rs_wait_data(rs, timeo, skip);
		return;
	}
	budget = rs_spin_budget(&rs->spin, max);
	until = *since + budget;
	if (budget && ktime_get_ns() < until) {
		end = rs_spin_until(rs, skip, until);
		/* rdmastream_info reads them under rs->lock only */
		if (end)
			WRITE_ONCE(rs->stats.spin_hits,
				   rs->stats.spin_hits + 1);
		else
			WRITE_ONCE(rs->stats.spin_misses,
				   rs->stats.spin_misses + 1);
	}
	if (!end) {
		rs_wait_data(rs, timeo, skip);
		end = rs_rx_arrival(rs, *since);
	}
	/* data came, or it has kept us waiting past the ceiling anyway */
	if (max && (rs_rx_stop(rs, skip) || end - *since > max))
		rs_spin_sample(&rs->spin, end - *since, max);
}

/*
 * Copy up to len bytes at skip past rx_cons; consume them unless peeking.
 * Returns the bytes copied: they may stop short at the end of a stream
 * buffer that grew (rs_rxgrow.c), or a negative errno.
 */
static int rs_rx_copy(struct rs_sock *rs, struct msghdr *msg, u32 len,
		      u32 skip, bool peek)
{
	u64 pos = rs->flow.rx_cons + skip;
	struct rs_ring *r = rs_rx_ring(rs, pos);
	u32 off = (u32)pos & (r->size - 1);
	struct rs_writers w;
	bool wake;
	int err;

	len = rs_flow_rx_piece(&rs->flow, pos, len);
	err = rs_ring_copy_out(r, off, &msg->msg_iter, len);
	if (err || peek)
		return err ?: len;
	spin_lock_bh(&rs->lock);
	/* back to the HCA before the window update can reveal the space */
	if (!rs->dead)
		rs_ring_sync(r, off, len, false);
	rs_flow_consume(&rs->flow, len);
	/* inline writes this push posts free send-ring space at once */
	rs_writers_snap_locked(rs, &w);
	rs_push_locked(rs);
	wake = rs_writers_wake_locked(rs, &w);
	spin_unlock_bh(&rs->lock);
	if (wake)
		rs_write_space(&rs->sk);
	return len;
}

/* A receive timeout or a signal: the caller's, not the connection's. */
static bool rs_own_errno(int err)
{
	return err == -EAGAIN || err == -EINTR || err == -ERESTARTSYS;
}

int rs_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
	       int flags)
{
	struct sock *sk = sock->sk;
	struct rs_sock *rs = rs_sk(sk);
	bool peek = flags & MSG_PEEK;
	size_t copied = 0, target;
	u32 avail, skip = 0, n;
	u64 peek_cons, since = 0;
	long timeo;
	int err = 0;

	if (flags & MSG_OOB)
		return -EINVAL;
	if (flags & MSG_ERRQUEUE)
		return -EAGAIN;
	lock_sock(sk);
	if (!rs->flow.rx_size || sk->sk_state == TCP_LISTEN) {
		err = -ENOTCONN;
		goto out;
	}
	timeo = sock_rcvtimeo(sk, flags & MSG_DONTWAIT);
	target = sock_rcvlowat(sk, flags & MSG_WAITALL, len);
	peek_cons = rs->flow.rx_cons;
	while (copied < len) {
		if (peek && rs->flow.rx_cons != peek_cons) {
			/* another reader consumed what we peeked, as TCP warns */
			peek_cons = rs->flow.rx_cons;
			skip = 0;
		}
		avail = rs_rx_avail(rs);
		avail = avail > skip ? avail - skip : 0;
		if (avail) {
			n = min_t(size_t, avail, len - copied);
			err = rs_rx_copy(rs, msg, n, skip, peek);
			if (err < 0)
				break;
			n = err;
			err = 0;
			copied += n;
			if (!peek)
				rs_dlearn_ring(&rs->dlearn, n,
					       rs_threshold(rs));
			if (peek)
				skip += n;
			if (copied >= target)
				break;
			continue;
		}
		if (sk->sk_err) {
			if (!copied)
				err = sock_error(sk);
			break;
		}
		if (sk->sk_shutdown & RCV_SHUTDOWN)
			break;
		err = rs_may_wait(timeo);
		if (err)
			break;
		if (rs_drecv_wanted(rs, msg, len - copied, flags, timeo)) {
			int got = rs_drecv(rs, msg, min_t(size_t, len - copied,
							  1U << 30),
					   flags, &timeo);

			since = 0;	/* its own wait, not the ring's */
			if (got > 0) {
				copied += got;
				if (copied >= target)
					break;
				continue;
			}
			/*
			 * The connection failed under it: the loop reports
			 * that as for the ring, consuming the error only
			 * when no byte was copied, as TCP does. (Consumed
			 * here, a recv() that returns bytes lost it and the
			 * next one read EOF.) The caller's own timeout or
			 * signal is reported as such.
			 */
			if (got < 0 && !rs_own_errno(got) &&
			    READ_ONCE(sk->sk_err))
				continue;
			if (got != -EOPNOTSUPP) {
				err = got;
				if (err)
					break;
				continue;
			}
		}
		rs_rx_wait(rs, &timeo, skip, &since);
		if (rs_rx_stop(rs, skip))
			since = 0;
	}
	if (copied && !peek)
		rs_rx_tune(rs);
out:
	release_sock(sk);
	return copied ? copied : err;
}
