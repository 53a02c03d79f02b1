/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the user-space unit tests share: a CHECK that reports and counts
 * failures, and a small seeded random generator (xorshift64). Each test
 * is one translation unit, so the state below is per test program.
 */
#ifndef RS_UNIT_H
#define RS_UNIT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static int failures;
static unsigned long long checks;

/* True when cond holds; otherwise says where and why, and counts it. */
#define CHECK(cond, ...) check(!!(cond), __LINE__, #cond, __VA_ARGS__)

static inline bool check(bool ok, int line, const char *what,
			 const char *fmt, ...)
{
	va_list ap;

	checks++;
	if (ok)
		return true;
	failures++;
	printf("# FAIL line %d: %s: ", line, what);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	return false;
}

static u64 rng_state;

/* A number below n (0 for n == 0). Seed rng_state (non-zero) first. */
static inline u32 rnd(u32 n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return n ? (u32)(rng_state % n) : 0;
}

struct unit_test {
	const char *name;
	void (*fn)(void);	/* fails by CHECKs that do not hold */
};

/* Run tests in order as TAP, with the "# unit:" summary; exit status. */
static inline int unit_run(const struct unit_test *tests, size_t n)
{
	int passed = 0, failed = 0, before;

	printf("TAP version 13\n1..%zu\n", n);
	for (size_t i = 0; i < n; i++) {
		before = failures;
		tests[i].fn();
		printf("%s %zu %s\n", failures != before ? "not ok" : "ok",
		       i + 1, tests[i].name);
		if (failures != before)
			failed++;
		else
			passed++;
	}
	printf("# unit: %d passed, %d failed (%llu checks)\n", passed,
	       failed, checks);
	return failed ? 1 : 0;
}

#endif /* RS_UNIT_H */
