// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the ack timeout choice (kmod/rs_rto.c), run in user
 * space: the smoothed round trip a peer's samples give, and the QP ack
 * timeout exponent a new connection to that peer gets.
 */
#include <stdio.h>

#include "rs_rto.h"
#include "unit.h"

#define MS	1000U

/* 4.096 us << exp in us, the way the IB spec defines it (no rounding) */
static double exp_us(u32 exp)
{
	return 4.096 * (double)(1ULL << exp);
}

static struct rs_rtt fed(u32 n, u32 us)
{
	struct rs_rtt r = { 0 };

	while (n--)
		rs_rtt_sample(&r, us);
	return r;
}

/* No sample yet: the caller's first-contact exponent, never below floor. */
static void test_first_contact(void)
{
	struct rs_rtt r = { 0 };

	CHECK(rs_rto_exp(&r, 14, 16) == 16, "first %u", rs_rto_exp(&r, 14, 16));
	CHECK(rs_rto_exp(&r, 18, 16) == 18, "floor above first %u",
	      rs_rto_exp(&r, 18, 16));
	CHECK(rs_rto_exp(&r, 14, 40) == RS_RTO_EXP_MAX, "first clamped %u",
	      rs_rto_exp(&r, 14, 40));
	CHECK(rs_rto_exp(&r, 0, 0) == RS_RTO_EXP_MIN, "floor clamped %u",
	      rs_rto_exp(&r, 0, 0));
}

/* RFC 6298's first sample: SRTT = R, RTTVAR = R / 2. */
static void test_first_sample(void)
{
	struct rs_rtt r = fed(1, 48 * MS);

	CHECK(r.valid && r.srtt_us == 48 * MS && r.rttvar_us == 24 * MS,
	      "srtt %u rttvar %u", r.srtt_us, r.rttvar_us);
	/* 48 + 4 * 24 = 144 ms: 268 ms (exp 16), not 134 ms (15) */
	CHECK(rs_rto_exp(&r, 12, 18) == 16, "exp %u", rs_rto_exp(&r, 12, 18));
}

/* A LAN round trip far below the floor: the floor. */
static void test_floor(void)
{
	struct rs_rtt r = fed(8, 300);

	CHECK(rs_rto_exp(&r, 14, 16) == 14, "exp %u", rs_rto_exp(&r, 14, 16));
	CHECK(rs_rto_exp(&r, 12, 16) == 12, "exp %u", rs_rto_exp(&r, 12, 16));
}

/* Steady samples: RTTVAR decays and the timeout comes down to cover SRTT. */
static void test_steady(void)
{
	struct rs_rtt r = fed(64, 48 * MS);
	u32 exp = rs_rto_exp(&r, 8, 20);

	CHECK(r.srtt_us > 47 * MS && r.srtt_us <= 48 * MS, "srtt %u", r.srtt_us);
	CHECK(r.rttvar_us < MS, "rttvar %u", r.rttvar_us);
	CHECK(exp == 14, "exp %u (67 ms covers 48 ms)", exp);
}

/* Whatever the samples, the timeout covers SRTT + 4 RTTVAR or is the cap. */
static void test_random_cover(void)
{
	for (int seed = 1; seed <= 2000; seed++) {
		struct rs_rtt r = { 0 };
		u32 floor, n, exp;

		rng_state = seed;
		floor = 8 + rnd(12);
		n = 1 + rnd(20);
		while (n--)
			rs_rtt_sample(&r, rnd(rnd(2) ? 2000 : 20000000));
		exp = rs_rto_exp(&r, floor, 18);
		CHECK(exp >= floor && exp <= RS_RTO_EXP_MAX, "seed %d exp %u",
		      seed, exp);
		CHECK(r.srtt_us >= 1 && r.srtt_us <= RS_RTT_SAMPLE_MAX_US,
		      "seed %d srtt %u", seed, r.srtt_us);
		if (exp < RS_RTO_EXP_MAX)
			CHECK(exp_us(exp) >= r.srtt_us + 4.0 * r.rttvar_us,
			      "seed %d exp %u srtt %u rttvar %u", seed, exp,
			      r.srtt_us, r.rttvar_us);
		if (exp > floor)	/* and it is the smallest that does */
			CHECK(exp_us(exp - 1) < r.srtt_us + 4.0 * r.rttvar_us,
			      "seed %d exp %u not minimal", seed, exp);
	}
}

