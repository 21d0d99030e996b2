# `make test` is the one command that sets up a fresh machine and runs the whole suite.
.PHONY: test tools lint demo

test: tools
	cargo test --all-targets

tools:
	bash scripts/install-test-tools.sh
	bash scripts/install-k8s-test-tools.sh
	bash scripts/install-argo-models.sh >/dev/null
	bash scripts/install-k6.sh >/dev/null
	bash scripts/install-web-test-tools.sh
	bash scripts/install-otel-test-tools.sh
	bash scripts/install-h3-test-tools.sh

lint:
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings

demo:
	cargo run --release -- demo
