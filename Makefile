# The README's test command is `make test`: it installs what the tests need and runs them.
PYTHON ?= python3

.PHONY: install test lint bench
install:
	$(PYTHON) -m pip install -q -e '.[test]'

# tshark is needed by the capture tests; install it with apt when we are root and it is missing.
tshark:
	@command -v tshark >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tshark >/dev/null; \
	  else echo "tshark is missing: install Wireshark's tshark (e.g. apt-get install tshark)"; exit 1; fi; }

test: install tshark
	$(PYTHON) -m pytest -q

lint:
	$(PYTHON) -m ruff check uet tests tools benchmarks

bench:
	uet bench
