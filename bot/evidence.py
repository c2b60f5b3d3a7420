"""The audit log as evidence: the deployment's signing key, and ``python -m bot audit
verify``.

Every store keeps the audit log as a hash chain (``agents.chain``). With
``AUDIT_SIGNING_KEY`` (an Ed25519 private key, PEM) the bot signs each chain's head
with a ``checkpoint`` entry now and then and on shutdown, and signs the anchor a
retention prune leaves. ``verify`` walks every chain and, given the public key,
checks each signature: anyone who can write to the store can still change entries,
but not without the walk, or a signature, saying where.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agents.chain import GENESIS, AuditChain, ChainReport, Seal, statement, walk

SIGNATURE_PREFIX = "ed25519:"
"""How a signature is written: ``ed25519:`` and the signature in base64."""


class KeyFileError(ValueError):
    """A key file that cannot be read, or is not an Ed25519 key of the kind asked."""


def load_signing_key(path: Path) -> Ed25519PrivateKey:
    """The private key in ``path`` (PEM, as ``openssl genpkey -algorithm ed25519`` writes).

    Raises:
        KeyFileError: The file is missing, unreadable or not an Ed25519 private key.
    """
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise KeyFileError(f"{path}: not a readable PEM private key without a password") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: not an Ed25519 key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """The public key in ``path`` (PEM; a private key's public half is taken too).

    Raises:
        KeyFileError: The file is missing, unreadable or not an Ed25519 key.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot be read") from exc
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, binascii.Error):
        return load_signing_key(path).public_key()
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path}: not an Ed25519 key")
    return key


def sealer(key: Ed25519PrivateKey) -> Seal:
    """Signs what the audit chain attests with ``key``."""

    def seal(text: str) -> str:
        return SIGNATURE_PREFIX + base64.b64encode(key.sign(text.encode())).decode()

    return seal


def signed_by(key: Ed25519PublicKey, text: str, signature: str | None) -> bool:
    """Whether ``signature`` is ``key``'s of ``text``."""
    if not signature or not signature.startswith(SIGNATURE_PREFIX):
        return False
    try:
        key.verify(base64.b64decode(signature.removeprefix(SIGNATURE_PREFIX)), text.encode())
    except (InvalidSignature, ValueError, binascii.Error):
        return False
    return True


@dataclass
class Verdict:
    """What ``verify`` found in one chain: the walk, and the signatures' part of it."""

    report: ChainReport
    problems: list[str] = field(default_factory=list)
    """What does not hold, one line each (empty: the chain is evidence)."""
    notes: list[str] = field(default_factory=list)
    """What holds, one line each."""

    @property
    def holds(self) -> bool:
        return not self.problems


def verify(
    chain: AuditChain, key: Ed25519PublicKey | None = None, *, alone: bool = True
) -> Verdict:
    """Walk ``chain``; with ``key``, check its anchor's and checkpoints' signatures too.

    With a key, a chain must have a good checkpoint: one rewritten, emptied or replaced
    from its start would otherwise hold. ``alone``: the store's only chain (a cluster's
    group nothing was ever written to says nothing)."""
    report = walk(chain.lines, chain.anchor, chain.chain)
    verdict = Verdict(report)
    name = f"chain {chain.chain}"
    if report.finding is not None:
        finding = report.finding
        verdict.problems.append(f"{name}: entry {finding.seq} {finding.fault}: {finding.detail}")
        return verdict
    anchor = chain.anchor
    if chain.head is not None and chain.head != report.head:
        verdict.problems.append(
            f"{name}: entry {report.head.seq + 1} removed: the chain's head is entry"
            f" {chain.head.seq}, its last entry {report.head.seq}"
        )
        return verdict
    written = report.entries or report.unchained or anchor is not None or chain.head is not None
    if not written and not alone:
        return verdict  # a cluster's group nothing was ever written to
    span = f" (entries {report.first} to {report.head.seq})" if report.entries else ""
    before = f", after {report.unchained} written before the chain" if report.unchained else ""
    verdict.notes.append(f"{name}: {report.entries} entries hold{span}{before}")
    pruned = anchor is not None and anchor.hash != GENESIS
    if anchor is not None:
        what = f"{anchor.removed} entries" if pruned else "entries written before the chain"
        verdict.notes.append(f"{name}: {what} removed by retention, up to entry {anchor.seq}")
    if key is None:
        return verdict
    if (
        anchor is not None
        and pruned
        and not signed_by(
            key, statement("anchor", chain.chain, anchor.seq, anchor.hash), anchor.signature
        )
    ):
        verdict.problems.append(
            f"{name}: the anchor left by retention (entry {anchor.seq}) is not signed by this key"
        )
    good = 0
    for point in report.checkpoints:
        if signed_by(key, point.statement, point.signature):
            good += 1
        else:
            verdict.problems.append(
                f"{name}: checkpoint at entry {point.seq} is not signed by this key"
            )
    if not report.checkpoints and (written or alone):
        verdict.problems.append(
            f"{name}: no signed checkpoint; nothing shows it was not emptied, replaced or rewritten"
        )
    elif good:
        last = report.checkpoints[-1].seq
        after = report.head.seq - last
        verdict.notes.append(
            f"{name}: {good} checkpoint{'s' if good > 1 else ''} signed by this key,"
            f" the last at entry {last}"
            + (f" ({after} entries after it not signed yet)" if after else "")
        )
    return verdict
