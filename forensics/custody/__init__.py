"""Chain of custody of an investigate output folder (issue #51).

A run's manifest.json hashes every input and every output. Three things make it something a third
party can check later:
- **The chain.** A run that writes into an --out that already holds a manifest keeps that manifest as
  custody/<its sha256>.json and names it in `run.previous_manifest`; the kept manifest names its own
  predecessor in turn. `forensics notices`, which rewrites the manifest's hashes of the notices, chains
  the same way. Nothing of an earlier run's record is lost by a rerun.
- **The signature.** With an operator's Ed25519 key (`--sign-key`, or $KVF_SIGN_KEY), manifest.sig
  holds a detached signature over manifest.json's bytes and the public key that made it.
- **The check** (checks.py). `forensics verify OUT` recomputes every hash the manifest records (inputs, from the
  bundle it names; outputs), walks from every finding id a notice cites to its row of the pack's
  evidence.csv and on to the evidence lines in the inputs (forensics.citations), walks the chain, and
  checks the signature, naming each file that fails.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from forensics.errors import InputError
from forensics.intake import sha256_file
from forensics.outputs import atomic_open, make_private, write_json

CUSTODY = "custody"  # OUT/custody/<sha256>.json: the manifests this folder held before, by their own hash
SIGNATURE = "manifest.sig"
MANIFEST = "manifest.json"
KEY_ENV = "KVF_SIGN_KEY"
# files of OUT that outputs_sha256 does not list: the manifest itself, and the signature made over it
UNLISTED = frozenset({MANIFEST, SIGNATURE})


def crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as err:  # a dependency of the project: only a broken install lacks it
        raise InputError(f"signing needs the 'cryptography' package ({err})") from None
    return serialization, ed25519


def signing_key(path: Path | None) -> Any:
    """The Ed25519 private key of `path`, else of $KVF_SIGN_KEY, else None (the run is not signed)."""
    if path is None and os.environ.get(KEY_ENV):
        path = Path(os.environ[KEY_ENV])
    if path is None:
        return None
    serialization, ed25519 = crypto()
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except OSError as err:
        raise InputError(f"--sign-key {path}: not readable ({err.strerror})") from None
    except (ValueError, TypeError) as err:
        raise InputError(f"--sign-key {path}: not an unencrypted PEM private key ({err})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise InputError(f"--sign-key {path}: a {type(key).__name__}, not an Ed25519 key (forensics keygen makes one)")
    return key


def _public_pem(key: Any) -> str:
    """The PEM text of a private key's public half."""
    serialization, _ = crypto()
    return str(
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def key_id(public_pem: str) -> str:
    """A short name of a public key: the first 16 hex digits of the SHA-256 of its raw 32 bytes (so the
    same key in any PEM layout has the same name)."""
    serialization, _ = crypto()
    try:
        key = serialization.load_pem_public_key(public_pem.encode())
    except (ValueError, TypeError) as err:
        raise InputError(f"not a PEM public key ({err})") from None
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def keygen(prefix: Path) -> tuple[Path, Path]:
    """PREFIX.key (the private key, readable by its owner only) and PREFIX.pub; never overwrites."""
    serialization, ed25519 = crypto()
    private, public = prefix.with_name(prefix.name + ".key"), prefix.with_name(prefix.name + ".pub")
    for p in (private, public):
        if p.exists():
            raise InputError(f"{p}: exists; keygen does not overwrite a key")
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    public.write_text(_public_pem(key))
    return private, public


def sign(out: Path, key: Any) -> None:
    """OUT/manifest.sig: the Ed25519 signature of manifest.json's bytes, with the key that made it."""
    data = (out / MANIFEST).read_bytes()
    pem = _public_pem(key)
    write_json(
        {
            "algorithm": "Ed25519",
            "signed_file": MANIFEST,
            "manifest_sha256": hashlib.sha256(data).hexdigest(),
            "public_key": pem,
            "key_id": key_id(pem),
            "signature": base64.b64encode(key.sign(data)).decode(),
        },
        out / SIGNATURE,
    )


def keep_previous(previous_out: Path, out: Path) -> dict[str, str] | None:
    """Carry the chain into `out` (a staging folder, or OUT itself): the custody/ files of
    `previous_out` and its manifest.json, kept as custody/<sha256>.json. Returns the link the new
    manifest records, or None when `previous_out` holds no manifest."""
    old = previous_out / MANIFEST
    if not old.is_file():
        return None
    kept = out / CUSTODY
    kept.mkdir(exist_ok=True)
    if previous_out != out and (previous_out / CUSTODY).is_dir():
        for f in sorted((previous_out / CUSTODY).glob("*.json")):
            shutil.copyfile(f, kept / f.name)
    digest = sha256_file(old)[0]
    shutil.copyfile(old, kept / f"{digest}.json")
    make_private(kept / f"{digest}.json")
    return {"sha256": digest, "path": f"{CUSTODY}/{digest}.json"}


def rewrite_manifest(out: Path, change: Callable[[dict[str, Any]], None], key: Any = None) -> str:
    """Change OUT's manifest in place as one link of the chain: the manifest as it was is kept in
    custody/, the new one names it, its outputs list the kept file, and the signature follows: made
    again with `key`, else removed (a signature over other bytes would only fail verify). Returns what
    became of the signature, for the command to say."""
    path = out / MANIFEST
    manifest = json.loads(path.read_text())
    link = keep_previous(out, out)
    change(manifest)
    run = manifest.setdefault("run", {})
    run["previous_manifest"] = link
    if link is not None:
        hashes = run.setdefault("outputs_sha256", {})
        hashes[link["path"]] = sha256_file(out / link["path"])[0]
        run["outputs_sha256"] = dict(sorted(hashes.items()))
    with atomic_open(path) as fh:
        fh.write(json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n")
    if key is not None:
        sign(out, key)
        return "signed again"
    if (out / SIGNATURE).exists():
        (out / SIGNATURE).unlink()
        return f"{SIGNATURE} removed: the manifest changed; sign it again with --sign-key"
    return "unsigned"
