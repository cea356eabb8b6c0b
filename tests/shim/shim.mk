# shim.mk - builds the LD_PRELOAD fault shim (tests/shim/shim.c) with the
# tests (included by the top Makefile). Never sanitized: it is preloaded into
# normal and sanitizer builds alike.
NSV_SHIM := $(BUILD)/tests/shim/libnsvshim.so
TEST_EXTRAS += $(NSV_SHIM)
tests: $(TEST_EXTRAS)

$(NSV_SHIM): tests/shim/shim.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -g -O2 -Wall -Wextra -Werror -fPIC -shared -o $@ $< -ldl
