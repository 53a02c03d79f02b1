/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rdmastream retransmission timeout: the RC QP's ack timeout, chosen per
 * connection from the round trip measured to its peer.
 *
 * An RC QP recovers a lost packet that no later packet reveals (the tail
 * of a burst, a lost acknowledgement) only when its ack timer fires, and
 * the timer is fixed when the QP reaches RTS: 4.096 us << exp, exp from 0
 * to 31 (IB spec, C9-141). So the timeout of a new connection comes from
 * what earlier connections measured to the same peer, as TCP seeds a new
 * connection's RTO from its destination cache (tcp_metrics): a smoothed
 * round trip and its mean deviation, updated as TCP updates SRTT and
 * RTTVAR (RFC 6298), and a timeout that covers SRTT + 4 RTTVAR, no lower
 * than a floor that is safe for the device and no higher than RTO_EXP_MAX.
 * A peer seen for the first time gets the caller's "first" exponent.
 *
 * Pure C with no kernel dependencies, shared with the unit tests. The
 * caller serialises access.
 */
#ifndef RS_RTO_H
#define RS_RTO_H

#include "rs_proto.h"

/* exponents rdma_set_ack_timeout() takes from us: 1 ms .. 4.3 s */
#define RS_RTO_EXP_MIN	8
#define RS_RTO_EXP_MAX	20
/*
 * The load floor (rs_rto_load_floor()): up to RS_RTO_LOAD_CONNS
 * connections over a device without congestion control to other hosts,
 * the device's floor; each doubling beyond, one exponent more (twice the
 * timeout), up to RS_RTO_LOAD_EXP_MAX (1.07 s).
 */
#define RS_RTO_LOAD_CONNS	64
#define RS_RTO_LOAD_EXP_MAX	18
/* a round trip sample above this (s) is clamped: a stalled handshake */
#define RS_RTT_SAMPLE_MAX_US	(10U * 1000 * 1000)

struct rs_rtt {
	u32 srtt_us;	/* smoothed round trip */
	u32 rttvar_us;	/* smoothed mean deviation of the round trip */
	bool valid;	/* at least one sample */
};

/* One round trip measured, in microseconds. */
void rs_rtt_sample(struct rs_rtt *r, u32 us);
/* The ack timeout exponent for a QP to a peer with round trip r. */
u32 rs_rto_exp(const struct rs_rtt *r, u32 floor, u32 first);
/* The floor for a new QP when the host has conns such connections. */
u32 rs_rto_load_floor(u32 floor, u32 conns);
/* 4.096 us << exp, in microseconds (rounded up). */
u32 rs_rto_exp_us(u32 exp);
/* Is a sample of us on a QP with ack timeout exp one to drop (Karn)? */
bool rs_rtt_resent(const struct rs_rtt *r, u32 us, u32 exp);

#endif /* RS_RTO_H */
