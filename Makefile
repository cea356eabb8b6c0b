# libnanosrv - plain Makefile. Version comes from the public header.
HDR        := libnanosrv/include/nanosrv.h
VERSION    := $(shell sed -n 's/^\#define NSV_VERSION_STRING "\(.*\)"/\1/p' $(HDR))
MAJOR      := $(firstword $(subst ., ,$(VERSION)))
BUILD      ?= build
SAN        ?=
PREFIX     ?= /usr/local
CC         ?= cc
PYTHON     ?= python3
PKG_CONFIG ?= pkg-config
export PYTHON

CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -g -Wall -Wextra -Werror -Wshadow \
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

# Optional TLS (mbedTLS), detected on every run by tools/detect-tls.sh
# (pkg-config, else a compile-and-link test), so installing libmbedtls-dev
# is noticed by the next `make`. `make TLS=` builds without TLS,
# `make TLS=mbedtls` insists on it. Goals that build nothing skip the test.
NO_CONFIG_GOALS := clean uninstall cdef deps
ifeq ($(origin TLS),undefined)
  ifneq ($(MAKECMDGOALS),)
    ifeq ($(filter-out $(NO_CONFIG_GOALS),$(MAKECMDGOALS)),)
      TLS_DETECT := skip
    endif
  endif
  ifneq ($(TLS_DETECT),skip)
    TLS_DETECT := $(shell CC='$(CC)' PKG_CONFIG='$(PKG_CONFIG)' sh tools/detect-tls.sh)
  endif
  TLS := $(if $(filter pkg-config compile,$(TLS_DETECT)),$(if $(wildcard libnanosrv/src/tls/*.c),mbedtls))
  ifneq ($(TLS),)
    TLS_WHY := (found through $(if $(filter compile,$(TLS_DETECT)),a compile test,pkg-config))
  else ifneq ($(TLS_DETECT),)
    TLS_WHY := : no TLS sources under libnanosrv/src/tls
  else
    TLS_WHY := : mbedTLS not found; install libmbedtls-dev (apt-get install libmbedtls-dev) and run make again
  endif
else ifeq ($(TLS),)
  TLS_WHY := (TLS= given to make; run make without it to build TLS in)
else
  TLS_WHY := (TLS=$(TLS) given to make)
endif
ifeq ($(TLS),mbedtls)
  ifeq ($(TLS_DETECT),pkg-config)
    TLS_CFLAGS := $(shell $(PKG_CONFIG) --cflags mbedtls mbedx509 mbedcrypto)
    TLS_LIBS   := $(shell $(PKG_CONFIG) --libs mbedtls mbedx509 mbedcrypto)
  else
    TLS_LIBS   := -lmbedtls -lmbedx509 -lmbedcrypto
  endif
  CFLAGS += -DNSV_WITH_MBEDTLS $(TLS_CFLAGS)
  LIBS   += $(TLS_LIBS)
  TLS_MSG := libnanosrv: TLS (mbedTLS) enabled $(TLS_WHY)
else
  TLS_MSG := libnanosrv: TLS disabled$(if $(filter :%,$(TLS_WHY)),, )$(TLS_WHY)
endif

# Optional gzip of replies (zlib), detected the same way by
# tools/detect-zlib.sh. `make ZLIB=` builds without it (NSV_OPT_GZIP_MIN_SIZE
# then answers NSV_ENOTSUP), `make ZLIB=zlib` insists on it.
ifeq ($(origin ZLIB),undefined)
  ifneq ($(TLS_DETECT),skip)
    ZLIB_DETECT := $(shell CC='$(CC)' PKG_CONFIG='$(PKG_CONFIG)' sh tools/detect-zlib.sh)
  endif
  ZLIB := $(if $(filter pkg-config compile,$(ZLIB_DETECT)),zlib)
  ifneq ($(ZLIB),)
    ZLIB_WHY := (found through $(if $(filter compile,$(ZLIB_DETECT)),a compile test,pkg-config))
  else
    ZLIB_WHY := : zlib not found; install zlib1g-dev (apt-get install zlib1g-dev) and run make again
  endif
else ifeq ($(ZLIB),)
  ZLIB_WHY := (ZLIB= given to make; run make without it to build gzip in)
else
  ZLIB_WHY := (ZLIB=$(ZLIB) given to make)
endif
ifeq ($(ZLIB),zlib)
  ifeq ($(ZLIB_DETECT),pkg-config)
    ZLIB_CFLAGS := $(shell $(PKG_CONFIG) --cflags zlib)
    ZLIB_LIBS   := $(shell $(PKG_CONFIG) --libs zlib)
  else
    ZLIB_LIBS   := -lz
  endif
  CFLAGS += -DNSV_WITH_ZLIB $(ZLIB_CFLAGS)
  LIBS   += $(ZLIB_LIBS)
  ZLIB_MSG := libnanosrv: gzip (zlib) enabled $(ZLIB_WHY)
else
  ZLIB_MSG := libnanosrv: gzip disabled$(if $(filter :%,$(ZLIB_WHY)),, )$(ZLIB_WHY)
endif

# Optional HTTP/2 (nghttp2), detected the same way by tools/detect-nghttp2.sh:
# HTTP2=auto (the default) links it when found, HTTP2=nghttp2 insists on it,
# HTTP2=none builds without it (NSV_OPT_HTTP2 then answers NSV_ENOTSUP).
HTTP2 ?= auto
ifeq ($(HTTP2),auto)
  ifneq ($(TLS_DETECT),skip)
    H2_DETECT := $(shell CC='$(CC)' PKG_CONFIG='$(PKG_CONFIG)' sh tools/detect-nghttp2.sh)
  endif
  override HTTP2 := $(if $(filter pkg-config compile,$(H2_DETECT)),nghttp2)
  ifneq ($(HTTP2),)
    H2_WHY := (found through $(if $(filter compile,$(H2_DETECT)),a compile test,pkg-config))
  else
    H2_WHY := : nghttp2 (with its stream reset and CONTINUATION limits) not found; install libnghttp2-dev and run make again
  endif
else ifeq ($(HTTP2),none)
  override HTTP2 :=
  H2_WHY := (HTTP2=none given to make)
else ifeq ($(HTTP2),)
  H2_WHY := (not found when the build was configured)
else
  H2_DETECT := $(shell CC='$(CC)' PKG_CONFIG='$(PKG_CONFIG)' sh tools/detect-nghttp2.sh)
  H2_WHY := (HTTP2=$(HTTP2) given to make)
endif
ifeq ($(HTTP2),nghttp2)
  ifeq ($(H2_DETECT),pkg-config)
    H2_CFLAGS := $(shell $(PKG_CONFIG) --cflags libnghttp2)
    H2_LIBS   := $(shell $(PKG_CONFIG) --libs libnghttp2)
  else
    H2_LIBS   := -lnghttp2
  endif
  CFLAGS += -DNSV_WITH_NGHTTP2 $(H2_CFLAGS)
  LIBS   += $(H2_LIBS)
  H2_MSG := libnanosrv: HTTP/2 (nghttp2) enabled $(H2_WHY)
else
  H2_MSG := libnanosrv: HTTP/2 disabled$(if $(filter :%,$(H2_WHY)),, )$(H2_WHY)
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

.PHONY: all lib examples tests run test test-run check-abi abi-baseline deps install uninstall clean \
        fuzz bench bench-quick cdef FORCE
all: lib examples tests

lib: $(SOREAL) $(BUILD)/$(SONAME) $(BUILD)/libnanosrv.so $(STATIC) $(BUILD)/nanosrv.pc
examples: $(EXAMPLES)
tests: $(UNITS) $(ITESTS) $(REPLAYS)

# $(BUILD)/config records the compiler, the optimisation/sanitizer flags and
# the TLS and zlib choices; it is rewritten only when one of them changes, and everything
# compiled depends on it, so a change rebuilds the whole tree. It also prints
# whether TLS is in the build. $(BUILD)/sources lists the library's objects, so
# that removing or renaming a source file relinks the library.
CONFIG_LINES = 'CC=$(CC)' 'OPT=$(OPT)' 'SAN=$(SAN)' 'TLS=$(TLS)' 'TLS_CFLAGS=$(TLS_CFLAGS)' 'TLS_LIBS=$(TLS_LIBS)' \
               'ZLIB=$(ZLIB)' 'ZLIB_CFLAGS=$(ZLIB_CFLAGS)' 'ZLIB_LIBS=$(ZLIB_LIBS)' \
               'HTTP2=$(HTTP2)' 'H2_CFLAGS=$(H2_CFLAGS)' 'H2_LIBS=$(H2_LIBS)'
$(BUILD)/config: FORCE
	@mkdir -p $(@D)
	@printf '%s\n' $(CONFIG_LINES) > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
	@echo "$(TLS_MSG)"
	@echo "$(ZLIB_MSG)"
	@echo "$(H2_MSG)"
$(BUILD)/sources: FORCE
	@mkdir -p $(@D)
	@printf '%s\n' $(OBJS) > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
FORCE:

# Header dependencies: every compile writes a .d file next to its output
# (-MMD -MP), included below, so editing a header rebuilds exactly what
# includes it.
DEPFLAGS = -MMD -MP -MF $@.d
$(BUILD)/obj/%.o: %.c $(BUILD)/config
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) -Ilibnanosrv/src -c $< -o $@

$(SOREAL): $(OBJS) $(BUILD)/sources libnanosrv/libnanosrv.map
	$(CC) -shared -o $@ $(OBJS) -Wl,-soname,$(SONAME) -Wl,--version-script=libnanosrv/libnanosrv.map \
	    -Wl,-z,defs -Wl,-z,now $(LDFLAGS) $(LIBS)
$(BUILD)/$(SONAME): $(SOREAL)
	ln -sf $(notdir $<) $@
$(BUILD)/libnanosrv.so: $(BUILD)/$(SONAME)
	ln -sf $(notdir $<) $@
$(STATIC): $(OBJS) $(BUILD)/sources
	rm -f $@ && ar rcs $@ $(OBJS)
# nanosrv.pc: a PREFIX other than /usr and /usr/local, where the dynamic loader
# does not look, puts -Wl,-rpath,$PREFIX/lib into Libs, so programs built
# with pkg-config run without LD_LIBRARY_PATH.
comma    := ,
PC_RPATH := $(if $(filter /usr /usr/local,$(PREFIX)),,-Wl$(comma)-rpath$(comma)$${libdir} )
PC_SED    = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@LIBS@|$(LIBS)|' \
                -e 's|@RPATH@|$(PC_RPATH)|'
$(BUILD)/nanosrv.pc: libnanosrv/nanosrv.pc.in $(HDR) $(BUILD)/config
	$(PC_SED) $< > $@

# Examples link the shared object (found next to them through $ORIGIN).
# The demo finds its page in this tree wherever it is started (--www overrides).
$(BUILD)/demo: private CFLAGS += -DDEMO_WWW='"$(CURDIR)/examples/demo/www"'
.SECONDEXPANSION:
$(EXAMPLES): $(BUILD)/%: examples/$$(subst -,_,%).c $(BUILD)/$(SONAME) $(BUILD)/libnanosrv.so $(BUILD)/config
	$(CC) $(CFLAGS) $(DEPFLAGS) -o $@ $< -L$(BUILD) -lnanosrv -Wl,-rpath,'$$ORIGIN' $(LDFLAGS)

# Unit tests link the static library and may reach internal headers.
$(BUILD)/tests/unit/%: tests/unit/%.c $(STATIC) $(BUILD)/config
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) -Ilibnanosrv/src -Itests -o $@ $< $(STATIC) $(LDFLAGS) $(LIBS)
$(BUILD)/tests/integration/%: tests/integration/%.c $(STATIC) $(BUILD)/config
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) -Ilibnanosrv/src -Itests -o $@ $< $(STATIC) $(LDFLAGS) $(LIBS)
# Fuzz targets built as corpus replayers (no libFuzzer needed).
$(BUILD)/tests/replay/replay.o: tests/fuzz/replay.c $(BUILD)/config
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@
$(BUILD)/tests/replay/%: tests/fuzz/%.c $(BUILD)/tests/replay/replay.o $(STATIC) $(BUILD)/config
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) -Ilibnanosrv/src -o $@ $< $(BUILD)/tests/replay/replay.o $(STATIC) $(LDFLAGS) $(LIBS)

deps:
	@tools/install-deps.sh
	@bindings/node-ffi/install.sh

cdef:
	$(PYTHON) tools/gen_cdef.py

# check-abi: symbols, header, cdef and docs agree, and abidiff finds no
# incompatible change against the committed description tests/abi/libnanosrv.abi.
# abi-baseline rewrites that description from this build (a release step,
# see docs/ABI.md).
check-abi: lib
	@NSV_BUILD=$(BUILD) CC='$(CC)' tests/abi/check-abi.sh
# The baseline comes from a plain build of its own (no TLS, no zlib, no sanitizer,
# -O2), so it does not depend on how this tree was configured.
abi-baseline:
	$(MAKE) BUILD=$(BUILD)/abi-baseline TLS= ZLIB= SAN= OPT=-O2 lib
	@NSV_BUILD=$(BUILD)/abi-baseline CC='$(CC)' tests/abi/abi.sh baseline

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

# uninstall removes exactly the files install writes (directories stay).
INSTALLED := include/nanosrv.h lib/$(notdir $(SOREAL)) lib/$(SONAME) lib/libnanosrv.so lib/libnanosrv.a \
             lib/pkgconfig/nanosrv.pc
install: lib
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 $(HDR) $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(SOREAL) $(DESTDIR)$(PREFIX)/lib/
	ln -sf $(notdir $(SOREAL)) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libnanosrv.so
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	$(PC_SED) libnanosrv/nanosrv.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/nanosrv.pc

# The real file of an older version, found through the SONAME link, goes too.
uninstall:
	@real=$$(readlink '$(DESTDIR)$(PREFIX)/lib/$(SONAME)' 2>/dev/null); \
	case "$$real" in libnanosrv.so.$(MAJOR).*) rm -f '$(DESTDIR)$(PREFIX)/lib/'"$$real";; esac
	rm -f $(addprefix '$(DESTDIR)$(PREFIX)/,$(addsuffix ',$(INSTALLED)))

clean:
	@test -n '$(BUILD)' || { echo 'clean: BUILD is empty' >&2; exit 1; }
	rm -rf '$(BUILD)'

# Long-running checks, not part of `make test`: tests/long/*.c (a 3 GiB reply
# served twice; needs about 8 GiB of memory) and tests/long/*.sh (the HTTP and
# WebSocket suites run again through build/http-proxy).
LONG_SRCS := $(sort $(wildcard tests/long/*.c))
LONGS     := $(LONG_SRCS:tests/long/%.c=$(BUILD)/tests/long/%)
.PHONY: test-long
$(BUILD)/tests/long/%: tests/long/%.c $(STATIC) $(BUILD)/config
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) -Ilibnanosrv/src -Itests -o $@ $< $(STATIC) $(LDFLAGS) $(LIBS)
test-long: $(LONGS) examples
	@NSV_BUILD=$(BUILD) NSV_TEST_TIMEOUT=1200 prove --timer --exec tests/exec $(LONGS) $(wildcard tests/long/*.sh)

# The .d files of everything built so far (-MMD -MP above).
-include $(OBJS:%=%.d) $(EXAMPLES:%=%.d) $(UNITS:%=%.d) $(ITESTS:%=%.d) $(REPLAYS:%=%.d) \
         $(BUILD)/tests/replay/replay.o.d $(LONGS:%=%.d)

-include bench/bench.mk
-include tests/fuzz/fuzz.mk
-include tests/shim/shim.mk
