"""The chain of custody (forensics.custody, issue #51): `forensics verify OUT` passes on an untouched
output folder, and fails, naming the file, after one byte of any input, output or (signed) manifest
changes, after a file is added or removed, after the chain of earlier manifests is broken, and when the
signature is not the trusted key's. The reruns that make the chain go through the real commands."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from forensics.cli.app import app
from forensics.custody import CUSTODY, SIGNATURE, keygen
from forensics.custody.checks import verify
from forensics.pipeline import Custody, investigate
from forensics.simulate import build_config, simulate

runner = CliRunner()


def flip(path: Path, rng: random.Random) -> int:
    """One byte of `path` changed (xor 0x01, so the length stays); returns its offset."""
    data = bytearray(path.read_bytes())
    at = rng.randrange(len(data))
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    return at


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("keys")
    ours, theirs = keygen(d / "dpo"), keygen(d / "other")
    return {"key": ours[0], "pub": ours[1], "other_pub": theirs[1]}


@pytest.fixture(scope="module")
def chained(tmp_path_factory: pytest.TempPathFactory, keys: dict[str, Path]) -> tuple[Path, Path]:
    """A small simulated incident investigated twice into the same --out (signed), then its notices
    rendered again (signed): a chain of two earlier manifests."""
    tmp = tmp_path_factory.mktemp("custody")
    bundle = tmp / "sim" / "bundle"
    simulate(tmp / "sim", build_config("default", seed=5, requests=60))
    out = tmp / "out"
    investigate(bundle, out, custody=Custody(operator="first", sign_key=keys["key"]))
    investigate(bundle, out, custody=Custody(operator="second", sign_key=keys["key"]))
    result = runner.invoke(app, ["notices", str(out), "--sign-key", str(keys["key"])])
    assert result.exit_code == 0, result.output
    assert "manifest: signed again" in result.output
    return bundle, out


def copy_of(chained: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    bundle, out = chained
    shutil.copytree(bundle, tmp_path / "bundle")
    shutil.copytree(out, tmp_path / "out")
    return tmp_path / "bundle", tmp_path / "out"


def test_an_untouched_chained_signed_folder_verifies(chained: tuple[Path, Path], keys: dict[str, Path]) -> None:
    bundle, out = chained
    manifest = json.loads((out / "manifest.json").read_text())
    v = verify(out, trusted_key=keys["pub"])
    assert v.ok, v.failures
    # the evidence files, bundle.toml and the exclusions file, each as the run hashed it
    hashed = [e for e in [*manifest["inputs"], manifest["config"], manifest["exclusions"]] if e.get("sha256")]
    assert manifest["config"]["sha256"] and len(hashed) > len(manifest["inputs"])
    outputs = len(manifest["run"]["outputs_sha256"])  # no pack: no evidence.csv to walk the citations to
    assert v.checked == {"inputs": len(hashed), "outputs": outputs, "chain": 2, "citations": 0}
    # the chain: notices' manifest -> the second run's -> the first run's (which names none)
    second = json.loads((out / manifest["run"]["previous_manifest"]["path"]).read_text())
    first = json.loads((out / second["run"]["previous_manifest"]["path"]).read_text())
    assert (second["run"]["operator"], first["run"]["operator"]) == ("second", "first")
    assert first["run"]["previous_manifest"] is None
    assert len(list((out / CUSTODY).glob("*.json"))) == 2
    result = runner.invoke(app, ["verify", str(out), "--key", str(keys["pub"])])
    assert result.exit_code == 0 and result.output.startswith("verified:"), result.output


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_byte_of_any_output_input_or_the_manifest_fails_naming_the_file(
    chained: tuple[Path, Path], keys: dict[str, Path], tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    bundle, out = copy_of(chained, tmp_path)
    outputs = sorted(json.loads((out / "manifest.json").read_text())["run"]["outputs_sha256"])
    inputs = sorted(p for p in bundle.rglob("*") if p.is_file())
    for target in (out / rng.choice(outputs), rng.choice(inputs), out / "manifest.json"):
        saved = target.read_bytes()
        flip(target, rng)
        v = verify(out, bundle, keys["pub"])
        assert not v.ok and any(str(target) in f for f in v.failures), (target, v.failures)
        target.write_bytes(saved)
    assert verify(out, bundle, keys["pub"]).ok


def test_added_removed_files_a_broken_chain_and_a_foreign_key_fail(
    chained: tuple[Path, Path], keys: dict[str, Path], tmp_path: Path
) -> None:
    bundle, out = copy_of(chained, tmp_path)
    (out / "extra.csv").write_text("a\n")
    assert any("extra.csv: not in the manifest" in f for f in verify(out, bundle).failures)
    (out / "extra.csv").unlink()
    gone = out / "hazards.csv"
    saved = gone.read_bytes()
    gone.unlink()
    assert any(f"{gone}: missing" in f for f in verify(out, bundle).failures)
    gone.write_bytes(saved)
    # the chain: an earlier manifest removed (from the outputs' list too, so only the chain can tell)
    manifest = json.loads((out / "manifest.json").read_text())
    link = out / manifest["run"]["previous_manifest"]["path"]
    kept = link.read_bytes()
    link.unlink()
    failures = verify(out, bundle).failures
    assert any(f"{link}: missing: the chain is broken" in f for f in failures), failures
    link.write_bytes(kept)
    # the signature: by another key, or its file gone while a key is required
    result = runner.invoke(app, ["verify", str(out), "--key", str(keys["other_pub"])])
    assert result.exit_code == 1 and "not by --key" in result.output, result.output
    (out / SIGNATURE).unlink()
    assert any("missing: the manifest is not signed" in f for f in verify(out, bundle, keys["pub"]).failures)
    v = verify(out, bundle)  # no key required: unsigned is said, and the manifest's own bytes are unchecked
    assert v.ok and any(n.startswith("unsigned") for n in v.notes)


def test_notices_without_a_key_remove_the_stale_signature(chained: tuple[Path, Path], tmp_path: Path) -> None:
    bundle, out = copy_of(chained, tmp_path)
    result = runner.invoke(app, ["notices", str(out)])
    assert result.exit_code == 0 and f"{SIGNATURE} removed" in result.output, result.output
    v = verify(out, bundle)
    assert v.ok and v.checked["chain"] == 3 and v.signer is None, v.failures
