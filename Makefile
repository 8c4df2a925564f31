# Two commands get a newcomer going; each installs what it needs on first use.
#   make broker   start a broker on PLAINTEXT://127.0.0.1:9092 with data in ./odradek-data
#   make test     run the test suite against real clients (installs them and kcat first)

PYTHON ?= python3
PIP := $(PYTHON) -m pip --disable-pip-version-check -q

.PHONY: broker test install install-test lint bench

# Byte-compile as a wheel install would, even where PYTHONDONTWRITEBYTECODE is set: the
# broker then starts in a fraction of a second instead of compiling itself at each start.
install:
	@$(PYTHON) -c "import odradek.cli.main, kio, crc32c, cramjam" 2>/dev/null || $(PIP) install -e .
	@$(PYTHON) -m compileall -q odradek

install-test:
	@command -v kcat >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat; }
	@$(PIP) install -e '.[test]'
	@$(PYTHON) -m compileall -q odradek

broker: install
	$(PYTHON) -m odradek server

test: install-test
	$(PYTHON) -m ruff check odradek tests benchmarks
	$(PYTHON) -m pytest -q

bench: install-test
	$(PYTHON) benchmarks/broker_bench.py
