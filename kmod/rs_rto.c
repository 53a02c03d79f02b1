// SPDX-License-Identifier: GPL-2.0
/*
 * rdmastream retransmission timeout from the measured round trip: pure C,
 * shared with the unit tests (rs_rto.h says what it is for).
 */
#include "rs_rto.h"

void rs_rtt_sample(struct rs_rtt *r, u32 us)
{
	u32 err;

	if (us > RS_RTT_SAMPLE_MAX_US)
		us = RS_RTT_SAMPLE_MAX_US;
	if (!us)
		us = 1;
	if (!r->valid) {
		/* RFC 6298 2.2: SRTT = R, RTTVAR = R/2 */
		r->srtt_us = us;
		r->rttvar_us = us / 2;
		r->valid = true;
		return;
	}
	/* 2.3: RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|, SRTT = 7/8 SRTT + 1/8 R */
	err = r->srtt_us > us ? r->srtt_us - us : us - r->srtt_us;
	r->rttvar_us = r->rttvar_us - r->rttvar_us / 4 + err / 4;
	r->srtt_us = r->srtt_us - r->srtt_us / 8 + us / 8;
}

u32 rs_rto_exp_us(u32 exp)
{
	return (u32)(((u64)4096 << exp) / 1000) + 1;
}

static u32 rs_rto_clamp(u32 exp)
{
	if (exp < RS_RTO_EXP_MIN)
		return RS_RTO_EXP_MIN;
	if (exp > RS_RTO_EXP_MAX)
		return RS_RTO_EXP_MAX;
	return exp;
}

u32 rs_rto_exp(const struct rs_rtt *r, u32 floor, u32 first)
{
	u64 want;
	u32 exp;

	floor = rs_rto_clamp(floor);
	if (!r->valid)
		return first > floor ? rs_rto_clamp(first) : floor;
	/* RFC 6298 2.3: RTO = SRTT + 4 RTTVAR, in 4.096 us units, rounded up */
	want = (u64)r->srtt_us + 4 * (u64)r->rttvar_us;
	for (exp = floor; exp < RS_RTO_EXP_MAX; exp++)
		if (rs_rto_exp_us(exp) >= want)
			break;
	return exp;
}

/*
 * rdma_rxe has no congestion control: every QP sends what is posted (up
 * to 128 packets unacknowledged, 64 of them in the host's stack) into
 * the one netdev queue of its host. A thousand connections to another
 * host queue seconds of packets there, and a QP whose ack timeout is
 * shorter than that queue goes back N on packets still queued, which
 * lengthens the queue: the connections collapse
 * (docs/performance.md, "Two VMs, 1000 connections"). The timer is fixed
 * when the QP reaches RTS, so a new connection takes a floor that covers
 * the queue its host's connections can build: one exponent more for
 * each doubling past RS_RTO_LOAD_CONNS, never below the device's floor.
 */
u32 rs_rto_load_floor(u32 floor, u32 conns)
{
	u32 exp = floor, n = RS_RTO_LOAD_CONNS;

	while (conns > n && exp < RS_RTO_LOAD_EXP_MAX) {
		exp++;
		n *= 2;
	}
	return exp;
}

/*
 * The QP does not say whether it had to resend, but a sample longer than
 * its ack timeout waited out the timer, so it did: the sample measures a
 * loss, not the path, and is dropped, as Karn's rule drops a resent
 * segment's (lossy links fed such samples to the cache and gave the next
 * connections on a LAN rdma_cm's 1.07 s). Only a connection's first
 * sample (r not valid yet) counts up to four timeouts: a path longer than
 * the cached timeout is learnt so. exp 0: no timeout chosen, keep all.
 */
bool rs_rtt_resent(const struct rs_rtt *r, u32 us, u32 exp)
{
	u32 most;

	if (!exp)
		return false;
	most = rs_rto_exp_us(exp);
	return us > (r->valid ? most : 4 * most);
}
