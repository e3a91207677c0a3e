# make demo  — builds mirror and shows a sync, a no-op re-run and a resume against a local nginx
# make test  — installs what the tests need (apt), builds and runs every test
# make bench — mirror beside curl, wget2, aria2 and rclone (installs them); not a test
# make install [PREFIX=/usr/local] [DESTDIR=] [FISH_COMPLETIONS_DIR=] — the release binary, both
#              man pages and the bash, zsh and fish completions; make uninstall removes them
# make release, make build — install only the build libraries, if missing; make demo adds nginx
SWIFT ?= swift
PREFIX ?= /usr/local
DESTDIR ?=
# fish reads PREFIX/share/fish/vendor_completions.d only when PREFIX/share is in XDG_DATA_DIRS
# (Debian's fish: not for /usr/local); /etc/fish/completions is read by every fish.
FISH_COMPLETIONS_DIR ?= $(PREFIX)/share/fish/vendor_completions.d

.PHONY: all deps deps-demo deps-test build release test demo bench install uninstall clean

all: build

# What each target installs with apt (nothing when it is all there): the libraries mirror builds
# against; for the demo nginx too; for the tests every server and tool they run.
deps:
	@scripts/install-deps.sh build

deps-demo:
	@scripts/install-deps.sh demo

deps-test:
	@scripts/install-deps.sh test

build: deps
	$(SWIFT) build

# The Swift runtime linked in statically: a smaller resident set and no runtime to install.
RELEASE_FLAGS = -c release --static-swift-stdlib

RELEASE_BINARY = $$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/mirror

release: deps
	$(SWIFT) build $(RELEASE_FLAGS)

test: deps-test
	$(SWIFT) build --build-tests
	# InstallTests installs this build rather than building one inside the test run.
	$(SWIFT) build $(RELEASE_FLAGS)
	$(SWIFT) test
	scripts/check-docs.sh "$$($(SWIFT) build --show-bin-path)/mirror"

demo: deps-demo release
	@scripts/demo.sh "$(RELEASE_BINARY)"

# Not part of `make test`: numbers, not pass/fail. See docs/PERFORMANCE.md.
bench: release
	@Benchmarks/bench.sh "$(RELEASE_BINARY)"

# MIRROR_BINARY=path installs that already-built binary instead of building the release one.
install: $(if $(MIRROR_BINARY),,release)
	@scripts/install.sh install "$(or $(MIRROR_BINARY),$(RELEASE_BINARY))" "$(DESTDIR)$(PREFIX)" "$(DESTDIR)$(FISH_COMPLETIONS_DIR)"
	@$(if $(DESTDIR),true,scripts/install.sh fish-notice "$(FISH_COMPLETIONS_DIR)")

uninstall:
	@scripts/install.sh uninstall "$(DESTDIR)$(PREFIX)" "$(DESTDIR)$(FISH_COMPLETIONS_DIR)"

clean:
	rm -rf .build
