// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of adaptive receive polling (kmod/rs_spin.c), run in user
 * space: what a receive that must wait spins for, given the delays its
 * socket's earlier waits saw.
 */
#include <stdio.h>

#include "rs_spin.h"
#include "unit.h"

#define US	1000U
#define MAX	(200 * US)

static struct rs_spin fed(u32 n, u64 waited)
{
	struct rs_spin s = { 0 };

	while (n--)
		rs_spin_sample(&s, waited, MAX);
	return s;
}

static void test_off(void)
{
	struct rs_spin s = fed(8, 10 * US);

	CHECK(rs_spin_budget(&s, 0) == 0, "ceiling 0 spins %u",
	      rs_spin_budget(&s, 0));
	s = (struct rs_spin){ 0 };
	CHECK(rs_spin_budget(&s, 0) == 0, "fresh, ceiling 0");
}

static void test_fresh(void)
{
	struct rs_spin s = { 0 };

	CHECK(rs_spin_budget(&s, MAX) == MAX / 2, "fresh socket spins %u",
	      rs_spin_budget(&s, MAX));
}

/* A ping-pong whose replies come after 60 us spins 120 us for them. */
static void test_steady(void)
{
	struct rs_spin s = fed(1, 60 * US);

	CHECK(s.est_ns == 60 * US, "first sample taken whole: %u", s.est_ns);
	CHECK(rs_spin_budget(&s, MAX) == 120 * US, "budget %u",
	      rs_spin_budget(&s, MAX));
	s = fed(1, 150 * US);
	CHECK(rs_spin_budget(&s, MAX) == MAX, "capped: %u",
	      rs_spin_budget(&s, MAX));
}

/* An idle socket stops spinning, and spins again once replies are quick. */
static void test_idle_and_back(void)
{
	struct rs_spin s = fed(20, 60 * US);
	u32 n;

	rs_spin_sample(&s, 5000000000ULL, MAX);	/* 5 s idle */
	CHECK(s.est_ns <= 2 * MAX, "a long wait counts at most 2x: %u",
	      s.est_ns);
	rs_spin_sample(&s, 5000000000ULL, MAX);
	CHECK(rs_spin_budget(&s, MAX) == 0, "after two idle waits: %u",
	      rs_spin_budget(&s, MAX));
	for (n = 0; n < 50 && !rs_spin_budget(&s, MAX); n++)
		rs_spin_sample(&s, 60 * US, MAX);
	CHECK(n > 0 && n <= 4, "spins again after %u quick waits", n);
	s = fed(40, 5000000000ULL);
	for (n = 0; n < 50 && !rs_spin_budget(&s, MAX); n++)
		rs_spin_sample(&s, 60 * US, MAX);
	CHECK(n <= 4, "from a long idle run, back after %u quick waits", n);
}

/* Replies always later than the ceiling: no spinning at all. */
static void test_slow_peer(void)
{
	struct rs_spin s = fed(1, 300 * US);
	int i;

	for (i = 0; i < 100; i++) {
		CHECK(rs_spin_budget(&s, MAX) == 0, "slow peer spins %u",
		      rs_spin_budget(&s, MAX));
		rs_spin_sample(&s, 300 * US, MAX);
	}
}

/* Replies mostly at 50 us, sometimes at 150: keeps spinning. */
static void test_bimodal(void)
{
	struct rs_spin s = { 0 };
	u32 spun = 0;
	int i;

	rng_state = 7;
	for (i = 0; i < 1000; i++) {
		if (rs_spin_budget(&s, MAX))
			spun++;
		rs_spin_sample(&s, rnd(10) < 7 ? 50 * US : 150 * US, MAX);
	}
	CHECK(spun >= 990, "spun on %u of 1000 waits", spun);
}

/* Whatever the delays, the spin stays within the ceiling. */
static void test_random_bounds(void)
{
	struct rs_spin s = { 0 };
	u32 max, b;
	u64 w;
	int i;

	rng_state = 0x5eed;
	for (i = 0; i < 200000; i++) {
		max = rnd(4) ? MAX : rnd(10000001);
		w = rnd(4) ? rnd(2 * MAX) : (u64)rnd(~0U) * rnd(1000);
		rs_spin_sample(&s, w, max);
		b = rs_spin_budget(&s, max);
		if (!CHECK(b <= max, "budget %u over ceiling %u", b, max))
			break;
		if (!CHECK(!b || b == max || b == 2 * s.est_ns,
			   "budget %u, estimate %u, ceiling %u", b, s.est_ns,
			   max))
			break;
	}
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "off", test_off },
		{ "fresh", test_fresh },
		{ "steady", test_steady },
		{ "idle_and_back", test_idle_and_back },
		{ "slow_peer", test_slow_peer },
		{ "bimodal", test_bimodal },
		{ "random_bounds", test_random_bounds },
	};

	return unit_run(tests, ARRAY_SIZE(tests));
}
