#!/bin/sh
# Builds a virtual environment of the plugin tests (make test-sglang builds one per release it tests, in
# a cache outside the checkout keyed by this script and the release; SGLANG_RELEASE, default 0.5.11): one
# SGLang wheel without its dependencies, CPU torch, triton (its interpreter runs SGLang's allocator
# kernels on the CPU), the few packages `import sglang.srt.mem_cache.allocator`, `...memory_pool` and
# `sglang.srt.disaggregation.fake.conn` stop on, the pure-Python packages the scheduler and decode
# modules import (tests/support/sglang_cluster/stubs.py stands in for them only where absent), and the
# plugin's entry point `sglang.srt.plugins` in a dist-info of its own. The venv names no checkout: run
# it with the checkout on PYTHONPATH (make test-sglang does). Exits non-zero when an install fails.
set -e
VENV=${1:-.venv-sglang}
RELEASE=${SGLANG_RELEASE:-0.5.11}
PY=${PY:-python3.11}
test -x "$VENV/bin/python" || $PY -m venv "$VENV" || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q torch==2.13.0 triton==3.9.0
"$VENV/bin/pip" install -q --no-deps "sglang==$RELEASE"
"$VENV/bin/pip" install -q tqdm requests pydantic aiohttp pyzmq pillow orjson psutil pybase64 ipython \
    packaging msgspec starlette transformers==5.6.0
# what the scheduler (managers/scheduler.py) and disaggregation/decode.py import at module level, never
# called on the paths the tests run; pure Python (setproctitle: a small wheel). Not openai: with it
# 0.5.11's memory_pool import goes on to transformers' AutoConfig.register of the model configs that
# forensics.sglang.cpu stubs, a TypeError where the other tests expect the ImportError that selects the
# req-to-token stand-in; tests/support/sglang_cluster/stubs.py stands in for it
"$VENV/bin/pip" install -q setproctitle partial_json_parser dill einops uvicorn fastapi gguf
case "$RELEASE" in
  # what 0.5.23's memory_pool imports beyond those (tvm_ffi by dp_attention's all-reduce, compressed_tensors,
  # loguru and gguf by layers/quantization; prometheus_client by disaggregation/mooncake/conn.py): with them
  # its real ReqToTokenPool runs on CPU and the Mooncake manager's module imports (pins: the wheel's)
  0.5.2[3-9]*) "$VENV/bin/pip" install -q --no-deps apache-tvm-ffi==0.1.11 compressed-tensors==0.18.0 loguru gguf \
      prometheus-client ;;
esac
# this project without installing it (pip install -e . would leave kv_forensics.egg-info in the checkout,
# which then shadows the wheel in tests/whole/test_wheel.py, and would tie the venv to one checkout): the
# entry point of group sglang.srt.plugins in a dist-info of its own, which load_plugins() finds; the module
# it names comes from PYTHONPATH
SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
"$VENV/bin/pip" uninstall -q -y kv-forensics 2>/dev/null || true
rm -f "$SITE/kv_forensics_checkout.pth"
mkdir -p "$SITE/kv_forensics_checkout-0.dist-info"
printf 'Metadata-Version: 2.1\nName: kv-forensics-checkout\nVersion: 0\n' > "$SITE/kv_forensics_checkout-0.dist-info/METADATA"
printf '[sglang.srt.plugins]\nkv_forensics = forensics.sglang:register\n' > "$SITE/kv_forensics_checkout-0.dist-info/entry_points.txt"
"$VENV/bin/pip" install -q "duckdb>=2.0,<3" "polars>=1.0" "pyarrow>=15" "jinja2>=3.1" "typer>=0.12" "rich>=13" \
    "numpy>=1.26" "numba>=0.60" "pandas>=2.2" "pytest>=8" "pytest-xdist>=3.5" "filelock>=3" "hypothesis>=6"
