# make demo  — builds mirror and shows a sync, a no-op re-run and a resume against a local nginx
# make test  — installs what the tests need (apt), builds and runs every test
SWIFT ?= swift

.PHONY: all deps build release test demo clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test
	scripts/check-docs.sh "$$($(SWIFT) build --show-bin-path)/mirror"

demo: release
	@scripts/demo.sh "$$($(SWIFT) build -c release --show-bin-path)/mirror"

clean:
	rm -rf .build
