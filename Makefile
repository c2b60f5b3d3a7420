# The two commands of the README: `make run` and `make test`. Both build what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck bench bench-peers reset-demo clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Console chat on the embedded defaults unless a platform is configured; the bot
# itself says whether one is (each adapter reads its own settings).
run: $(STAMP)
	@if $(BIN)/python -c 'import sys; from bot.__main__ import platforms_configured; sys.exit(not platforms_configured())'; then \
		exec $(BIN)/python -m bot; \
	else \
		exec $(BIN)/python -m bot console; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy agents bot examples adapters tests bench

test: $(STAMP)
	scripts/ensure-redis
	scripts/ensure-redis-cluster
	scripts/ensure-postgres
	scripts/ensure-chromium
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy agents bot examples adapters tests bench
	$(BIN)/python -m pytest

bench: $(STAMP)
	scripts/ensure-redis
	scripts/ensure-redis-cluster
	scripts/ensure-postgres
	$(BIN)/python -m bench

# The same approval cycle on LangGraph, LangChain and Pydantic AI, in a venv of its
# own so the peers never change what the bot runs or is tested with.
PEERS := .venv-peers
bench-peers: pyproject.toml
	test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet -e '.[bench-peers]'
	$(PEERS)/bin/python -m bench.peers

# The demo afresh: its ops database and the bot's default store (cards, threads, the
# audit log) under data/. A STORE_URL or OPS_DB_PATH elsewhere is left alone.
DEMO_FILES := $(foreach db,data/ops.db data/approval-bot.db,$(db) $(db)-wal $(db)-shm)
reset-demo:
	rm -f $(DEMO_FILES)

clean:
	rm -rf $(VENV) $(PEERS) .mypy_cache .pytest_cache .ruff_cache
