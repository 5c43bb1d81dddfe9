#!/bin/sh
# Builds the plugin tests' virtual environment (make test-sglang): one SGLang wheel without its
# dependencies, CPU torch, triton (its interpreter runs SGLang's allocator kernels on the CPU), the
# few packages `import sglang.srt.mem_cache.allocator`, `...memory_pool` and
# `sglang.srt.disaggregation.fake.conn` stop on, and this project (editable, so the plugin's
# entry point `sglang.srt.plugins` is registered). Exits non-zero when an install fails (no network).
set -e
VENV=${1:-.venv-sglang}
RELEASE=${SGLANG_RELEASE:-0.5.11}
PY=${PY:-python3.11}
test -x "$VENV/bin/python" || $PY -m venv "$VENV" || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q torch==2.13.0 triton==3.9.0
"$VENV/bin/pip" install -q --no-deps "sglang==$RELEASE"
"$VENV/bin/pip" install -q tqdm requests pydantic aiohttp pyzmq pillow orjson psutil pybase64 ipython \
    packaging msgspec starlette transformers==5.6.0
"$VENV/bin/pip" install -q --no-deps -e .
"$VENV/bin/pip" install -q "duckdb>=2.0,<3" "polars>=1.0" "pyarrow>=15" "jinja2>=3.1" "typer>=0.12" "rich>=13" \
    "numpy>=1.26" "numba>=0.60" "pandas>=2.2" "pytest>=8" "pytest-xdist>=3.5" "filelock>=3" "hypothesis>=6"
