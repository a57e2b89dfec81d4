# The README's test command is `make test`: it installs what the tests need and runs them.
PYTHON ?= python3

.PHONY: install sysdeps test lint bench
install:
	$(PYTHON) -m pip install -q -e '.[test]'

# tshark (capture tests) and iproute2 (`ip netns`, the live IPv6 test) are Debian packages:
# install the missing ones with apt when we are root.
sysdeps:
	@need=""; command -v tshark >/dev/null 2>&1 || need="$$need tshark"; \
	command -v ip >/dev/null 2>&1 || need="$$need iproute2"; \
	if [ -n "$$need" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null; \
	  else echo "missing:$$need (install them, e.g. apt-get install$$need)"; exit 1; fi; fi

test: install sysdeps
	$(PYTHON) -m pytest -q

lint:
	$(PYTHON) -m ruff check uet tests tools benchmarks
	$(PYTHON) -m mypy

bench:
	uet bench
