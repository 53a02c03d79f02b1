/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Tracepoints of rdmastream: connection states, rdma_cm events, failed
 * completions and posts, aborts, teardowns, pinned pages released and
 * send rings resized. Enable with
 *	echo 1 > /sys/kernel/tracing/events/rdmastream/enable
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM rdmastream

#if !defined(RS_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define RS_TRACE_H

#include <linux/tracepoint.h>
#include <net/sock.h>
#include <net/tcp_states.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#define rs_show_state(s) __print_symbolic(s,			\
	{ TCP_ESTABLISHED, "ESTABLISHED" },			\
	{ TCP_SYN_SENT, "SYN_SENT" },				\
	{ TCP_SYN_RECV, "SYN_RECV" },				\
	{ TCP_CLOSE, "CLOSE" },					\
	{ TCP_CLOSE_WAIT, "CLOSE_WAIT" },			\
	{ TCP_LISTEN, "LISTEN" })

/* names must live in the event's own format, not in another module */
#define rs_show_cm_event(e) __print_symbolic(e,			\
	{ RDMA_CM_EVENT_ADDR_RESOLVED, "ADDR_RESOLVED" },	\
	{ RDMA_CM_EVENT_ADDR_ERROR, "ADDR_ERROR" },		\
	{ RDMA_CM_EVENT_ROUTE_RESOLVED, "ROUTE_RESOLVED" },	\
	{ RDMA_CM_EVENT_ROUTE_ERROR, "ROUTE_ERROR" },		\
	{ RDMA_CM_EVENT_CONNECT_REQUEST, "CONNECT_REQUEST" },	\
	{ RDMA_CM_EVENT_CONNECT_ERROR, "CONNECT_ERROR" },	\
	{ RDMA_CM_EVENT_UNREACHABLE, "UNREACHABLE" },		\
	{ RDMA_CM_EVENT_REJECTED, "REJECTED" },			\
	{ RDMA_CM_EVENT_ESTABLISHED, "ESTABLISHED" },		\
	{ RDMA_CM_EVENT_DISCONNECTED, "DISCONNECTED" },		\
	{ RDMA_CM_EVENT_DEVICE_REMOVAL, "DEVICE_REMOVAL" },	\
	{ RDMA_CM_EVENT_ADDR_CHANGE, "ADDR_CHANGE" },		\
	{ RDMA_CM_EVENT_TIMEWAIT_EXIT, "TIMEWAIT_EXIT" })

TRACE_EVENT(rdmastream_state,
	TP_PROTO(const struct sock *sk, int state),
	TP_ARGS(sk, state),
	TP_STRUCT__entry(
		__field(const void *, sk)
		__field(int, old)
		__field(int, state)
	),
	TP_fast_assign(
		__entry->sk = sk;
		__entry->old = sk->sk_state;
		__entry->state = state;
	),
	TP_printk("sk=%p %s -> %s", __entry->sk,
		  rs_show_state(__entry->old), rs_show_state(__entry->state))
);

TRACE_EVENT(rdmastream_cm_event,
	TP_PROTO(const struct sock *sk, const struct rdma_cm_event *ev),
	TP_ARGS(sk, ev),
	TP_STRUCT__entry(
		__field(const void *, sk)
		__field(int, event)
		__field(int, status)
	),
	TP_fast_assign(
		__entry->sk = sk;
		__entry->event = ev->event;
		__entry->status = ev->status;
	),
	TP_printk("sk=%p %s status=%d", __entry->sk,
		  rs_show_cm_event(__entry->event), __entry->status)
);

TRACE_EVENT(rdmastream_wc_error,
	TP_PROTO(const struct sock *sk, const struct ib_wc *wc),
	TP_ARGS(sk, wc),
	TP_STRUCT__entry(
		__field(const void *, sk)
		__field(int, status)
		__field(int, opcode)
	),
	TP_fast_assign(
		__entry->sk = sk;
		__entry->status = wc->status;
		__entry->opcode = wc->opcode;
	),
	TP_printk("sk=%p status=%d opcode=%d", __entry->sk,
		  __entry->status, __entry->opcode)
);

TRACE_EVENT(rdmastream_abort,
	TP_PROTO(const struct sock *sk, int err, const void *caller),
	TP_ARGS(sk, err, caller),
	TP_STRUCT__entry(
		__field(const void *, sk)
		__field(int, err)
		__field(const void *, caller)
	),
	TP_fast_assign(
		__entry->sk = sk;
		__entry->err = err;
		__entry->caller = caller;
	),
	TP_printk("sk=%p err=%d from %pS", __entry->sk, __entry->err,
		  __entry->caller)
);

