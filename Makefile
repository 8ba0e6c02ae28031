# presenced - one hand-written GNU Makefile (Linux only).
#
#   make run        install what is missing, build, start with embedded defaults
#   make run-cluster   the same, as three nodes over Redis and PostgreSQL
#   make test       install what is missing, then every test (C under ASan+UBSan)
#   make            release build (-O2 -g) into build/release/presenced
#   make asan       ASan+UBSan build (also the test build: it has the echo endpoint)
#   make fuzz FUZZ_SECONDS=N   libFuzzer targets (clang)
#   make fmt / fmt-check       clang-format
#   make bench / bench-quick   benchmark suite (<= 15 min) / its smoke run
#   make install / uninstall   PREFIX (/usr/local) and DESTDIR, see Install
#   make deb        a Debian package in build/, checked with lintian
#
# Sources are discovered: src/<layer>/*.c (layers in src/layers) and
# src/main.c are the server, tests/unit/test_*.c are cmocka binaries, each
# linked with its layer and those below (see Layers), and
# tests/fuzz/fuzz_*.c are libFuzzer targets linked with every layer.

BUILD   ?= release
CC      ?= cc
O       := build/$(BUILD)
PKGS    := libcjson inih libcrypto sqlite3 libpq hiredis libsystemd
LLHTTP_SRC := /usr/share/llhttp
LLHTTP_INC := /usr/share/include/llhttp

WARN    := -Wall -Wextra -Wpedantic -Wstrict-prototypes -Werror
OPT     := -O2 -g
DEFS    :=
SAN     :=
# Debian's hardening (dpkg-buildflags' defaults) for the builds that are
# shipped: fortified libc calls, stack protector, read-only relocations
# bound at start. Not under the sanitizers, which replace the same calls.
HARDEN    := -D_FORTIFY_SOURCE=2 -fstack-protector-strong
HARDEN_LD := -Wl,-z,relro,-z,now
ifeq ($(BUILD),asan)
  OPT   := -O1 -g -fno-omit-frame-pointer
  SAN   := -fsanitize=address,undefined -fno-sanitize-recover=all
  DEFS  := -DPRESENCED_TESTING
  HARDEN :=
  HARDEN_LD :=
endif
ifeq ($(BUILD),fuzz)
  CC    := clang
  OPT   := -O1 -g -fno-omit-frame-pointer
  SAN   := -fsanitize=fuzzer-no-link,address,undefined
  DEFS  := -DPRESENCED_TESTING -DPRESENCED_FUZZING
  HARDEN :=
  HARDEN_LD :=
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# Layers (src/layers): each folder of src/ is one archive, compiled with
# -I of itself and the folders it may use only, so an upward #include
# fails to compile. A unit test tests/unit/test_<m>.c belongs to the folder
# holding <m>.c (or <m>.h for a header-only module, or the folder named
# <m>, for test_<m>_<x>.c) and links that folder's archive and those below
# only, so an upward call fails to link. The
# server links every archive; src/testing/ exists in test builds only.
LAYERS    := $(shell sed -n 's/^\([a-z/]*\):.*/\1/p' src/layers)
ifeq ($(filter asan fuzz,$(BUILD)),)
  LAYERS  := $(filter-out testing,$(LAYERS))
endif
deps_of    = $(shell sed -n 's|^$(1):\(.*\)|\1|p' src/layers)
inc_of     = $(foreach d,$(1) $(call deps_of,$(1)),-Isrc/$(d))
lib_of     = $(O)/lib/$(subst /,_,$(1)).a
# Archives in link order: a layer before those it uses.
LINK_ORDER := $(shell awk -F: '/^[a-z]/{print $$1}' src/layers | tac)
link_libs  = $(foreach l,$(filter $(1) $(call deps_of,$(1)),$(LINK_ORDER)),$(call lib_of,$(l)))

INC_ALL   := $(foreach l,$(LAYERS),-Isrc/$(l))
CFLAGS_ALL := -std=c11 -D_GNU_SOURCE $(OPT) $(HARDEN) $(SAN) $(DEFS) -MMD -MP -I$(LLHTTP_INC) $(PKG_CFLAGS)
LDLIBS     := $(PKG_LIBS) -lpthread

