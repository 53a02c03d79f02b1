// SPDX-License-Identifier: GPL-2.0
/*
 * Direct receives: a blocking recvmsg() with an empty stream buffer and a
 * large enough buffer pins the buffer, registers it with a fast-
 * registration MR scoped to exactly its bytes (remote write only), and
 * sends an ADVERT. The sender writes into it and says so with a DIRECT
 * message that normally also invalidates the MR (SEND WITH INVALIDATE).
 *
 * Before recvmsg() returns, the peer must have lost access on every path:
 *  - DIRECT with remote invalidation of our rkey: nothing more to do;
 *  - the ADVERT died (indirect data or FIN overtook it) or a DIRECT came
 *    without invalidation: we post a LOCAL_INV and wait for it;
 *  - timeout, signal or SHUT_RD while the ADVERT is live: CANCEL, wait for
 *    the CANCEL_ACK (or a DIRECT) without letting a signal cut the wait
 *    short, then invalidate; a peer that never answers is reset after
 *    RS_CANCEL_TIMEOUT;
 *  - the connection died: we wait until the QP is drained (rs->drained),
 *    after which no peer can reach the MR; teardown unmaps the pages.
 * Only then are the pages unpinned (and dirtied) and the slot freed; after
 * our own LOCAL_INV on rxe, once the MR is deregistered too
 * (rs_dslot_inv_fence()).
 */
#include <linux/uio.h>

#include "rs.h"
#include "../uapi/linux/rdmastream.h"

static void rs_dslot_inv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rs_dslot *d = container_of(wc->wr_cqe, struct rs_dslot,
					  inv_cqe);
	struct rs_sock *rs = d->rs;

	spin_lock(&rs->lock);
	if (wc->status != IB_WC_SUCCESS)
		rs_wc_error_locked(rs, wc);
	d->inv.status = wc->status;
	d->inv.done = true;
	spin_unlock(&rs->lock);
	wake_up_all(&rs->dwait);
}

/*
 * Direct receives on this connection: at most dmax bytes per ADVERT. The
 * slots' MRs are made when first needed (rs_dslot_mr_prepare), so a
 * connection that never advertises never holds one.
 */
void rs_dslots_init(struct rs_sock *rs)
{
	u32 pages = min_t(u32, rs->dev->attrs.max_fast_reg_page_list_len,
			  RS_DIRECT_PAGES);
	int i;

	rs->dmax = 0;
	if (pages < 3)
		return;	/* no direct receives on this device */
	for (i = 0; i < RS_ADV_SLOTS; i++) {
		rs->dslot[i].rs = rs;
		rs->dslot[i].inv_cqe.done = rs_dslot_inv_done;
	}
	/*
	 * An unaligned buffer touches one page more than its length, and
	 * the MR's last entry stays unused (rxe, see rs_mr_pages()).
	 */
	rs->dmax = (pages - 2) << PAGE_SHIFT;
}

/*
 * Give the slot the next ADVERT takes an MR, unless it has one. Process
 * context, under lock_sock(); rs->mr_lock keeps the teardown from freeing
 * the PD meanwhile. Failing only means this receive goes indirect.
 */
static void rs_dslot_mr_prepare(struct rs_sock *rs)
{
	struct ib_mr *mr;
	int slot;

	spin_lock_bh(&rs->lock);
	slot = rs_drx_free_slot(&rs->drx);
	if (slot >= 0 && (rs->dslot[slot].mr || rs->dead || !rs->transport))
		slot = -1;
	spin_unlock_bh(&rs->lock);
	if (slot < 0)
		return;
	mutex_lock(&rs->mr_lock);
	if (!rs->dslot[slot].mr && rs->transport && !READ_ONCE(rs->dead)) {
		/* the pages of rs_dslots_init() */
		mr = ib_alloc_mr(rs->pd, IB_MR_TYPE_MEM_REG,
				 (rs->dmax >> PAGE_SHIFT) + 2);
		if (!IS_ERR(mr)) {
			spin_lock_bh(&rs->lock);
			rs->dslot[slot].mr = mr;
			spin_unlock_bh(&rs->lock);
		}
	}
	mutex_unlock(&rs->mr_lock);
}

