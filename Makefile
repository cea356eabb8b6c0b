# libnanosrv - plain Makefile. Version comes from the public header.
HDR        := libnanosrv/include/nanosrv.h
VERSION    := $(shell sed -n 's/^\#define NSV_VERSION_STRING "\(.*\)"/\1/p' $(HDR))
MAJOR      := $(firstword $(subst ., ,$(VERSION)))
BUILD      ?= build
SAN        ?=
PREFIX     ?= /usr/local
CC         ?= cc

CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -g -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
               -fPIC -fvisibility=hidden -pthread -Ilibnanosrv/include
ifeq ($(SAN),asan)
  OPT := -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else ifeq ($(SAN),tsan)
  OPT := -O1 -fsanitize=thread -fno-omit-frame-pointer
else
  OPT ?= -O2
endif
CFLAGS  ?=
CFLAGS  += $(CFLAGS_BASE) $(OPT)
LDFLAGS += $(filter -fsanitize%,$(OPT)) -pthread

# Optional TLS (mbedTLS) when its headers are present.
TLS ?= $(shell test -f /usr/include/mbedtls/ssl.h && test -f libnanosrv/src/tls/tls.c && echo mbedtls)
ifeq ($(TLS),mbedtls)
  CFLAGS += -DNSV_WITH_MBEDTLS
  LIBS   += -lmbedtls -lmbedx509 -lmbedcrypto
endif

SRCS   := $(sort $(wildcard libnanosrv/src/*/*.c))
OBJS   := $(SRCS:%.c=$(BUILD)/obj/%.o)
SONAME := libnanosrv.so.$(MAJOR)
SOREAL := $(BUILD)/libnanosrv.so.$(VERSION)
STATIC := $(BUILD)/libnanosrv.a

EXAMPLE_SRCS := $(sort $(wildcard examples/*.c))
EXAMPLES     := $(foreach s,$(EXAMPLE_SRCS),$(BUILD)/$(subst _,-,$(basename $(notdir $(s)))))
UNIT_SRCS    := $(sort $(wildcard tests/unit/*.c))
UNITS        := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
ITEST_SRCS   := $(sort $(wildcard tests/integration/*.c))
ITESTS       := $(ITEST_SRCS:tests/integration/%.c=$(BUILD)/tests/integration/%)
FUZZ_SRCS    := $(sort $(wildcard tests/fuzz/fuzz_*.c))
REPLAYS      := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/tests/replay/%)

.PHONY: all lib examples tests run test test-run check-abi deps install clean fuzz bench bench-quick cdef
all: lib examples tests

lib: $(SOREAL) $(BUILD)/$(SONAME) $(BUILD)/libnanosrv.so $(STATIC) $(BUILD)/nanosrv.pc
examples: $(EXAMPLES)
tests: $(UNITS) $(ITESTS) $(REPLAYS)

$(BUILD)/obj/%.o: %.c $(HDR) $(wildcard libnanosrv/src/*.h libnanosrv/src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ilibnanosrv/src -c $< -o $@

$(SOREAL): $(OBJS) libnanosrv/libnanosrv.map
	$(CC) -shared -o $@ $(OBJS) -Wl,-soname,$(SONAME) -Wl,--version-script=libnanosrv/libnanosrv.map \
	    -Wl,-z,defs -Wl,-z,now $(LDFLAGS) $(LIBS)
$(BUILD)/$(SONAME): $(SOREAL)
	ln -sf $(notdir $<) $@
$(BUILD)/libnanosrv.so: $(BUILD)/$(SONAME)
	ln -sf $(notdir $<) $@
$(STATIC): $(OBJS)
	rm -f $@ && ar rcs $@ $^
# nanosrv.pc: a PREFIX other than /usr and /usr/local, where the dynamic loader
# does not look, puts -Wl,-rpath,$PREFIX/lib into Libs, so programs built
# with pkg-config run without LD_LIBRARY_PATH.
comma    := ,
PC_RPATH := $(if $(filter /usr /usr/local,$(PREFIX)),,-Wl$(comma)-rpath$(comma)$${libdir} )
PC_SED    = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@LIBS@|$(LIBS)|' \
                -e 's|@RPATH@|$(PC_RPATH)|'
$(BUILD)/nanosrv.pc: libnanosrv/nanosrv.pc.in $(HDR)
	$(PC_SED) $< > $@

# Examples link the shared object (found next to them through $ORIGIN).
.SECONDEXPANSION:
$(EXAMPLES): $(BUILD)/%: examples/$$(subst -,_,%).c $(BUILD)/$(SONAME) $(BUILD)/libnanosrv.so
	$(CC) $(CFLAGS) -o $@ $< -L$(BUILD) -lnanosrv -Wl,-rpath,'$$ORIGIN' $(LDFLAGS)

# Unit tests link the static library and may reach internal headers.
$(BUILD)/tests/unit/%: tests/unit/%.c $(STATIC) tests/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ilibnanosrv/src -Itests -o $@ $< $(STATIC) $(LDFLAGS) $(LIBS)
$(BUILD)/tests/integration/%: tests/integration/%.c $(STATIC) tests/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ilibnanosrv/src -Itests -o $@ $< $(STATIC) $(LDFLAGS) $(LIBS)
# Fuzz targets built as corpus replayers (no libFuzzer needed).
$(BUILD)/tests/replay/%: tests/fuzz/%.c tests/fuzz/replay.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ilibnanosrv/src -o $@ $< tests/fuzz/replay.c $(STATIC) $(LDFLAGS) $(LIBS)

deps:
	@tools/install-deps.sh
	@bindings/node-ffi/install.sh

cdef:
	/usr/bin/python3 tools/gen_cdef.py

check-abi: lib
	@NSV_BUILD=$(BUILD) tests/abi/check-abi.sh

# Runs every suite of one build directory through prove.
test-run: all
	@NSV_BUILD=$(BUILD) SAN=$(SAN) tests/run

test: deps
	$(MAKE) all check-abi
	$(MAKE) test-run
	$(MAKE) BUILD=build/asan SAN=asan test-run
	$(MAKE) BUILD=build/tsan SAN=tsan test-run

run: deps lib examples
	$(BUILD)/demo --port 8080

install: lib
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 $(HDR) $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(SOREAL) $(DESTDIR)$(PREFIX)/lib/
	ln -sf $(notdir $(SOREAL)) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libnanosrv.so
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	$(PC_SED) libnanosrv/nanosrv.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/nanosrv.pc

clean:
	rm -rf build

# Long-running checks, not part of `make test`: tests/long/*.c (a 3 GiB reply
# served twice; needs about 8 GiB of memory).
LONG_SRCS := $(sort $(wildcard tests/long/*.c))
LONGS     := $(LONG_SRCS:tests/long/%.c=$(BUILD)/tests/long/%)
.PHONY: test-long
$(BUILD)/tests/long/%: tests/long/%.c $(STATIC) tests/tap.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Ilibnanosrv/src -Itests -o $@ $< $(STATIC) $(LDFLAGS) $(LIBS)
test-long: $(LONGS)
	@NSV_BUILD=$(BUILD) NSV_TEST_TIMEOUT=1200 prove --timer --exec tests/exec $(LONGS)

-include bench/bench.mk
-include tests/fuzz/fuzz.mk
-include tests/shim/shim.mk