TRACE_EVENT(rdmastream_teardown,
	TP_PROTO(const struct sock *sk, bool fin_rcvd, bool fin_done),
	TP_ARGS(sk, fin_rcvd, fin_done),
	TP_STRUCT__entry(
		__field(const void *, sk)
		__field(int, err)
		__field(bool, fin_rcvd)
		__field(bool, fin_done)
	),
	TP_fast_assign(
		__entry->sk = sk;
		__entry->err = sk->sk_err;
		__entry->fin_rcvd = fin_rcvd;
		__entry->fin_done = fin_done;
	),
	TP_printk("sk=%p err=%d fin_rcvd=%d fin_done=%d", __entry->sk,
		  __entry->err, __entry->fin_rcvd, __entry->fin_done)
);

TRACE_EVENT(rdmastream_post_fail,
	TP_PROTO(const struct sock *sk, int chain, int err),
	TP_ARGS(sk, chain, err),
	TP_STRUCT__entry(
		__field(const void *, sk)
		__field(int, chain)
		__field(int, err)
	),
	TP_fast_assign(
		__entry->sk = sk;
		__entry->chain = chain;
		__entry->err = err;
	),
	TP_printk("sk=%p chain=%d err=%d", __entry->sk, __entry->chain,
		  __entry->err)
);

/*
 * User pages of a direct transfer go back to their owner. fenced: the
 * connection had failed; drained: the QP was drained first; hca_done: the
 * transfer's own work requests had completed. Releasing pages that the
 * HCA may still reach (fenced without drained or hca_done) is a bug.
 */
TRACE_EVENT(rdmastream_pin_release,
	TP_PROTO(const struct sock *sk, u32 pages, bool fenced, bool drained,
		 bool hca_done),
	TP_ARGS(sk, pages, fenced, drained, hca_done),
	TP_STRUCT__entry(
		__field(const void *, sk)
		__field(u32, pages)
		__field(bool, fenced)
		__field(bool, drained)
		__field(bool, hca_done)
	),
	TP_fast_assign(
		__entry->sk = sk;
		__entry->pages = pages;
		__entry->fenced = fenced;
		__entry->drained = drained;
		__entry->hca_done = hca_done;
	),
	TP_printk("sk=%p pages=%u fenced=%d drained=%d hca_done=%d",
		  __entry->sk, __entry->pages, __entry->fenced,
		  __entry->drained, __entry->hca_done)
);

/* A ring's new size in bytes. */
DECLARE_EVENT_CLASS(rdmastream_resize,
	TP_PROTO(const struct sock *sk, u32 size),
	TP_ARGS(sk, size),
	TP_STRUCT__entry(
		__field(const void *, sk)
		__field(u32, size)
	),
	TP_fast_assign(
		__entry->sk = sk;
		__entry->size = size;
	),
	TP_printk("sk=%p size=%u", __entry->sk, __entry->size)
);

/* The send ring grew, or shrank back, to size bytes (rs_txgrow.c). */
DEFINE_EVENT(rdmastream_resize, rdmastream_tx_resize,
	TP_PROTO(const struct sock *sk, u32 size),
	TP_ARGS(sk, size)
);

/* A stream buffer of size bytes is offered to the peer (rs_rxgrow.c). */
DEFINE_EVENT(rdmastream_resize, rdmastream_rx_resize,
	TP_PROTO(const struct sock *sk, u32 size),
	TP_ARGS(sk, size)
);

/* A connection's QP ack timeout (4.096 us << exp) and retry count. */
TRACE_EVENT(rdmastream_ack_timeout,
	TP_PROTO(const struct sock *sk, u32 exp, u32 retry, u32 srtt_us),
	TP_ARGS(sk, exp, retry, srtt_us),
	TP_STRUCT__entry(
		__field(const void *, sk)
		__field(u32, exp)
		__field(u32, retry)
		__field(u32, srtt_us)
	),
	TP_fast_assign(
		__entry->sk = sk;
		__entry->exp = exp;
		__entry->retry = retry;
		__entry->srtt_us = srtt_us;
	),
	TP_printk("sk=%p exp=%u retry=%u srtt_us=%u", __entry->sk,
		  __entry->exp, __entry->retry, __entry->srtt_us)
);

#endif /* RS_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE rs_trace
#include <trace/define_trace.h>