/* Transport teardown, after the drain: the slots' MRs go (rs->mr_lock). */
void rs_dslots_free(struct rs_sock *rs)
{
	int i;

	mutex_lock(&rs->mr_lock);
	for (i = 0; i < RS_ADV_SLOTS; i++) {
		if (rs->dslot[i].mr)
			ib_dereg_mr(rs->dslot[i].mr);
		rs->dslot[i].mr = NULL;
	}
	rs->dmax = 0;
	mutex_unlock(&rs->mr_lock);
}

/*
 * After the drain: release the buffers of receives that gave up before
 * the peer had lost access to them (the fence was their way out).
 */
void rs_dslots_release_orphans(struct rs_sock *rs)
{
	struct rs_pin pin;
	int i;

	for (i = 0; i < RS_ADV_SLOTS; i++) {
		struct rs_dslot *d = &rs->dslot[i];

		spin_lock_bh(&rs->lock);
		if (!d->orphan) {
			spin_unlock_bh(&rs->lock);
			continue;
		}
		pin = d->pin;
		memset(&d->pin, 0, sizeof(d->pin));
		d->orphan = false;
		d->busy = false;
		spin_unlock_bh(&rs->lock);
		trace_rdmastream_pin_release(&rs->sk, pin.npages, true, true,
					     false);
		rs_pin_release(&pin);
	}
}

/* The QP is drained: nobody can reach the buffers; let the HCA go. */
void rs_dslots_unmap_locked(struct rs_sock *rs)
{
	int i;

	for (i = 0; i < RS_ADV_SLOTS; i++) {
		rs_pin_unmap(&rs->dslot[i].pin, rs->dev);
		rs->dslot[i].registered = false;
	}
}

static bool rs_drecv_room_locked(struct rs_sock *rs)
{
	u32 returns = min_t(u32, rs->flow.owed, RS_IMM_CREDIT_MAX);

	return rs->transport && !rs->dead && rs->flow.setup_sent && rs->dmax &&
	       rs_drx_may_advert(&rs->drx, rs_flow_rx_avail(&rs->flow)) &&
	       rs_sq_free(rs) >= 3 && rs_flow_may_send(&rs->flow, returns);
}

/* Should this receive advertise its buffer? */
bool rs_drecv_wanted(struct rs_sock *rs, struct msghdr *msg, u32 len,
		     int flags, long timeo)
{
	int policy = rs_policy(rs);
	bool ok;

	if (policy == RDMASTREAM_POLICY_INDIRECT_ONLY || !timeo ||
	    (flags & (MSG_PEEK | MSG_DONTWAIT)) ||
	    !user_backed_iter(&msg->msg_iter))
		return false;
	/* small messages: no lock taken, as for any receive that may not */
	if (policy == RDMASTREAM_POLICY_DYNAMIC &&
	    !rs_dlearn_may(&rs->dlearn, len, rs_threshold(rs)))
		return false;
	spin_lock_bh(&rs->lock);
	ok = rs_drecv_room_locked(rs);
	spin_unlock_bh(&rs->lock);
	/* a skip is spent only on a wait that could have advertised */
	return ok && (policy != RDMASTREAM_POLICY_DYNAMIC ||
		      !rs_dlearn_skip(&rs->dlearn));
}

static void rs_advert_fill(struct rs_ctl *m, const struct rs_advert *a,
			   const struct ib_mr *mr)
{
	m->len = cpu_to_be32(a->len);
	m->addr = cpu_to_be64(mr->iova);
	m->seq = cpu_to_be64(a->seq);
	m->rkey = cpu_to_be32(mr->rkey);
	m->phase = cpu_to_be32(a->phase);
	m->id = cpu_to_be32(a->id);
	m->flags = cpu_to_be32(a->flags);
}

/*
 * Register the slot's MR over the pinned pages and send the ADVERT:
 * LOCAL_INV, REG_MR, SEND in one chain.
 *
 * The LOCAL_INV of the (already invalid) MR's old key is there for rxe
 * (6.1): when it retransmits (go-back-N from the oldest unacknowledged
 * request) it walks the send queue again and runs a REG_MR that it had
 * already run. The MR is valid by then, so the second REG_MR fails and
 * the QP stops dead (docs/lossy-links.md); or, if the peer invalidated
 * it meanwhile, it is quietly registered again. rxe runs a LOCAL_INV only
 * when every request before it has completed, so nothing before the
 * REG_MR can be retransmitted any more.
 */
