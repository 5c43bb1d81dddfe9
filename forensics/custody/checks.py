"""`forensics verify OUT` (forensics.custody): every hash the manifest records (inputs, from the bundle
it names; outputs), the walk from every finding id a notice cites to the evidence lines in the inputs
(forensics.citations), the chain of earlier manifests, and the signature, each failure naming its file."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forensics.citations import walk
from forensics.custody import MANIFEST, SIGNATURE, UNLISTED, crypto, key_id
from forensics.errors import InputError
from forensics.intake import sha256_file


@dataclass
class Verdict:
    """What `forensics verify` found: each failure names its file."""

    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=lambda: {"inputs": 0, "outputs": 0, "chain": 0, "citations": 0})
    signer: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failures


def _load(path: Path, v: Verdict) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        v.failures.append(f"{path}: not readable ({err.strerror})")
        return None
    except ValueError as err:
        v.failures.append(f"{path}: not JSON ({err})")
        return None
    if not isinstance(data, dict):
        v.failures.append(f"{path}: not a manifest (a JSON object)")
        return None
    return data


def verify(out: Path, bundle: Path | None = None, trusted_key: Path | None = None) -> Verdict:
    """Every hash the manifest records, the chain, the signature. `bundle` overrides the bundle folder the
    manifest names; `trusted_key` (a public key PEM) must be the signer's."""
    v = Verdict()
    manifest = _load(out / MANIFEST, v)
    if manifest is None:
        return v
    run = manifest.get("run") or {}
    _check_outputs(out, run.get("outputs_sha256"), v)
    folder = bundle or (Path(run["bundle"]) if run.get("bundle") else None)
    entries = list(manifest.get("inputs") or [])
    for name, part in (("config", "bundle.toml"), ("exclusions", None)):
        e = manifest.get(name) or {}
        if e.get("sha256"):  # bundle.toml and the exclusions file: inputs of the analysis too
            where = run.get("exclusions") if part is None and not bundle else None
            entries.append({**e, "path": where or e.get("path") or part})
    entries += [e for e in manifest.get("disclosure_files") or [] if isinstance(e, dict)]  # the operator's
    _check_inputs(entries, folder, v)
    cites = walk(out, folder, {str(e.get("path")) for e in entries if e.get("sha256")})
    v.failures += cites.failures
    v.notes += cites.notes
    v.checked["citations"] = cites.cited
    _check_chain(out, run.get("previous_manifest"), v)
    _check_signature(out, trusted_key, v)
    return v


def _check_outputs(out: Path, recorded: Any, v: Verdict) -> None:
    if not isinstance(recorded, dict):
        v.failures.append(f"{out / MANIFEST}: no output hashes (run.outputs_sha256): not a finished run's manifest")
        return
    present = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - UNLISTED
    for name in sorted(set(recorded) | present):
        f = out / name
        if name not in recorded:
            v.failures.append(f"{f}: not in the manifest (added after the run)")
        elif name not in present:
            v.failures.append(f"{f}: missing (the manifest lists it)")
        elif sha256_file(f)[0] != recorded[name]:
            v.failures.append(f"{f}: changed (SHA-256 differs from the manifest's)")
        else:
            v.checked["outputs"] += 1


def _check_inputs(entries: list[dict[str, Any]], bundle: Path | None, v: Verdict) -> None:
    if bundle is None:
        v.notes.append("inputs not checked: the manifest names no bundle folder (pass --bundle)")
        return
    if not bundle.is_dir():
        v.failures.append(f"{bundle}: the bundle folder is not there (pass --bundle if it moved)")
        return
    for e in entries:
        f = bundle / str(e.get("path"))
        if not e.get("sha256"):
            v.notes.append(f"{f}: not hashed by the run ({e.get('skipped') or e.get('error') or 'no hash'})")
        elif not f.is_file():
            v.failures.append(f"{f}: missing (an input of the run)")
        elif sha256_file(f)[0] != e["sha256"]:
            v.failures.append(f"{f}: changed (SHA-256 differs from the manifest's)")
        else:
            v.checked["inputs"] += 1


def _check_chain(out: Path, link: Any, v: Verdict) -> None:
    seen: set[str] = set()
    while link:
        f = out / str(link.get("path"))
        if link.get("sha256") in seen:
            v.failures.append(f"{f}: the chain loops")
            return
        seen.add(str(link.get("sha256")))
        if not f.is_file():
            v.failures.append(f"{f}: missing: the chain is broken (a later manifest names it)")
            return
        if sha256_file(f)[0] != link.get("sha256"):
            v.failures.append(f"{f}: changed: the chain is broken (its SHA-256 is not the one the next one records)")
            return
        v.checked["chain"] += 1
        earlier = _load(f, v)
        if earlier is None:
            return
        link = (earlier.get("run") or {}).get("previous_manifest")


def _check_signature(out: Path, trusted_key: Path | None, v: Verdict) -> None:
    sig_path = out / SIGNATURE
    if not sig_path.is_file():
        if trusted_key is not None:
            v.failures.append(f"{sig_path}: missing: the manifest is not signed")
        else:
            v.notes.append(
                "unsigned: no manifest.sig, so the manifest's own bytes are not checked (investigate --sign-key "
                "signs it)"
            )
        return
    sig = _load(sig_path, v)
    if sig is None:
        return
    serialization, ed25519 = crypto()
    from cryptography.exceptions import InvalidSignature

    try:
        public = serialization.load_pem_public_key(str(sig["public_key"]).encode())
        signature = base64.b64decode(str(sig["signature"]), validate=True)
    except (KeyError, ValueError, TypeError) as err:
        v.failures.append(f"{sig_path}: malformed ({type(err).__name__}: {err})")
        return
    if not isinstance(public, ed25519.Ed25519PublicKey):
        v.failures.append(f"{sig_path}: the key is not an Ed25519 key")
        return
    try:
        public.verify(signature, (out / MANIFEST).read_bytes())
    except InvalidSignature:
        v.failures.append(f"{out / MANIFEST}: the signature in {SIGNATURE} does not match its bytes")
        return
    v.signer = key_id(str(sig["public_key"]))
    if trusted_key is None:
        v.notes.append(f"signed by key {v.signer} (the key in manifest.sig; pass --key to require a key you trust)")
        return
    try:
        trusted = trusted_key.read_text()
    except OSError as err:
        raise InputError(f"--key {trusted_key}: not readable ({err.strerror})") from None
    try:
        trusted_id = key_id(trusted)
    except InputError as err:
        raise InputError(f"--key {trusted_key}: {err}") from None
    if trusted_id != v.signer:
        v.failures.append(f"{sig_path}: signed by key {v.signer}, not by --key {trusted_key} ({trusted_id})")
