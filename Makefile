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
ifeq ($(BUILD),asan)
  OPT   := -O1 -g -fno-omit-frame-pointer
  SAN   := -fsanitize=address,undefined -fno-sanitize-recover=all
  DEFS  := -DPRESENCED_TESTING
endif
ifeq ($(BUILD),fuzz)
  CC    := clang
  OPT   := -O1 -g -fno-omit-frame-pointer
  SAN   := -fsanitize=fuzzer-no-link,address,undefined
  DEFS  := -DPRESENCED_TESTING -DPRESENCED_FUZZING
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
CFLAGS_ALL := -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(DEFS) -MMD -MP -I$(LLHTTP_INC) $(PKG_CFLAGS)
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

.PHONY: all asan clang-check run test unit fuzz fuzz-bins fuzz-build setup fmt fmt-check clean bench bench-quick soak soak-cluster

all: $(O)/presenced

$(O)/presenced: $(O)/src/main.o $(ALL_LIBS) $(LLHTTP_OBJ)
	$(CC) $(SAN) -o $@ $(O)/src/main.o $(ALL_LIBS) $(LLHTTP_OBJ) $(LDLIBS)

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

test: setup
	$(MAKE) fmt-check
	$(MAKE) BUILD=asan all unit
	$(MAKE) clang-check
	$(MAKE) BUILD=fuzz fuzz-bins
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

FMT_FILES := $(wildcard src/*.c $(foreach d,$(LAYERS) testing,src/$(d)/*.c src/$(d)/*.h) tests/unit/*.c tests/unit/*.h tests/fuzz/*.c)
fmt:
	clang-format -i $(FMT_FILES)

fmt-check:
	@clang-format --dry-run --Werror $(FMT_FILES) && echo 'fmt-check: ok'

clean:
	rm -rf build

-include $(OBJ:.o=.d) $(O)/src/main.d $(UNIT_BIN:=.d) $(FUZZ_BIN:=.d)