static int rs_drecv_post_slot(struct rs_sock *rs, struct rs_dslot *d,
			      const struct rs_advert *a)
{
	struct rs_send *s = &rs->sends[(rs->sq_posted + 2) % RS_SQ_DEPTH];
	struct ib_send_wr inv = {};
	struct ib_reg_wr reg = {};
	struct ib_send_wr send = {};
	struct ib_sge sge;
	u32 credits;
	int n;

	inv.opcode = IB_WR_LOCAL_INV;
	inv.ex.invalidate_rkey = d->mr->rkey;
	inv.next = &reg.wr;
	ib_update_fast_reg_key(d->mr, ib_inc_rkey(d->mr->rkey));
	n = ib_map_mr_sg(d->mr, d->pin.sgt.sgl, d->pin.nents, NULL,
			 PAGE_SIZE);
	if (n != d->pin.nents)
		return -EINVAL;
	rs_mr_hide_iova(d->mr);		/* the ADVERT must not show it */
	reg.wr.opcode = IB_WR_REG_MR;
	reg.wr.next = &send;
	reg.mr = d->mr;
	reg.key = d->mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	credits = rs_flow_take_owed(&rs->flow);
	rs_ctl_fill(rs, s->msg, RS_MSG_ADVERT, credits);
	rs_advert_fill(s->msg, a, d->mr);
	rs_ctl_sge(rs, s, &sge, &send);
	send.opcode = IB_WR_SEND;
	if (rs_post_chain(rs, &inv, NULL, RS_CHAIN_ADVERT))
		return -EIO;	/* fenced; the REG_MR may have gone out */
	rs_flow_msg_sent(&rs->flow);
	rs_flow_window_sent(&rs->flow);
	rs->stats.ctrl_sent++;
	return 0;
}

/*
 * Advertise the pinned buffer; returns the slot, or -EAGAIN if not now
 * (the pin is still the caller's). The pin is the slot's once a slot is
 * returned; *fenced says that a failed post fenced the connection (the
 * REG_MR may have gone out: the slot must go through the fence).
 */
static int rs_drecv_post_locked(struct rs_sock *rs, struct rs_pin *pin,
				u32 flags, bool *fenced)
{
	struct rs_advert a;
	struct rs_dslot *d;
	int slot, ret;

	*fenced = false;
	if (!rs_drecv_room_locked(rs))
		return -EAGAIN;
	slot = rs_drx_free_slot(&rs->drx);
	if (slot < 0 || !rs->dslot[slot].mr)
		return -EAGAIN;
	d = &rs->dslot[slot];
	if (rs_pin_map(pin, rs->dev))
		return -EAGAIN;
	slot = rs_drx_advert(&rs->drx, pin->len, flags, &a);
	if (WARN_ON_ONCE(slot < 0 || d != &rs->dslot[slot])) {
		rs_pin_unmap(pin, rs->dev);
		return -EAGAIN;
	}
	d->pin = *pin;
	d->busy = true;
	d->inv.done = false;
	d->inv_local = false;
	/* until a drain or an invalidation, the peer may write */
	d->registered = true;
	ret = rs_drecv_post_slot(rs, d, &a);
	*fenced = ret == -EIO;
	if (ret && !*fenced) {
		/* nothing was posted: the pin is the caller's again */
		*pin = d->pin;
		rs_pin_unmap(pin, rs->dev);
		memset(&d->pin, 0, sizeof(d->pin));
		d->busy = false;
		d->registered = false;
		rs_drx_release(&rs->drx, slot);
		return -EAGAIN;
	}
	return slot;
}

static bool rs_drecv_stop(struct rs_sock *rs, int slot)
{
	struct sock *sk = &rs->sk;

	return READ_ONCE(rs->drx.adv[slot].state) != RS_RADV_LIVE ||
	       READ_ONCE(rs->dead) || READ_ONCE(sk->sk_err) ||
	       (READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN);
}

