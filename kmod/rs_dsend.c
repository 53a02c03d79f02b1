// SPDX-License-Identifier: GPL-2.0
/*
 * Direct sends: when the peer has advertised a receive buffer and the
 * protocol core finds the ADVERT fresh, sendmsg() writes the next bytes of
 * the stream straight into it. Up to the QP's inline limit the bytes are
 * copied into the work request; beyond it the caller's pages are pinned
 * and gathered by the HCA (zero copy), and sendmsg() returns only after
 * the write has completed, so the caller may reuse its buffer at once.
 *
 * Each direct transfer is one or more RDMA WRITEs followed, in the same
 * post, by a DIRECT message. When the transfer fills the ADVERT (always,
 * unless it was a MSG_WAITALL one) the DIRECT is a SEND WITH INVALIDATE
 * of the ADVERT's rkey, so the receiver's buffer is closed to us by the
 * time the receiver learns that it is full.
 */
#include <linux/slab.h>
#include <linux/uio.h>

#include "rs.h"
#include "../uapi/linux/rdmastream.h"

int rs_policy(const struct rs_sock *rs)
{
	return READ_ONCE(rs->policy);
}

u32 rs_threshold(const struct rs_sock *rs)
{
	u32 t = READ_ONCE(rs->dthresh);

	return t ? t : max(READ_ONCE(rs_default_threshold), 1U);
}

/* An ADVERT arrived; false if it breaks the protocol. */
bool rs_dsend_on_advert(struct rs_sock *rs, const struct rs_ctl *m)
{
	struct rs_advert a = {
		.seq = be64_to_cpu(m->seq),
		.addr = be64_to_cpu(m->addr),
		.rkey = be32_to_cpu(m->rkey),
		.len = be32_to_cpu(m->len),
		.phase = be32_to_cpu(m->phase),
		.id = be32_to_cpu(m->id),
		.flags = be32_to_cpu(m->flags) & RS_ADV_F_WAITALL,
	};

	if (a.len > (1U << 30))
		return false;
	return rs_dtx_on_advert(&rs->dtx, &a);
}

/*
 * The QP is drained: release the HCA's view of in-flight send pages, and
 * take the sends whose senders gave up (they are freed by the caller,
 * outside rs->lock, with rs_zsends_free()).
 */
void rs_zsends_unmap_locked(struct rs_sock *rs, struct list_head *orphans)
{
	struct rs_zsend *z, *tmp;

	list_for_each_entry_safe(z, tmp, &rs->zsends, node) {
		rs_pin_unmap(&z->pin, rs->dev);
		if (z->orphan)
			list_move(&z->node, orphans);
	}
}

static void rs_zsend_free(struct rs_sock *rs, struct rs_zsend *z,
			  bool fenced, bool drained)
{
	trace_rdmastream_pin_release(&rs->sk, z->pin.npages, fenced, drained,
				     z->wait.done);
	rs_pin_release(&z->pin);
	kfree(z);
}

/* Free the orphans rs_zsends_unmap_locked() took, after the drain. */
void rs_zsends_free(struct rs_sock *rs, struct list_head *orphans)
{
	struct rs_zsend *z, *tmp;

	list_for_each_entry_safe(z, tmp, orphans, node) {
		list_del(&z->node);
		rs_zsend_free(rs, z, true, true);
	}
}

/*
 * Bytes one direct transfer may cover: its WRITEs plus the DIRECT must fit
 * the rs->dsend_wrs send slots that rs_dsend_pick_locked() asks for, at
 * max_sge pages per WRITE (an unaligned range touches one page more).
 */
static u32 rs_dsend_max(const struct rs_sock *rs)
{
	return (rs->dsend_pages - 1) << PAGE_SHIFT;
}

/*
 * 1 and a copy of the ADVERT to write into when one is usable now, 0 when
 * there is none (send indirect), -EAGAIN when one waits for send queue
 * space or a credit.
 */
static int rs_dsend_pick_locked(struct rs_sock *rs, struct rs_advert *snap)
{
	u32 returns = min_t(u32, rs->flow.owed, RS_IMM_CREDIT_MAX);
	struct rs_advert *a;

	/* queued indirect bytes come first in the stream */
	if (!rs->transport || rs->dead || !rs->flow.ready ||
	    rs_flow_tx_unsent(&rs->flow))
		return 0;
	a = rs_dtx_pick(&rs->dtx);
	if (!a)
		return 0;
	if (rs_sq_free(rs) < rs->dsend_wrs ||
	    !rs_flow_may_send(&rs->flow, returns))
		return -EAGAIN;
	*snap = *a;
	return 1;
}