/* The microsecond value reported to users: 4.096 us << exp, rounded up. */
static void test_exp_us(void)
{
	CHECK(rs_rto_exp_us(18) == 1073742, "%u", rs_rto_exp_us(18));
	CHECK(rs_rto_exp_us(14) == 67109, "%u", rs_rto_exp_us(14));
	CHECK(rs_rto_exp_us(RS_RTO_EXP_MAX) >= exp_us(RS_RTO_EXP_MAX),
	      "%u", rs_rto_exp_us(RS_RTO_EXP_MAX));
}

/*
 * Karn: on a LAN (1 ms) under loss, samples that waited out the 268 ms
 * timeout (exp 16) are dropped, so the cache keeps the floor; the rule
 * before (up to four timeouts) fed them in and gave 1.07 s (exp 18). A
 * first sample counts up to four timeouts: a long path is learnt.
 */
static void test_karn(void)
{
	struct rs_rtt r = fed(4, 1 * MS), first = { 0 };
	u32 i, us;

	for (i = 0; i < 200; i++) {
		us = i % 3 ? 1 * MS : 300 * MS + i * MS;
		if (!rs_rtt_resent(&r, us, 16))
			rs_rtt_sample(&r, us);
	}
	CHECK(rs_rto_exp(&r, 16, 16) == 16, "exp %u after loss",
	      rs_rto_exp(&r, 16, 16));
	CHECK(rs_rtt_resent(&r, rs_rto_exp_us(16) + 1, 16), "one past");
	CHECK(!rs_rtt_resent(&r, rs_rto_exp_us(16), 16), "at the timeout");
	CHECK(!rs_rtt_resent(&first, 3 * rs_rto_exp_us(16), 16), "first");
	CHECK(rs_rtt_resent(&first, 4 * rs_rto_exp_us(16) + 1, 16),
	      "first, past four");
	CHECK(!rs_rtt_resent(&r, 5000 * MS, 0), "no timeout yet");
}

/*
 * The load floor: the device's floor up to RS_RTO_LOAD_CONNS connections
 * to other hosts, one exponent per doubling past it, at most 18 (1.07 s,
 * which stopped the two-VM 1000-connection collapse); a floor already
 * above that stays.
 */
static void test_load_floor(void)
{
	static const struct { u32 floor, conns, want; } c[] = {
		{ 16, 0, 16 }, { 16, 1, 16 }, { 16, 64, 16 }, { 16, 65, 17 },
		{ 16, 128, 17 }, { 16, 129, 18 }, { 16, 1000, 18 },
		{ 16, 0xffffffffU, 18 }, { 14, 64, 14 }, { 14, 65, 15 },
		{ 14, 256, 16 }, { 14, 512, 17 }, { 14, 513, 18 },
		{ 14, 1000, 18 }, { 8, 0xffffffffU, 18 }, { 19, 1000, 19 },
		{ 18, 1000, 18 },
	};
	u32 i, got;

	for (i = 0; i < ARRAY_SIZE(c); i++) {
		got = rs_rto_load_floor(c[i].floor, c[i].conns);
		CHECK(got == c[i].want, "floor %u, %u conns: %u, want %u",
		      c[i].floor, c[i].conns, got, c[i].want);
	}
	/* what a new peer then gets: the load floor over ack_timeout_first */
	{
		struct rs_rtt r = { 0 };

		got = rs_rto_exp(&r, rs_rto_load_floor(16, 1000), 16);
		CHECK(got == 18, "first contact under load %u", got);
	}
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "first_contact", test_first_contact },
		{ "first_sample", test_first_sample },
		{ "floor", test_floor },
		{ "steady", test_steady },
		{ "random_cover", test_random_cover },
		{ "exp_us", test_exp_us },
		{ "karn", test_karn },
		{ "load_floor", test_load_floor },
	};

	return unit_run(tests, ARRAY_SIZE(tests));
}
