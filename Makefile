# make demo  — builds mirror and shows a sync, a no-op re-run and a resume against a local nginx
# make test  — installs what the tests need (apt), builds and runs every test
# make bench — mirror beside curl, wget2, aria2 and rclone (installs them); not a test
SWIFT ?= swift

.PHONY: all deps build release test demo bench clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

# The Swift runtime linked in statically: a smaller resident set and no runtime to install.
RELEASE_FLAGS = -c release --static-swift-stdlib

release: deps
	$(SWIFT) build $(RELEASE_FLAGS)

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test
	scripts/check-docs.sh "$$($(SWIFT) build --show-bin-path)/mirror"

demo: release
	@scripts/demo.sh "$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/mirror"

# Not part of `make test`: numbers, not pass/fail. See docs/PERFORMANCE.md.
bench: release
	@Benchmarks/bench.sh "$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/mirror"

clean:
	rm -rf .build
