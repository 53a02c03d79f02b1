# SPDX-License-Identifier: GPL-2.0
#
# make          build the module (and the test and bench programs)
# make check    install what is missing, build, run every test in QEMU VMs
#               on Debian's 6.1 and the BPF switch's on the newest 7.x,
#               and build the module W=1 warning-free for 5.10, 6.12 and
#               7.x too (RS_CHECK_LINES; KVER=<release>: only that
#               kernel, docs/kernels.md)
# make check-kernels  make check on Debian's 5.10, 6.1, 6.12 and newest
#               7.x, fetched and cached by scripts/kernels (docs/kernels.md)
# make module-kernels  only the W=1 warning-free module build for all four
# make check-debug  the same on a debug kernel (KASAN, KFENCE, lockdep,
#               kmemleak, UBSAN, ...) built once per machine from
#               linux-source-6.1 (scripts/debug-kernel, ~20 min the first
#               time); results in build/check-debug/
# make demo     install what is missing, build, show rdmastream beside TCP
# make eval     install what is missing, build, run the transfer policy
#               evaluation in a VM (bench/eval; results in bench/results/)
# make bench    install what is missing, build, run rdmastream beside TCP,
#               rsockets, SMC-R and raw verbs in one VM and in two
#               (bench/bench; results in bench/results/bench.*;
#               KVER=<release>: on another Debian kernel, docs/smc-r.md)
# make bench-lossy  the loss and delay table: throughput of rdmastream, TCP
#               and rsockets between two VMs under netem (bench/lossy;
#               results in bench/results/lossy/; docs/lossy-links.md)
# make bench-build  build only the benchmark program (build/bench/rsbench)
# make man-check  render man/rdmastream.7 with every groff warning on; fails
#               on any warning (scripts/check runs it as one case)
# make preload  build rdmastream-run and its library (build/preload/;
#               docs/preload.md)
# make deb      build the rdmastream-dkms and rdmastream-tools Debian
#               packages into build/deb/ and lintian them (scripts/mkdeb;
#               docs/packaging.md)
# make tools    build rsstat, the socket lister and counters (build/tools/;
#               docs/diag.md)
#
KVER	?= $(shell scripts/kver 2>/dev/null)
# KVER may name a kernel of another Debian release that scripts/kernels
# fetched (docs/kernels.md): its headers are in the cache, and it may be
# built in that release's chroot (KBUILD_IN).
KDIR	?= $(shell scripts/kernels kdir $(KVER) 2>/dev/null || \
		echo /usr/src/linux-headers-$(KVER))
KBUILD_IN = scripts/kernels exec $(KVER) --
BUILD	:= $(CURDIR)/build
# make check builds in parallel, one job a CPU
JOBS	?= $(shell nproc)
KSRC_TAR ?= /usr/src/linux-source-6.1.tar.xz
KSRC	:= $(BUILD)/ksrc
KSFT_DIR := $(KSRC)/tools/testing/selftests

.PHONY: all module selftests bench bench-lossy bench-build unit deps ksrc check \
	check-unit check-vm check-debug demo eval checkpatch clean \
	check-kernels module-kernels \
	man-check preload tools deb

all: module selftests bench-build preload tools

module:
	$(KBUILD_IN) $(MAKE) -C $(KDIR) M=$(CURDIR) modules

deps:
	scripts/install-deps

# The kselftest harness and checkpatch come from Debian's kernel source.
$(KSRC)/.stamp: $(KSRC_TAR)
	mkdir -p $(KSRC)
	tar -C $(KSRC) --strip-components=1 -xf $(KSRC_TAR) \
		linux-source-6.1/tools/testing/selftests/kselftest_harness.h \
		linux-source-6.1/tools/testing/selftests/kselftest.h \
		linux-source-6.1/scripts/checkpatch.pl \
		linux-source-6.1/scripts/spelling.txt \
		linux-source-6.1/scripts/const_structs.checkpatch
	touch $@

ksrc: $(KSRC)/.stamp

selftests: ksrc
	$(MAKE) -C selftests KSFT_DIR=$(KSFT_DIR) OUT=$(BUILD)/selftests

preload:
	$(MAKE) -C preload OUT=$(BUILD)/preload

tools:
	$(MAKE) -C tools OUT=$(BUILD)/tools

deb:
	scripts/mkdeb --lintian

bench-build:
	$(MAKE) -C bench OUT=$(BUILD)/bench

unit:
	$(MAKE) -C selftests/unit OUT=$(BUILD)/unit

# make check KVER=<release>: the same on another Debian kernel, fetched
# by scripts/kernels if it is not the host's (docs/kernels.md). Plain
# make check builds the module W=1 for every kernel line and runs the
# suite on RS_CHECK_LINES: all of it on 6.1, and on the newest kernel the
# BPF switch's test (selftests/switch.sh, which needs 6.6+; about 1 min).
# "6.1 newest:single" runs the newest kernel's whole single-host VM
# (about 20 min more), "6.1 newest" all of it (docs/kernels.md
# "Results").
RS_CHECK_LINES ?= 6.1 newest:switch
check: deps
	$(MAKE) -j$(JOBS) all unit
	$(MAKE) deb
	$(if $(filter command line,$(origin KVER)),RS_VM_KVER=$(KVER) scripts/check,scripts/check-kernels --run "$(RS_CHECK_LINES)")

# make check-kernels: make check on each kernel line (5.10, 6.1, 6.12,
# 7.x); make module-kernels: only the W=1 warning-free module builds
check-kernels: deps
	$(MAKE) -j$(JOBS) all unit
	scripts/check-kernels

module-kernels: deps
	scripts/check-kernels --build-only

check-debug: deps
	$(MAKE) selftests unit tools preload
	scripts/check-debug

demo: deps
	$(MAKE) module bench-build
	scripts/vm-run --hosts 1 -- bench/demo

eval: deps
	$(MAKE) module bench-build
	bench/eval

# make bench KVER=<release>: on another Debian kernel (scripts/kernels
# fetch it first); its module is kept in build/bench/kmod/<release>/ and
# kmod/rdmastream.ko is left built for that kernel (make module rebuilds
# the host's)
bench: deps
	$(MAKE) module bench-build
	$(if $(filter command line,$(origin KVER)),mkdir -p $(BUILD)/bench/kmod/$(KVER) && \
		cp kmod/rdmastream.ko $(BUILD)/bench/kmod/$(KVER)/ && \
		RS_BENCH_KVER=$(KVER)) bench/bench

bench-lossy: deps
	$(MAKE) module bench-build
	bench/lossy

checkpatch: ksrc
	$(KSRC)/scripts/checkpatch.pl --no-tree --terse -f \
		$(filter-out %.mod.c,$(wildcard kmod/*.c)) kmod/*.h \
		uapi/linux/*.h selftests/unit/*.c selftests/unit/*.h

# man prints groff's warnings (--warnings=w: all of them) on stderr and
# still exits 0, so any output at all is the failure; lexgrog checks that
# the NAME line is one whatis/apropos can index.
MAN_PAGES := man/rdmastream.7

man-check:
	@for page in $(MAN_PAGES); do \
		warn=$$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 \
			man --warnings=w -E UTF-8 -l $$page 2>&1 >/dev/null) && \
		[ -z "$$warn" ] && lexgrog $$page >/dev/null || { \
			echo "$$warn"; \
			echo "man-check: $$page does not render cleanly" >&2; \
			exit 1; }; \
		echo "man-check: $$page renders without warnings"; \
	done

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean || true
	rm -rf $(BUILD)