/* Sleep until the ADVERT is settled or the caller gives up waiting. */
static int rs_drecv_wait(struct rs_sock *rs, int slot, long *timeo)
{
	struct sock *sk = &rs->sk;
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	int err = 0;

	add_wait_queue(sk_sleep(sk), &wait);
	while (!rs_drecv_stop(rs, slot)) {
		err = rs_may_wait(*timeo);
		if (err)
			break;
		sk_wait_event(sk, timeo, rs_drecv_stop(rs, slot), &wait);
	}
	remove_wait_queue(sk_sleep(sk), &wait);
	return err;
}

static bool rs_dslot_quiet(struct rs_sock *rs, int slot)
{
	return READ_ONCE(rs->drx.adv[slot].state) != RS_RADV_LIVE ||
	       READ_ONCE(rs->drained);
}

/*
 * The receiver stops waiting while its ADVERT may still be written: ask
 * the sender to drop it and wait for the answer, which the QP orders
 * after any DIRECT for it. Returns 0 once the ADVERT is settled (or the QP
 * drained); -ETIMEDOUT if the peer stays silent for RS_CANCEL_TIMEOUT,
 * -EINTR on a fatal signal: the caller must then fence.
 */
static int rs_drecv_settle(struct rs_sock *rs, int slot)
{
	long left;

	spin_lock_bh(&rs->lock);
	if (rs->drx.adv[slot].state == RS_RADV_LIVE && !rs->dead &&
	    rs_drx_cancel(&rs->drx)) {
		rs->cancel_wanted = true;
		rs_push_locked(rs);
	}
	spin_unlock_bh(&rs->lock);
	if (rs_dslot_quiet(rs, slot))
		return 0;
	left = rs_dwait(rs, rs_dslot_quiet(rs, slot), RS_CANCEL_TIMEOUT);
	if (left > 0)
		return 0;
	return left < 0 ? -EINTR : -ETIMEDOUT;
}

static bool rs_dslot_inv_quiet(struct rs_sock *rs, struct rs_dslot *d)
{
	return READ_ONCE(d->inv.done) || READ_ONCE(rs->drained);
}

/*
 * Take the peer's access away unless its DIRECT already did. The
 * LOCAL_INV normally completes at once; rxe may need a kick (see
 * rs_kick_locked), one soon, then one per rs_qp_quiet(): it also runs only
 * after every earlier work request completed, and on a lossy link those
 * wait for a retransmission that a post delays on 6.10+ rxe (rs.h).
 * Bounded by RS_INV_TIMEOUT and a fatal signal, with
 * the same errors as rs_drecv_settle().
 */
static int rs_drecv_invalidate(struct rs_sock *rs, struct rs_dslot *d)
{
	unsigned long deadline = jiffies + RS_INV_TIMEOUT, step = RS_INV_KICK;
	struct ib_send_wr wr = {};
	bool wait = false, safe;
	long left;

	spin_lock_bh(&rs->lock);
	if (d->registered && !rs->dead) {
		wr.opcode = IB_WR_LOCAL_INV;
		wr.send_flags = IB_SEND_SIGNALED;
		wr.ex.invalidate_rkey = d->mr->rkey;
		wr.wr_cqe = &d->inv_cqe;
		d->inv.done = false;
		if (ib_post_send(rs->qp, &wr, NULL))
			rs_abort_locked(rs, ECONNRESET);
		else
			rs->stats.local_invs++;
	}
	wait = d->registered;
	spin_unlock_bh(&rs->lock);
	while (wait && !rs_dslot_inv_quiet(rs, d)) {
		left = rs_dwait(rs, rs_dslot_inv_quiet(rs, d), step);
		if (left < 0)
			return -EINTR;
		if (left > 0)
			break;
		/* a lossy link: the QP still works through what is before */
		if (time_after(jiffies, deadline) &&
		    time_after(jiffies, READ_ONCE(rs->sq_progress) +
			       RS_INV_TIMEOUT))
			return -ETIMEDOUT;
		spin_lock_bh(&rs->lock);
		rs_kick_locked(rs);
		spin_unlock_bh(&rs->lock);
		/* (more kicks would hold off rxe's retransmission) */
		step = rs_qp_quiet(rs);
	}
	spin_lock_bh(&rs->lock);
	if (d->inv.done && d->inv.status == IB_WC_SUCCESS) {
		d->registered = false;
		d->inv_local = true;
	}
	/* a flushed LOCAL_INV leaves the MR valid: only the drain helps */
	safe = !d->registered || rs->drained;
	spin_unlock_bh(&rs->lock);
	return safe ? 0 : -ECONNRESET;
}