LLHTTP_OBJ := $(O)/llhttp/llhttp.o $(O)/llhttp/api.o $(O)/llhttp/http.o
ALL_LIBS  := $(foreach l,$(filter $(LAYERS),$(LINK_ORDER)),$(call lib_of,$(l)))
OBJ       := $(foreach l,$(LAYERS),$(patsubst src/%.c,$(O)/src/%.o,$(wildcard src/$(l)/*.c)))
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(O)/tests/%)
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN  := $(FUZZ_SRC:tests/fuzz/%.c=$(O)/fuzz/%)

# The folder of unit test $(1) (test_<m> or test_<m>_<x>).
test_mod   = $(patsubst test_%,%,$(1))
test_layer = $(or $(TEST_LAYER_$(1)),$(patsubst src/%/,%,$(dir $(firstword $(wildcard $(foreach l,$(LAYERS),src/$(l)/$(call test_mod,$(1)).c src/$(l)/$(call test_mod,$(1)).h))))),$(firstword $(foreach l,$(LAYERS),$(if $(filter $(l),$(subst _, ,$(call test_mod,$(1)))),$(l)))))

.PHONY: all asan clang-check run test unit fuzz fuzz-bins fuzz-build setup fmt fmt-check clean bench bench-quick soak soak-cluster install uninstall deb

all: $(O)/presenced

$(O)/presenced: $(O)/src/main.o $(ALL_LIBS) $(LLHTTP_OBJ)
	$(CC) $(SAN) $(HARDEN_LD) -o $@ $(O)/src/main.o $(ALL_LIBS) $(LLHTTP_OBJ) $(LDLIBS)

$(O)/src/main.o: src/main.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(INC_ALL) $(WARN) -c -o $@ $<

# One rule per layer: its objects see only its own and the allowed folders.
define layer_rules
$(O)/src/$(1)/%.o: src/$(1)/%.c
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS_ALL) $$(call inc_of,$(1)) $$(WARN) -c -o $$@ $$<

$(call lib_of,$(1)): $(patsubst src/%.c,$(O)/src/%.o,$(wildcard src/$(1)/*.c))
	@mkdir -p $$(@D)
	rm -f $$@ && $$(AR) rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call layer_rules,$(l))))

# llhttp's generated C is not ours to fix: no -Werror, its own warnings off.
$(O)/llhttp/%.o: $(LLHTTP_SRC)/%.c
	@mkdir -p $(@D)
	$(CC) -std=c11 $(OPT) $(SAN) -I$(LLHTTP_INC) -w -c -o $@ $<

# A unit test: its layer's headers and archives and those below, nothing else.
define unit_rule
$(O)/tests/$(1): tests/unit/$(1).c $(call link_libs,$(call test_layer,$(1))) $(LLHTTP_OBJ)
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS_ALL) $$(call inc_of,$(call test_layer,$(1))) -Itests/unit $$(WARN) -Wno-strict-prototypes -o $$@ $$< $(call link_libs,$(call test_layer,$(1))) $$(LLHTTP_OBJ) $$(LDLIBS) -lcmocka
endef
$(foreach t,$(UNIT_SRC:tests/unit/%.c=%),$(if $(call test_layer,$(t)),$(eval $(call unit_rule,$(t))),$(error $(t): no layer holds $(call test_mod,$(t)).c)))

$(O)/fuzz/%: tests/fuzz/%.c $(ALL_LIBS) $(LLHTTP_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(INC_ALL) $(WARN) -fsanitize=fuzzer -o $@ $< $(ALL_LIBS) $(LLHTTP_OBJ) $(LDLIBS)

unit: $(UNIT_BIN)

fuzz-bins: $(FUZZ_BIN)

asan:
	$(MAKE) BUILD=asan all unit

# The same sources must build warning-free with the other compiler too.
clang-check:
	$(MAKE) BUILD=clang CC=clang all unit

fuzz-build:
	$(MAKE) BUILD=fuzz fuzz-bins

FUZZ_SECONDS ?= 60
fuzz: setup fuzz-build
	tests/fuzz/run.sh build/fuzz $(FUZZ_SECONDS)

setup:
	@scripts/setup.sh

run: setup
	$(MAKE) all
	$(O)/presenced $(ARGS)

# Three nodes on loopback (ports 7401-7403) over one Redis and one
# throwaway PostgreSQL, the demo page on each; Ctrl-C stops everything.
.PHONY: run-cluster
run-cluster: setup
	$(MAKE) all
	PRESENCED_BIN=$(CURDIR)/$(O)/presenced scripts/run-cluster.sh

# The builds of `make test` use every core (JOBS, default nproc) even when
# make itself was started without -j, as CI starts it.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test: setup
	$(MAKE) fmt-check
	$(MAKE) -j$(JOBS) BUILD=asan all unit
	$(MAKE) -j$(JOBS) clang-check
	$(MAKE) -j$(JOBS) BUILD=fuzz fuzz-bins
	$(MAKE) -j$(JOBS) BUILD=release all # the package suite (tests/pkg) ships it
	tests/run.sh

# Benchmarks use the release build; bench/run.sh builds its own generator.
bench: setup
	$(MAKE) all
	bench/run.sh full

bench-quick: setup
	$(MAKE) all
	bench/run.sh quick

# The seeded chaos soak (tests/soak/soak.mjs) on the ASan build: make soak
# SEED=n MINUTES=m (no SEED: a random one, printed; MINUTES defaults to 10).
soak: setup
	$(MAKE) BUILD=asan all
	node tests/soak/soak.mjs --seed "$(SEED)" --minutes "$(or $(MINUTES),10)"

# The seeded chaos soak of three nodes on one Redis (tests/soak/cluster-soak.mjs)
# with a PostgreSQL of its own (tests/cluster/run.sh): make soak-cluster SEED=n
# MINUTES=m (no SEED: a random one; the seed is printed at the start and on failure).
soak-cluster: setup
	$(MAKE) BUILD=asan all
	tests/cluster/run.sh node tests/soak/cluster-soak.mjs --seed "$(SEED)" --minutes "$(or $(MINUTES),10)"

# ---- Install ----
# make install [PREFIX=/usr/local] [DESTDIR=]: the release binary, the
# configuration, the demo page and SDK it serves, the systemd units and
# the man page (packaging/). Below /usr the configuration goes to /etc
# and the units to systemd's own directory; below any other prefix both
# stay inside it ($(PREFIX)/etc/presenced, $(PREFIX)/lib/systemd/system,
# which systemd also searches for /usr/local). The paths are written into
# the units, the man page and the configuration as they are installed.
# An existing, edited presenced.conf is kept: the new one goes beside it
# as presenced.conf.new.
PREFIX  ?= /usr/local
ifeq ($(PREFIX),/usr)
  SYSCONFDIR ?= /etc
  UNITDIR    ?= $(or $(shell pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null),/lib/systemd/system)
else
  SYSCONFDIR ?= $(PREFIX)/etc
  UNITDIR    ?= $(PREFIX)/lib/systemd/system
endif
SBINDIR ?= $(PREFIX)/sbin
DATADIR ?= $(PREFIX)/share/presenced
MANDIR  ?= $(PREFIX)/share/man
VERSION := $(shell sed -n 's/^\#define CONFIG_VERSION *"\(.*\)"/\1/p' src/base/config.c)
SDK_FILES := $(wildcard clients/js/*.js clients/js/*.d.ts)
PKG_O   := $(O)/pkg
SUBST    = sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
               -e 's|@DATADIR@|$(DATADIR)|g' -e 's|@UNITDIR@|$(UNITDIR)|g' -e 's|@VERSION@|$(VERSION)|g'

# Made at every install: they hold the paths of this PREFIX.
.PHONY: install-files
install-files: $(O)/presenced
	@mkdir -p $(PKG_O)
	$(SUBST) packaging/presenced.service.in >$(PKG_O)/presenced.service
	$(SUBST) packaging/presenced@.service.in >$(PKG_O)/presenced@.service
	packaging/man-options.sh $(O)/presenced >$(PKG_O)/settings.roff
	$(SUBST) -e '/^@SETTINGS@$$/{r $(PKG_O)/settings.roff' -e 'd;}' packaging/presenced.8.in >$(PKG_O)/presenced.8
	$(SUBST) -e '/^# Use it with/i\# As installed, static-dir, sdk-dir and store are set: the demo files\n# are in $(DATADIR),\n# and the settings store is in the working directory, which the units set\n# to their state directory: /var/lib/presenced for presenced.service,\n# /var/lib/presenced-NODE for presenced@NODE.service\n# (a copy of this file as NODE.conf, with its own port, works as is).\n#' \
	    -e 's|^# static-dir = www$$|static-dir = $(DATADIR)/www|' \
	    -e 's|^# sdk-dir = clients/js$$|sdk-dir = $(DATADIR)/sdk|' \
	    -e 's|^# store = presenced.db$$|store = presenced.db|' presenced.conf >$(PKG_O)/presenced.conf
	@grep -q '^static-dir = /' $(PKG_O)/presenced.conf && grep -q '^sdk-dir = /' $(PKG_O)/presenced.conf && \
	    grep -q '^store = ' $(PKG_O)/presenced.conf || { echo 'install: presenced.conf no longer has the lines packaging sets'; exit 1; }

install: install-files
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(SYSCONFDIR)/presenced $(DESTDIR)$(DATADIR)/www \
	    $(DESTDIR)$(DATADIR)/www/admin $(DESTDIR)$(DATADIR)/sdk $(DESTDIR)$(UNITDIR) \
	    $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(O)/presenced $(DESTDIR)$(SBINDIR)/presenced
	install -m 0644 $(filter-out www/admin,$(wildcard www/*)) $(DESTDIR)$(DATADIR)/www/
	install -m 0644 www/admin/* $(DESTDIR)$(DATADIR)/www/admin/
	install -m 0644 $(SDK_FILES) $(DESTDIR)$(DATADIR)/sdk/
	install -m 0644 $(PKG_O)/presenced.service $(PKG_O)/presenced@.service $(DESTDIR)$(UNITDIR)/
	install -m 0644 $(PKG_O)/presenced.8 $(DESTDIR)$(MANDIR)/man8/presenced.8
	@conf=$(DESTDIR)$(SYSCONFDIR)/presenced/presenced.conf; \
	if [ -e "$$conf" ] && ! cmp -s "$$conf" $(PKG_O)/presenced.conf; then \
	    install -m 0644 $(PKG_O)/presenced.conf "$$conf.new"; \
	    echo "install: kept the edited $$conf; the new one is $$conf.new"; \
	else \
	    install -m 0644 $(PKG_O)/presenced.conf "$$conf"; echo "install: $$conf"; \
	fi

# Removes what install put in place but the configuration.
uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/presenced $(DESTDIR)$(UNITDIR)/presenced.service \
	    $(DESTDIR)$(UNITDIR)/presenced@.service $(DESTDIR)$(MANDIR)/man8/presenced.8
	rm -rf $(DESTDIR)$(DATADIR)
	@echo "uninstall: kept $(DESTDIR)$(SYSCONFDIR)/presenced/"

# build/presenced_VERSION_ARCH.deb from a staged make install PREFIX=/usr
# (packaging/mkdeb.sh), then lintian on it when lintian is installed.
deb:
	$(MAKE) BUILD=release all
	packaging/mkdeb.sh

FMT_FILES := $(wildcard src/*.c $(foreach d,$(LAYERS) testing,src/$(d)/*.c src/$(d)/*.h) tests/unit/*.c tests/unit/*.h tests/fuzz/*.c)
fmt:
	clang-format -i $(FMT_FILES)

fmt-check:
	@clang-format --dry-run --Werror $(FMT_FILES) && echo 'fmt-check: ok'

clean:
	rm -rf build

-include $(OBJ:.o=.d) $(O)/src/main.d $(UNIT_BIN:=.d) $(FUZZ_BIN:=.d)
