# mirrord bootstrap wrapper.
#
# This is the Makefile you type `make` at on a fresh clone.  It installs the
# Debian packages the build (and, for `make check`, the tests) need, bootstraps
# autotools, configures out of tree in $(BUILD)/ and hands every target to the
# automake-generated Makefile there.  The real build rules live in Makefile.am.
#
#   make                 build daemon/mirrord and daemon/kafka-mirrors
#   make check           build and run every test (unit, fuzz corpus, black box,
#                        and the real-Kafka tier when Java and the broker can be had)
#   make check-kafka     only the real Apache Kafka tier
#   make check-fuzz      time-boxed fuzzing of every harness (FUZZ_SECONDS each)
#   make demo            mirror between two local clusters, end to end
#   make demo-ha         three mirrord instances on a 3-broker real Kafka, one killed
#   make bench           mirrord, a consume-and-reproduce baseline and MirrorMaker 2
#                        on real Kafka 4.4.0 (BENCH_MB, BENCH_SMALL_MB, BENCH_VARIANTS),
#                        after the micro-benchmarks (mlog, crc, xlate), then bench-txn
#   make bench-txn       transactional source topics on real Kafka: one mirrord and a
#                        group of three, lag, catch-up, CPU and metadata bytes per
#                        transaction (BENCH_TXN_SECONDS, BENCH_TXN_SCENARIOS,
#                        BENCH_TXN_RATE_SCALE, BENCH_MIRRORD_OTHER)
#   make bench-mock      mirrord versus the baseline on mock clusters (quick)
#   make bench-scale     10,000 partitions in one mirrord (SCALE_PARTITIONS,
#                        SCALE_KAFKA_PARTITIONS for real Kafka, SCALE_FSYNC, SCALE_PERF)
#   make bench-depth     pipelined produce on real Kafka: depth 1 versus 5
#   make torture         minutes of load and faults on real Kafka, then a checker
#                        (TORTURE_SECONDS, TORTURE_SEED, TORTURE_FAULTS)
#   make torture-group   the same with three instances on the replicated
#                        metadata log and 300 transactions a second (TORTURE_GROUP=3)
#   make install         install (DESTDIR and PREFIX honoured)
#   make deb             the Debian package, built from a clean copy of the
#                        tree in $(BUILD)/deb (dpkg-buildpackage -us -uc)

BUILD ?= build
PREFIX ?= /usr/local
ifeq ($(CI),true)
CONFIGURE_FLAGS ?= --enable-sanitizers --enable-werror --enable-fuzzers
else
CONFIGURE_FLAGS ?= --enable-werror
endif

BUILD_DEPS = gcc make autoconf automake pkg-config librdkafka-dev libevent-dev \
	libyaml-dev check libssl-dev zlib1g-dev liblz4-dev libzstd-dev libsnappy-dev \
	libpcre2-dev
TEST_DEPS = python3 python3-confluent-kafka python3-kafka kcat mandoc clang libclang-rt-14-dev \
	tshark systemd prometheus openjdk-17-jdk-headless maven openssl procps bash-completion python3-yaml
# Building and checking the Debian package (make deb, test/pkg/test_deb.sh);
# part of TEST_DEPS so `make check` (and CI) really runs test_deb.sh.
# debian/control's Build-Depends mirror BUILD_DEPS.
DEB_DEPS = dpkg-dev debhelper lintian build-essential
TEST_DEPS += $(DEB_DEPS)
# perf, for the benchmarks' profiles (BENCH_PERF=1|stat|faults in
# test/bench/bench_kafka.py).
PROFILE_DEPS = linux-perf
TEST_DEPS += $(PROFILE_DEPS)
# --enable-fuzzers links libFuzzer and the sanitizer runtimes: clang alone
# does not bring them (Debian 12 ships them in libclang-rt-14-dev).
FUZZ_DEPS = clang libclang-rt-14-dev
ifneq (,$(findstring --enable-fuzzers,$(CONFIGURE_FLAGS)))
BUILD_DEPS += $(FUZZ_DEPS)
endif
APT_ENV = DEBIAN_FRONTEND=noninteractive

SUBMAKE = $(MAKE) --no-print-directory -C $(BUILD)

.PHONY: all check check-kafka check-fuzz demo demo-ha bench bench-mock bench-kafka bench-scale bench-depth bench-txn torture torture-group install uninstall clean \
	distclean deps test-deps deb deb-deps FORCE

all: $(BUILD)/Makefile
	@$(SUBMAKE) all

# The tests run CHECK_JOBS at a time (automake's parallel harness): most of
# a test's time is waiting for brokers and daemons, so on 2 cores 4 at once
# take a quarter of the time one at a time did.  Each test has its own ports
# (test/kafka/realkafka.py free_port()) and scratch directory.
CHECK_JOBS ?= 4
check: test-deps $(BUILD)/Makefile
	@$(SUBMAKE) all
	@date +%s > $(BUILD)/.check-start
	@rc=0; $(SUBMAKE) -j$(CHECK_JOBS) check || rc=$$?; \
	sh $(CURDIR)/test/tools/summary.sh $(BUILD); exit $$rc

# `all` first: it generates the codec (BUILT_SOURCES) the programs need.
check-kafka check-fuzz demo demo-ha bench bench-mock bench-kafka bench-scale bench-depth bench-txn torture torture-group: test-deps $(BUILD)/Makefile
	@$(SUBMAKE) all
	@$(SUBMAKE) $@

install uninstall: $(BUILD)/Makefile
	@$(SUBMAKE) $@

# Needs no configure here: debian/rules builds its own copy out of tree.
deb: deb-deps
	sh debian/mkdeb.sh $(BUILD)/deb

clean:
	@if [ -f $(BUILD)/Makefile ]; then $(SUBMAKE) clean; fi

distclean:
	rm -rf $(BUILD) autom4te.cache build-aux aclocal.m4 configure Makefile.in \
		config.h.in config.h.in~ m4/libtool.m4

# Packages: install what is missing when root, otherwise print the exact line.
define ensure_pkgs
	@missing=""; for p in $(1); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "mirrord: installing Debian packages:$$missing"; \
			apt-get update -qq && $(APT_ENV) apt-get install -y -qq --no-install-recommends$$missing >/dev/null \
				|| { echo "mirrord: apt-get install$$missing failed" >&2; exit 1; }; \
		else \
			echo "mirrord: missing Debian packages; run as root:" >&2; \
			echo "  apt-get install$$missing" >&2; exit 1; \
		fi; \
	fi
endef

deps:
	$(call ensure_pkgs,$(BUILD_DEPS))

deb-deps: deps
	$(call ensure_pkgs,$(DEB_DEPS))

test-deps: deps
	$(call ensure_pkgs,$(TEST_DEPS))

configure: configure.ac $(wildcard */*.am) Makefile.am | deps
	autoreconf -fi

# Reconfigure when the flags change (e.g. CI's sanitizer build).
$(BUILD)/.flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(CONFIGURE_FLAGS) --prefix=$(PREFIX)' | cmp -s - $@ || echo '$(CONFIGURE_FLAGS) --prefix=$(PREFIX)' > $@

$(BUILD)/Makefile: configure $(BUILD)/.flags | deps
	cd $(BUILD) && ../configure -q $(CONFIGURE_FLAGS) --prefix=$(PREFIX)
