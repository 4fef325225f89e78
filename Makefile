# Thin wrapper: the real logic lives in scripts/ and meson.
.PHONY: demo test build clean
demo:
	@scripts/demo.sh
test:
	@scripts/test.sh
build:
	@scripts/build.sh build
clean:
	rm -rf build build-tsan build-asan build-fuzz build-aarch64