/* Can a sender waiting for resources or an ADVERT go on? */
bool rs_dsend_ready(struct rs_sock *rs)
{
	struct rs_advert snap;
	int ret;

	spin_lock_bh(&rs->lock);
	ret = rs_dsend_pick_locked(rs, &snap);
	spin_unlock_bh(&rs->lock);
	return ret > 0;
}

/* The DIRECT message that follows the WRITEs. */
static void rs_dsend_msg(struct rs_sock *rs, struct rs_send *s,
			 struct ib_send_wr *wr, struct ib_sge *sge,
			 const struct rs_advert *a, u32 n, bool done)
{
	u32 credits = rs_flow_take_owed(&rs->flow);

	rs_ctl_fill(rs, s->msg, RS_MSG_DIRECT, credits);
	s->msg->len = cpu_to_be32(n);
	s->msg->seq = cpu_to_be64(rs->dtx.seq);
	s->msg->id = cpu_to_be32(a->id);
	s->msg->flags = cpu_to_be32(done ? RS_DIR_F_COMPLETE : 0);
	rs_ctl_sge(rs, s, sge, wr);
	if (done) {
		wr->opcode = IB_WR_SEND_WITH_INV;
		wr->ex.invalidate_rkey = a->rkey;
	} else {
		wr->opcode = IB_WR_SEND;
	}
}

/* Gather the DMA-mapped pages into WRITEs of at most max_sge entries. */
static u32 rs_dsend_writes(struct rs_sock *rs, struct rs_pin *pin,
			   struct ib_rdma_wr *wr, struct ib_sge *sge,
			   const struct rs_advert *a)
{
	u64 raddr = a->addr + a->filled;
	struct scatterlist *sg;
	u32 nwr = 0, i;

	for_each_sg(pin->sgt.sgl, sg, pin->nents, i) {
		struct ib_rdma_wr *w = &wr[i / rs->max_sge];

		if (i % rs->max_sge == 0) {
			memset(w, 0, sizeof(*w));
			w->wr.opcode = IB_WR_RDMA_WRITE;
			w->wr.sg_list = &sge[i];
			w->remote_addr = raddr;
			w->rkey = a->rkey;
			if (nwr)
				wr[nwr - 1].wr.next = &w->wr;
			nwr++;
		}
		sge[i].addr = sg_dma_address(sg);
		sge[i].length = sg_dma_len(sg);
		sge[i].lkey = rs->pd->local_dma_lkey;
		w->wr.num_sge++;
		raddr += sg_dma_len(sg);
	}
	return nwr;
}

struct rs_dsrc {
	const void *buf;	/* inline bytes, or */
	struct rs_zsend *z;	/* pinned pages */
	struct ib_rdma_wr *wr;	/* room for the WRITEs of z */
	struct ib_sge *sge;
	u32 len;
};

/*
 * Post one direct transfer into the ADVERT snap was taken of. 0 when the
 * ADVERT is gone or changed meanwhile (the caller looks again), -EAGAIN
 * when resources ran out, -EIO when the QP failed.
 */
static int rs_dsend_post_locked(struct rs_sock *rs,
				const struct rs_advert *snap,
				struct rs_dsrc *src)
{
	struct ib_rdma_wr one = {};
	struct ib_sge isge, msge;
	struct ib_send_wr msg = {};
	struct ib_rdma_wr *wr = src->z ? src->wr : &one;
	struct rs_advert snapnow;
	u32 nwr = 1;
	bool done;
	int ok;

