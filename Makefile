# presenced - one hand-written GNU Makefile (Linux only).
#
#   make run        install what is missing, build, start with embedded defaults
#   make test       install what is missing, then every test (C under ASan+UBSan)
#   make            release build (-O2 -g) into build/release/presenced
#   make asan       ASan+UBSan build (also the test build: it has the echo endpoint)
#   make fuzz FUZZ_SECONDS=N   libFuzzer targets (clang)
#   make fmt / fmt-check       clang-format
#   make bench / bench-quick   benchmark suite (<= 15 min) / its smoke run
#
# Sources are discovered: src/*.c is the server, tests/unit/test_*.c are
# cmocka binaries linked with every src object except main.o, and
# tests/fuzz/fuzz_*.c are libFuzzer targets linked the same way.

BUILD   ?= release
CC      ?= cc
O       := build/$(BUILD)
PKGS    := libcjson inih libcrypto sqlite3 libpq
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
SRC_DIRS  := base runtime net core store engine proto/native testing
INC_ALL   := -Isrc $(addprefix -Isrc/,$(SRC_DIRS))
CFLAGS_ALL := -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) $(DEFS) -MMD -MP $(INC_ALL) -I$(LLHTTP_INC) $(PKG_CFLAGS)
LDLIBS     := $(PKG_LIBS) -lpthread

SRC       := $(wildcard src/*.c $(addsuffix /*.c,$(addprefix src/,$(SRC_DIRS))))
OBJ       := $(SRC:src/%.c=$(O)/src/%.o)
LIB_OBJ   := $(filter-out $(O)/src/main.o,$(OBJ))
LLHTTP_OBJ := $(O)/llhttp/llhttp.o $(O)/llhttp/api.o $(O)/llhttp/http.o
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(O)/tests/%)
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN  := $(FUZZ_SRC:tests/fuzz/%.c=$(O)/fuzz/%)

.PHONY: all asan clang-check run test unit fuzz fuzz-bins fuzz-build setup fmt fmt-check clean bench bench-quick

all: $(O)/presenced

$(O)/presenced: $(OBJ) $(LLHTTP_OBJ)
	$(CC) $(SAN) -o $@ $^ $(LDLIBS)

$(O)/src/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(WARN) -c -o $@ $<

# llhttp's generated C is not ours to fix: no -Werror, its own warnings off.
$(O)/llhttp/%.o: $(LLHTTP_SRC)/%.c
	@mkdir -p $(@D)
	$(CC) -std=c11 $(OPT) $(SAN) -I$(LLHTTP_INC) -w -c -o $@ $<

$(O)/tests/%: tests/unit/%.c $(LIB_OBJ) $(LLHTTP_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(WARN) -Wno-strict-prototypes -o $@ $(filter %.c %.o,$^) $(LDLIBS) -lcmocka

$(O)/fuzz/%: tests/fuzz/%.c $(LIB_OBJ) $(LLHTTP_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(WARN) -fsanitize=fuzzer -o $@ $(filter %.c %.o,$^) $(LDLIBS)

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

FMT_FILES := $(wildcard src/*.c $(foreach d,$(SRC_DIRS),src/$(d)/*.c src/$(d)/*.h) tests/unit/*.c tests/unit/*.h tests/fuzz/*.c)
fmt:
	clang-format -i $(FMT_FILES)

fmt-check:
	@clang-format --dry-run --Werror $(FMT_FILES) && echo 'fmt-check: ok'

clean:
	rm -rf build

-include $(OBJ:.o=.d) $(UNIT_BIN:=.d) $(FUZZ_BIN:=.d)
