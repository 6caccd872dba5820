# SPDX-License-Identifier: GPL-2.0
#
# Orchestration for the Rust MM subsystem series.  This file drives the
# build of a Linux 6.12 tree prepared under build/linux; it is never copied
# into that tree (only the kernel-path directories are, see
# tools/build/tree.py).

SHELL := /bin/bash
.DEFAULT_GOAL := help

TARGETS := help setup prepare kunit host-test scenarios arm64 test demo perf-kernel \
	   patches checkpatch check rustfmt clippy compile-fail dt-check rust-analyzer clean distclean

.PHONY: $(TARGETS)

help:
	@echo "Targets:"
	@echo "  make setup       install and verify the toolchain (Debian packages, bindgen)"
	@echo "  make test        all test tiers: host cargo tests, KUnit in QEMU, QEMU scenarios"
	@echo "  make demo        build the performance kernel, boot it, print the subsystem report"
	@echo "  make kunit       KUnit tier only (FILTER='gcma*' to select suites)"
	@echo "  make host-test   host tier only (cargo test in tools/host)"
	@echo "  make scenarios   scenario tier only, on the KUnit kernel (SCENARIO=name, SCENARIO_JOBS=n)"
	@echo "  make arm64       arm64 tier only: lean arm64 kernel, virt machine with GCMA device-tree areas"
	@echo "  make prepare     extract/resync the kernel tree in build/linux"
	@echo "  make patches     export the work as a git-am-able series in out/series"
	@echo "  make check       rustfmtcheck, CLIPPY=1 build, compile-fail snippets, checkpatch on the series,"
	@echo "                   dt-check"
	@echo "  make dt-check    dt_binding_check of the GCMA binding; the arm64 tier's device tree against it"
	@echo "  make rust-analyzer  rust-project.json of the KUnit kernel (our crates included), checked"
	@echo "  make clean       remove build outputs (keeps the extracted tree)"
	@echo "  make distclean   remove build/ and out/ entirely"

setup:
	@tools/build/setup.sh

prepare: setup
	@python3 tools/build/tree.py prepare --git

kunit: setup
	@tools/kunit/run.sh $(FILTER)

host-test: setup
	@tools/build/host-test.sh

scenarios: setup
	@tools/scenarios/run.py --kernel build/kunit/arch/x86/boot/bzImage \
		--scenario $(or $(SCENARIO),all) --jobs $(or $(SCENARIO_JOBS),auto) \
		--log-dir build/scenario-logs

arm64: setup
	@tools/arm64/run.sh

test: setup
	@tools/build/test.sh

perf-kernel: setup
	@tools/build/perf-kernel.sh

rust-analyzer: setup
	@tools/build/rust-analyzer.sh

demo: setup
	@tools/build/demo.sh

patches: setup
	@python3 tools/build/tree.py export

checkpatch: patches
	@tools/build/checkpatch.sh

rustfmt clippy compile-fail: setup
	@tools/build/check.sh $@

dt-check: setup
	@tools/build/check.sh dt

check: setup
	@tools/build/check.sh all

clean:
	rm -rf build/kunit build/perf build/clippy build/scenarios build/scenario-logs out tools/host/target

distclean:
	@git -C build/linux worktree prune 2>/dev/null || true
	rm -rf build out tools/host/target

# Anything else is a mistake: say so instead of doing nothing.
%:
	@echo "make: unknown target '$@'; run 'make help' for the list" >&2
	@exit 2