	ok = rs_dsend_pick_locked(rs, &snapnow);
	if (ok < 0)
		return -EAGAIN;
	if (!ok || snapnow.id != snap->id || snapnow.filled != snap->filled)
		return 0;
	if (src->z) {
		if (rs_pin_map(&src->z->pin, rs->dev))
			return -EAGAIN;
		nwr = rs_dsend_writes(rs, &src->z->pin, wr, src->sge, snap);
		if (WARN_ON_ONCE(nwr + 1 > rs->dsend_wrs)) {
			rs_pin_unmap(&src->z->pin, rs->dev);
			rs_abort_locked(rs, EPROTO);
			return -EAGAIN;
		}
	} else {
		isge.addr = (uintptr_t)src->buf;
		isge.length = src->len;
		isge.lkey = 0;
		one.wr.opcode = IB_WR_RDMA_WRITE;
		one.wr.send_flags = IB_SEND_INLINE;
		one.wr.sg_list = &isge;
		one.wr.num_sge = 1;
		one.remote_addr = snap->addr + snap->filled;
		one.rkey = snap->rkey;
	}
	wr[nwr - 1].wr.next = &msg;
	done = !(snap->flags & RS_ADV_F_WAITALL) ||
	       snap->filled + src->len == snap->len;
	rs_dsend_msg(rs, &rs->sends[(rs->sq_posted + nwr) % RS_SQ_DEPTH],
		     &msg, &msge, snap, src->len, done);
	if (rs_post_chain(rs, &wr[0].wr, src->z ? &src->z->wait : NULL,
			  src->z ? RS_CHAIN_ZCOPY : RS_CHAIN_INLINE))
		return -EIO;	/* fenced: the chain's pages are the fence's */
	rs_flow_msg_sent(&rs->flow);
	rs_flow_window_sent(&rs->flow);
	rs->stats.ctrl_sent++;
	rs->stats.writes += nwr;
	if (src->z)
		rs->stats.zcopy_sends++;
	else
		rs->stats.inline_writes++;
	rs_dtx_direct_sent(&rs->dtx, src->len);
	return src->len;
}

static long rs_dsend_inline(struct rs_sock *rs, struct msghdr *msg, u32 n,
			    const struct rs_advert *snap)
{
	u8 buf[RS_MAX_INLINE];
	struct rs_dsrc src = { .buf = buf, .len = n };
	int ret;

	if (!copy_from_iter_full(buf, n, &msg->msg_iter))
		return -EFAULT;
	spin_lock_bh(&rs->lock);
	ret = rs_dsend_post_locked(rs, snap, &src);
	spin_unlock_bh(&rs->lock);
	if (ret <= 0)
		iov_iter_revert(&msg->msg_iter, n);
	return ret;
}

/*
 * z's work requests are over, or the QP is drained: the pages are the
 * caller's again. Returns 0 if the transfer succeeded, else -EPIPE.
 */
static int rs_zsend_end(struct rs_sock *rs, struct rs_zsend *z)
{
	bool fenced, drained;

	spin_lock_bh(&rs->lock);
	list_del(&z->node);
	rs_pin_unmap(&z->pin, rs->dev);
	fenced = rs->dead;
	drained = rs->drained;
	spin_unlock_bh(&rs->lock);
	trace_rdmastream_pin_release(&rs->sk, z->pin.npages, fenced, drained,
				     z->wait.done);
	return z->wait.done && z->wait.status == IB_WC_SUCCESS ? 0 : -EPIPE;
}

/* Give up on z: fence; z stays the fence's unless the drain came. */
static bool rs_zsend_give_up(struct rs_sock *rs, struct rs_zsend *z, int err)
{
	bool orphan;

	if (!rs_fence(rs, err)) {
		spin_lock_bh(&rs->lock);
		orphan = !rs->drained;
		z->orphan = orphan;
		spin_unlock_bh(&rs->lock);
		/* an orphan is the teardown's now: not to be touched again */
		if (orphan)
			return true;
	}
	rs_zsend_end(rs, z);
	return false;
}

/*
 * Wait until the HCA is done with z's pages: bounded by RS_DIRECT_TIMEOUT
 * without a send completion (normally microseconds; a peer that stops acknowledging or posting
 * receives makes the QP fail well before), and cut short only by a fatal
 * signal. A sender that stops waiting fences the connection (design.md,
 * "The fence"). Returns 0 or -EPIPE when z is the caller's again, else
 * -ETIMEDOUT or -EINTR (z may then be the fence's: *orphan).
 */
static int rs_zsend_wait(struct rs_sock *rs, struct rs_zsend *z,
			 bool *orphan)
{
	long left = rs_dwait_progress(rs, READ_ONCE(z->wait.done) ||
				      READ_ONCE(rs->drained),
				      RS_DIRECT_TIMEOUT);

	*orphan = false;
	if (left > 0)
		return rs_zsend_end(rs, z);
	*orphan = rs_zsend_give_up(rs, z, left < 0 ? ECONNRESET : ETIMEDOUT);
	return left < 0 ? -EINTR : -ETIMEDOUT;
}

