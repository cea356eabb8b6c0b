# fuzz.mk - libFuzzer builds of every tests/fuzz/fuzz_*.c (included by the
# top Makefile). `make fuzz` builds them into $(BUILD)/fuzz/ and runs each for
# FUZZ_SECONDS on a scratch copy of its seed corpus, so inputs found while
# fuzzing never land in the repository. Crashers are written to
# $(BUILD)/fuzz/artifacts-<name>/; add the useful ones to the seed corpus.
#
# The library is built once with the same instrumentation into an archive,
# so each target pulls in only the objects it uses and new targets need no
# edits here. A target uses tests/fuzz/<name>.dict when present, otherwise the
# dictionary named by FUZZ_DICT_<name>.

FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_OUT     ?= $(BUILD)/fuzz
FUZZ_FLAGS   ?=
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
                -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
                -pthread -Ilibnanosrv/include -Ilibnanosrv/src \
                $(filter -DNSV_WITH_%,$(CFLAGS)) $(TLS_CFLAGS)

FUZZ_NAMES := $(FUZZ_SRCS:tests/fuzz/%.c=%)
FUZZ_BINS  := $(FUZZ_NAMES:%=$(FUZZ_OUT)/%)

FUZZ_DICT_fuzz_http_parse := tests/fuzz/http.dict
FUZZ_DICT_fuzz_chunked    := tests/fuzz/http.dict

# $(call fuzz_dict,name): -dict=... option for a target, or nothing.
fuzz_dict = $(addprefix -dict=,$(firstword $(wildcard tests/fuzz/$(1).dict $(FUZZ_DICT_$(1)))))

.PHONY: fuzz fuzz-build $(FUZZ_NAMES:%=fuzz-run-%)

fuzz: $(FUZZ_NAMES:%=fuzz-run-%)
fuzz-build: $(FUZZ_BINS)

FUZZ_OBJS := $(SRCS:%.c=$(FUZZ_OUT)/obj/%.o)
FUZZ_LIB  := $(FUZZ_OUT)/libnanosrv-fuzz.a

$(FUZZ_OUT)/obj/%.o: %.c $(BUILD)/config
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPFLAGS) -c $< -o $@
$(FUZZ_LIB): $(FUZZ_OBJS)
	rm -f $@ && ar rcs $@ $^
$(FUZZ_OUT)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPFLAGS) -o $@ $< $(FUZZ_LIB) $(LIBS)

define FUZZ_RUN_RULE
fuzz-run-$(1): $(FUZZ_OUT)/$(1)
	@rm -rf $(FUZZ_OUT)/corpus-$(1) && mkdir -p $(FUZZ_OUT)/corpus-$(1) $(FUZZ_OUT)/artifacts-$(1)
	@if [ -d tests/fuzz/corpus/$(1) ]; then cp -R tests/fuzz/corpus/$(1)/. $(FUZZ_OUT)/corpus-$(1)/; fi
	$(FUZZ_OUT)/$(1) -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_OUT)/artifacts-$(1)/ $(call fuzz_dict,$(1)) $(FUZZ_FLAGS) \
	    $(FUZZ_OUT)/corpus-$(1)
endef
$(foreach n,$(FUZZ_NAMES),$(eval $(call FUZZ_RUN_RULE,$(n))))

-include $(FUZZ_OBJS:%=%.d) $(FUZZ_BINS:%=%.d)
