# Two commands get a newcomer going; each installs what it needs on first use.
#   make broker   a development broker on PLAINTEXT://127.0.0.1:9092, data in ./odradek-data,
#                 configured by config/server.properties
#   make test     ruff, mypy, then the test suite against real clients (installs them, kcat
#                 and Java first)
#   make dist     a wheel and a source distribution in dist/
#
# Python packages go into a virtual environment, .venv, made from $(PYTHON). It sees none of
# the packages installed for $(PYTHON) itself, only what pyproject.toml declares, so a
# dependency missing from pyproject.toml fails here as it would for a user. (A .venv made
# with --system-site-packages, as this Makefile once did, is made again.) Debian packages are
# installed with apt-get, as root or via sudo.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check

# Debian packages the tests need: add one by adding its name.
TEST_DEBIAN_PACKAGES := kcat zookeeper chromium postgresql
# Java for the Spark tests: Debian's JRE, unless a java is already there.
JAVA_DEBIAN_PACKAGE := openjdk-17-jre-headless
HAVE_JAVA := $(shell command -v java 2>/dev/null || ls "$$JAVA_HOME/bin/java" 2>/dev/null)

# A .venv that sees the system's packages hides undeclared dependencies: make it again.
# (Read by make itself, so that targets run with a bare PATH, such as check-java, need no grep.)
STALE_VENV := $(if $(wildcard $(VENV)/pyvenv.cfg),$(findstring include-system-site-packages = true,$(file < $(VENV)/pyvenv.cfg)))
REMAKE_VENV := $(if $(STALE_VENV),FORCE)
FORCE:

.PHONY: broker test install install-test debian-packages check-java lint typecheck bench dist FORCE
.DEFAULT_GOAL := install

broker: install
	$(PY) -m odradek server config/server.properties

# The tests run in $(TEST_WORKERS) processes (pytest-xdist), each test file whole in one of
# them (tests/conftest.py): most of a test's time is spent waiting on brokers, ZooKeeper and
# Spark, so three overlap well even on two cores.
TEST_WORKERS ?= 3

test: install-test lint typecheck
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=25

lint: $(VENV)/.installed-test
	$(PY) -m ruff check odradek tests benchmarks

# mypy over the files pyproject.toml's [tool.mypy] lists.
typecheck: $(VENV)/.installed-test
	$(PY) -m mypy

bench: install-test
	$(PY) benchmarks/broker_bench.py

# What users install: `pip install dist/odradek-*.whl` (README, "Install from a wheel"). The
# wheel is built from the sdist, so a file the sdist lacks fails here too.
dist: $(VENV)/.installed-dist
	rm -rf dist
	$(PY) -m build --outdir dist .

# Byte-compile as a wheel install would, even where PYTHONDONTWRITEBYTECODE is set: the
# broker then starts in a fraction of a second instead of compiling itself at each start.
install: $(VENV)/.installed
	@$(PY) -m compileall -q odradek

install-test: debian-packages check-java $(VENV)/.installed-test
	@$(PY) -m compileall -q odradek

debian-packages:
	@.ci/apt-install $(TEST_DEBIAN_PACKAGES) $(if $(HAVE_JAVA),,$(JAVA_DEBIAN_PACKAGE))

# Spark 4 runs on Java 17 or newer, found through JAVA_HOME or PATH (as spark-submit does).
check-java:
	@java="$${JAVA_HOME:+$$JAVA_HOME/bin/}java"; found="no java on PATH or in JAVA_HOME"; version=0; \
	if command -v "$$java" >/dev/null; then \
	  version=$$("$$java" -version 2>&1 | sed -n 's/.* version "\(1\.\)\{0,1\}\([0-9]*\).*/\2/p' | head -n 1); \
	  found="found Java $${version:-of an unknown version}"; \
	fi; \
	[ "$${version:-0}" -ge 17 ] || { \
	  echo "error: the Spark tests need Java 17 or newer ($$found): apt-get install $(JAVA_DEBIAN_PACKAGE), or point JAVA_HOME at one" >&2; \
	  exit 1; }

$(PY): $(REMAKE_VENV)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "error: Odradek needs Python 3.11 or newer; $(PYTHON) is $$($(PYTHON) --version 2>&1): run make PYTHON=python3.11" >&2; \
	  exit 1; }
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || \
	  .ci/apt-install $$($(PYTHON) -c 'import sys; print("python%d.%d-venv" % sys.version_info[:2])')
	@if [ -n "$(STALE_VENV)" ]; then \
	  echo "Recreating $(VENV): it was made with --system-site-packages, which hides dependencies pyproject.toml lacks"; \
	  rm -rf $(VENV); fi
	@echo "Creating the virtual environment $(VENV) (from $$($(PYTHON) -c 'import sys; print(sys.executable)'))"
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }

# Installed again when pyproject.toml changes (or the venv was made again).
$(VENV)/.installed: pyproject.toml $(REMAKE_VENV) | $(PY)
	$(PIP) install -e .
	@touch $@

$(VENV)/.installed-dist: pyproject.toml $(REMAKE_VENV) | $(PY)
	$(PIP) install -e '.[dist]'
	@touch $@ $(VENV)/.installed

# No -q: the first install downloads PySpark (about 400 MB), and pip shows its progress.
$(VENV)/.installed-test: pyproject.toml $(REMAKE_VENV) | $(PY)
	$(PIP) install -e '.[test]'
	@touch $@ $(VENV)/.installed