/* Post z's pages into the ADVERT; > 0 bytes posted, else as post_locked. */
static int rs_zsend_post(struct rs_sock *rs, struct rs_zsend *z,
			 const struct rs_advert *snap)
{
	unsigned int nents = z->pin.sgt.orig_nents;
	struct rs_dsrc src = { .z = z, .len = z->pin.len };
	int ret = -ENOMEM;

	src.wr = kcalloc(DIV_ROUND_UP(nents, rs->max_sge), sizeof(*src.wr),
			 GFP_KERNEL);
	src.sge = kcalloc(nents, sizeof(*src.sge), GFP_KERNEL);
	if (src.wr && src.sge) {
		spin_lock_bh(&rs->lock);
		ret = rs_dsend_post_locked(rs, snap, &src);
		if (ret > 0 || ret == -EIO)
			list_add(&z->node, &rs->zsends);
		else
			rs_pin_unmap(&z->pin, rs->dev);
		spin_unlock_bh(&rs->lock);
	}
	/* the device has copied the work requests */
	kfree(src.wr);
	kfree(src.sge);
	return ret;
}

static long __rs_dsend_zcopy(struct rs_sock *rs, struct msghdr *msg, u32 n,
			     const struct rs_advert *snap)
{
	bool orphan = false;
	struct rs_zsend *z;
	int ret, err;

	z = kzalloc(sizeof(*z), GFP_KERNEL);
	if (!z)
		return -ENOMEM;
	ret = rs_pin_user(&z->pin, &msg->msg_iter, n, false);
	if (ret < 0) {
		kfree(z);
		return ret == -EOPNOTSUPP ? -EFAULT : ret;
	}
	ret = rs_zsend_post(rs, z, snap);
	if (ret == -EIO) {
		/* part of the chain may run: the pages wait for the fence */
		orphan = rs_zsend_give_up(rs, z, ECONNRESET);
	} else if (ret > 0) {
		err = rs_zsend_wait(rs, z, &orphan);
		if (!err)
			iov_iter_advance(&msg->msg_iter, ret);
		else
			ret = err;
	}
	if (orphan)
		return ret;
	rs_pin_release(&z->pin);
	kfree(z);
	return ret;
}

/* Counted in rs->dactive, as rs_drecv() is. */
static long rs_dsend_zcopy(struct rs_sock *rs, struct msghdr *msg, u32 n,
			   const struct rs_advert *snap)
{
	bool counted;
	long ret;

	rs->dactive++;
	counted = rs_budget_direct_start(rs);
	ret = __rs_dsend_zcopy(rs, msg, n, snap);
	rs_budget_direct_end(rs, counted);
	rs_dactive_put(rs);
	return ret;
}

/*
 * Send up to len bytes direct. Returns the bytes sent, 0 when no ADVERT is
 * usable (the caller sends indirect or waits for one), or an errno.
 */
long rs_dsend(struct rs_sock *rs, struct msghdr *msg, u32 len, long *timeo)
{
	struct sock *sk = &rs->sk;
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	struct rs_advert snap;
	long ret;
	u32 n;

	for (;;) {
		/* no ADVERT queued (the common case): nothing to lock for */
		if (!READ_ONCE(rs->dtx.count))
			return 0;
		spin_lock_bh(&rs->lock);
		ret = rs_dsend_pick_locked(rs, &snap);
		spin_unlock_bh(&rs->lock);
		if (!ret)
			return 0;
		if (ret > 0) {
			n = min_t(u32, len, snap.len - snap.filled);
			n = min_t(u32, n, rs_dsend_max(rs));
			n = min_t(u32, n, rs_budget_cap(rs) ?: n);
			if (n <= rs->max_inline)
				ret = rs_dsend_inline(rs, msg, n, &snap);
			else
				ret = rs_dsend_zcopy(rs, msg, n, &snap);
			/* the error stays for rs_sendmsg() to report */
			if (ret == -EIO || ret == -ETIMEDOUT)
				return -EPIPE;
			if (ret != 0 && ret != -EAGAIN)
				return ret;
			if (!ret)
				continue;
		}
		/* a non-blocking send goes indirect rather than fail */
		if (!*timeo)
			return 0;
		ret = rs_may_wait(*timeo);
		if (ret)
			return ret;
		add_wait_queue(sk_sleep(sk), &wait);
		rs_nospace(sk);
		sk_wait_event(sk, timeo, rs_dsend_ready(rs) ||
			      READ_ONCE(rs->dead) || READ_ONCE(sk->sk_err),
			      &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
		if (READ_ONCE(rs->dead) || READ_ONCE(sk->sk_err))
			return 0;
	}
}