/*
 * The caller stops waiting while the peer may still reach the buffer:
 * fence, and leave the slot to the fence unless the drain came. Returns
 * true if the slot is orphaned.
 */
static bool rs_drecv_give_up(struct rs_sock *rs, int slot, int fence)
{
	struct rs_dslot *d = &rs->dslot[slot];
	bool orphan;

	if (rs_fence(rs, fence == -ETIMEDOUT ? ETIMEDOUT : ECONNRESET))
		return false;
	spin_lock_bh(&rs->lock);
	orphan = !rs->drained;
	d->orphan = orphan;
	spin_unlock_bh(&rs->lock);
	return orphan;
}

/*
 * Our LOCAL_INV took the peer's access away, but rdma_rxe runs it on the
 * send side, while its responder checks a WRITE packet's rkey and copies
 * the payload later: a packet checked just before the LOCAL_INV may still
 * land after its completion, in the pages we are about to give back (and
 * unpin). Deregistering the MR waits for that: rxe's dereg waits until
 * every reference to the MR is dropped, the responder's for the packet it
 * is copying included (since 6.0, "RDMA/rxe: Stop lookup of partially
 * built objects"). The slot gets a new MR with its next ADVERT
 * (rs_dslot_mr_prepare()). A device whose LOCAL_INV completes only once
 * no access is left (the verbs contract) needs none of this. Under
 * lock_sock(); rs->mr_lock keeps the teardown's rs_dslots_free() out.
 */
static void rs_dslot_inv_fence(struct rs_sock *rs, struct rs_dslot *d)
{
	struct ib_mr *mr = NULL;

	if (!d->inv_local)
		return;
	mutex_lock(&rs->mr_lock);
	spin_lock_bh(&rs->lock);
	/* after the drain (the device may be gone) nothing is in flight */
	if (!rs->drained && rs->transport &&
	    rs->dev->ops.driver_id == RDMA_DRIVER_RXE) {
		mr = d->mr;
		d->mr = NULL;
		rs->stats.inv_fences++;
	}
	spin_unlock_bh(&rs->lock);
	if (mr)
		ib_dereg_mr(mr);
	mutex_unlock(&rs->mr_lock);
}

/*
 * Give the slot back; returns the bytes that landed in the buffer. With
 * fence set (the caller stopped waiting while the peer may still reach
 * the buffer) the connection is fenced first; if the drain does not come
 * (the caller is being killed) the buffer is left to the fence and fence
 * is returned.
 */
static int rs_drecv_finish(struct rs_sock *rs, int slot, int fence)
{
	struct rs_dslot *d = &rs->dslot[slot];
	bool was_full = true, fenced, drained, done;
	struct rs_pin pin;
	u32 n;
	int i;

	if (fence && !READ_ONCE(rs->drained) &&
	    rs_drecv_give_up(rs, slot, fence))
		return fence;
	rs_dslot_inv_fence(rs, d);
	spin_lock_bh(&rs->lock);
	rs_pin_unmap(&d->pin, rs->dev);
	pin = d->pin;
	memset(&d->pin, 0, sizeof(d->pin));
	n = rs->drx.adv[slot].filled;
	for (i = 0; i < RS_ADV_SLOTS; i++)
		was_full &= rs->dslot[i].busy;
	d->busy = false;
	d->orphan = false;
	fenced = rs->dead;
	drained = rs->drained;
	done = !d->registered;
	rs_drx_release(&rs->drx, slot);
	spin_unlock_bh(&rs->lock);
	trace_rdmastream_pin_release(&rs->sk, pin.npages, fenced, drained,
				     done);
	rs_pin_release(&pin);
	/* a receive that found every slot taken may advertise now */
	if (was_full)
		wake_up_interruptible_all(sk_sleep(&rs->sk));
	return fence ? fence : n;
}

/*
 * Receive up to len bytes direct. Returns the bytes received, 0 if the
 * ADVERT died empty (look at the stream buffer again), -EOPNOTSUPP if no
 * ADVERT could go out (wait as usual), or the errno of a timeout or signal.
 */
static int __rs_drecv(struct rs_sock *rs, struct msghdr *msg, u32 len,
		      int flags, long *timeo)
{
	u32 adv_flags = flags & MSG_WAITALL ? RS_ADV_F_WAITALL : 0;
	struct rs_pin pin;
	int slot, err, got, fence;
	bool fenced;
	u32 n, dmax;

	/* the teardown may end direct receives (dmax 0) at any time */
	spin_lock_bh(&rs->lock);
	dmax = rs->dead ? 0 : rs->dmax;
	spin_unlock_bh(&rs->lock);
	if (!dmax)
		return -EOPNOTSUPP;
	rs_dslot_mr_prepare(rs);
	/*
	 * over RLIMIT_MEMLOCK (-ENOBUFS) or in memory the device may not
	 * write (-EPERM) too: the ring takes the bytes
	 */
	got = rs_pin_user(&pin, &msg->msg_iter, min(len, dmax), true);
	if (got == -EPERM) {
		spin_lock_bh(&rs->lock);
		rs->stats.direct_refused++;
		spin_unlock_bh(&rs->lock);
	}
	if (got <= 0)
		return -EOPNOTSUPP;
	if (rs_policy(rs) == RDMASTREAM_POLICY_DYNAMIC &&
	    got < rs_threshold(rs)) {
		rs_pin_release(&pin);
		return -EOPNOTSUPP;
	}
	spin_lock_bh(&rs->lock);
	slot = rs_drecv_post_locked(rs, &pin, adv_flags, &fenced);
	spin_unlock_bh(&rs->lock);
	if (fenced) {
		/* the REG_MR may have gone out: the pages wait for the fence */
		got = rs_drecv_finish(rs, slot, -EIO);
		return got == -EINTR ? got : -EPIPE;
	}
	if (slot < 0) {
		rs_pin_release(&pin);
		return -EOPNOTSUPP;
	}
	err = rs_drecv_wait(rs, slot, timeo);
	fence = rs_drecv_settle(rs, slot);
	if (!fence)
		fence = rs_drecv_invalidate(rs, &rs->dslot[slot]);
	got = rs_drecv_finish(rs, slot, fence);
	/* a socket error is left to rs_recvmsg(), which may have bytes */
	if (got < 0)
		return got;
	n = got;
	if (!err)
		rs_dlearn_direct(&rs->dlearn, n, rs_threshold(rs));
	if (n) {
		iov_iter_advance(&msg->msg_iter, n);
		return n;
	}
	return err;
}

/*
 * rs_drecv() proper is __rs_drecv(); rs->dactive counts the threads inside
 * (under lock_sock(), which they drop while they sleep): a reconnect waits
 * for them before it resets the state they own (rs_connect_start()).
 */
int rs_drecv(struct rs_sock *rs, struct msghdr *msg, u32 len, int flags,
	     long *timeo)
{
	int ret;

	rs->dactive++;
	ret = __rs_drecv(rs, msg, len, flags, timeo);
	rs_dactive_put(rs);
	return ret;
}

/* A DIRECT message: bytes landed in one of our ADVERTs. */
__poll_t rs_drecv_on_direct(struct rs_sock *rs, const struct rs_ctl *m,
			    const struct ib_wc *wc)
{
	u32 flags = be32_to_cpu(m->flags);
	struct rs_dslot *d;
	int slot;

	if (be64_to_cpu(m->seq) != rs->drx.in)
		return EPOLLERR;
	slot = rs_drx_on_direct(&rs->drx, be32_to_cpu(m->id),
				be32_to_cpu(m->len), flags);
	if (slot < 0)
		return EPOLLERR;
	d = &rs->dslot[slot];
	if (wc->wc_flags & IB_WC_WITH_INVALIDATE) {
		/* no MR: our own LOCAL_INV ended it (rs_dslot_inv_fence) */
		if (!(flags & RS_DIR_F_COMPLETE) || !d->mr ||
		    wc->ex.invalidate_rkey != d->mr->rkey)
			return EPOLLERR;
		d->registered = false;
		rs->stats.remote_invs++;
	}
	return rs->drx.adv[slot].state == RS_RADV_LIVE ? 0 :
	       EPOLLIN | EPOLLRDNORM;
}
