"""``python -m bot audit verify [--public-key F]`` on what a real bot wrote: the chain
holds, and with ``AUDIT_SIGNING_KEY`` its checkpoints and retention anchor are signed;
an entry edited, deleted or inserted behind the store's back is named; a wrong key,
a missing checkpoint or a bad key file is a clear answer, never a traceback."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agents.snapshot import utcnow
from agents.stores import open_store
from agents.stores.redis import RedisStore
from bot.evidence import load_signing_key, sealer
from tests.bot.test_audit import audit
from tests.bot.test_checks import check_live
from tests.bot.test_console import console_demo
from tests.stores.conftest import REDIS_URL, redis_prefix, with_prefix
from tests.stores.test_audit_chain import unguarded

CYCLE = ("delete record abc-123", "d keep it", "refund order A-1001 150", "e", "", "120")
"""A decline, then an edit approved and run: eight entries (each card shown too)."""


def keys(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh Ed25519 key pair, as ``openssl genpkey -algorithm ed25519`` writes them."""
    key = Ed25519PrivateKey.generate()
    private, public = tmp_path / "audit.pem", tmp_path / "audit.pub.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


async def verify(tmp_path: Path, *argv: str, **env: str) -> tuple[int, str, str]:
    return await audit(tmp_path, "verify", *argv, **env)


async def test_a_clean_chain_verifies_with_and_without_checkpoints(tmp_path: Path) -> None:
    await console_demo(tmp_path, *CYCLE)  # no key: nothing signed
    code, out, err = await verify(tmp_path)
    assert code == 0, err
    assert "chain 0: 8 entries hold (entries 1 to 8)" in out
    assert "audit verified" in out

    private, public = keys(tmp_path)
    code, _, err = await verify(tmp_path, "--public-key", str(public))
    assert code == 1
    assert "no signed checkpoint" in err

    # The same conversation goes on with a key: its shutdown signs the head.
    await console_demo(tmp_path, "refund order A-1002 90", "a", AUDIT_SIGNING_KEY=str(private))
    code, out, err = await verify(tmp_path, "--public-key", str(public))
    assert code == 0, err
    assert "1 checkpoint signed by this key, the last at entry" in out

    # Another key's public half: every checkpoint is named.
    (tmp_path / "other").mkdir()
    _, stranger = keys(tmp_path / "other")
    code, _, err = await verify(tmp_path, "--public-key", str(stranger))
    assert code == 1
    assert "is not signed by this key" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("tamper", ["edit", "delete", "insert"])
async def test_sqlite_a_changed_log_is_caught_at_the_entry(tmp_path: Path, tamper: str) -> None:
    await console_demo(tmp_path, *CYCLE)
    with closing(sqlite3.connect(tmp_path / "bot.db")) as conn:
        unguarded(conn)
        (line,) = conn.execute("SELECT entry FROM audit WHERE seq = 3").fetchone()
        if tamper == "edit":  # the decline becomes an approval
            changed = line.replace('"declined"', '"approved"')
            conn.execute("UPDATE audit SET entry = ? WHERE seq = 3", (changed,))
        elif tamper == "delete":
            conn.execute("DELETE FROM audit WHERE seq = 3")
        else:
            conn.execute("INSERT INTO audit VALUES (99, 'x', NULL, ?)", (line,))
        conn.commit()
    code, _, err = await verify(tmp_path)
    assert code == 1
    expected = {
        "edit": "chain 0: entry 3 changed: its content does not match its hash",
        "delete": "chain 0: entry 3 removed: entry 3 missing before entry 4",
        "insert": "chain 0: entry 3 inserted: a second entry 3 after entry 8",
    }
    assert expected[tamper] in err
    assert "NOT verified" in (await verify(tmp_path))[1]


@pytest.mark.redis
@pytest.mark.parametrize("tamper", ["edit", "delete", "insert"])
async def test_redis_a_changed_log_is_caught_at_the_entry(tmp_path: Path, tamper: str) -> None:
    async with redis_prefix() as prefix:
        url = with_prefix(REDIS_URL, prefix)
        private, public = keys(tmp_path)
        await console_demo(tmp_path, *CYCLE, STORE_URL=url, AUDIT_SIGNING_KEY=str(private))
        code, out, err = await verify(tmp_path, "--public-key", str(public), STORE_URL=url)
        assert code == 0, err
        assert "chain 0: 9 entries hold" in out  # eight, and the shutdown's checkpoint

        store = open_store(url)
        assert isinstance(store, RedisStore)
        try:
            key = store.keys.audit_all()
            line = str(await store._redis.lindex(key, 2))
            if tamper == "edit":
                await store._redis.lset(key, 2, line.replace('"declined"', '"approved"'))
            elif tamper == "delete":
                await store._redis.lrem(key, 1, line)
            else:
                await store._redis.linsert(key, "AFTER", line, line)
        finally:
            await store.close()
        code, _, err = await verify(tmp_path, "--public-key", str(public), STORE_URL=url)
        assert code == 1
        assert {"edit": "entry 3 changed", "delete": "entry 3 removed", "insert": "inserted"}[
            tamper
        ] in err


async def test_retention_keeps_what_remains_verifiable_by_its_signed_anchor(
    tmp_path: Path,
) -> None:
    private, public = keys(tmp_path)
    await console_demo(tmp_path, *CYCLE, AUDIT_SIGNING_KEY=str(private))
    store = open_store(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        # The retention pass as the sweeper runs it, with the deployment's key.
        seal = sealer(load_signing_key(private))
        assert await store.prune_audit(utcnow() + timedelta(seconds=1), limit=4, seal=seal) == 4
    finally:
        await store.close()
    code, out, err = await verify(tmp_path, "--public-key", str(public))
    assert code == 0, err
    assert "4 entries removed by retention, up to entry 4" in out
    assert "chain 0: 5 entries hold (entries 5 to 9)" in out

    # Removing more from the start than retention did is caught.
    with closing(sqlite3.connect(tmp_path / "bot.db")) as conn:
        unguarded(conn)
        conn.execute("DELETE FROM audit WHERE seq = 5")
        conn.commit()
    code, _, err = await verify(tmp_path, "--public-key", str(public))
    assert code == 1
    assert "entry 5 removed" in err


async def test_bad_key_files_are_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "junk.pem").write_text("not a key")
    code, _, err = await verify(tmp_path, "--public-key", str(tmp_path / "junk.pem"))
    assert code == 2
    assert "--public-key" in err
    assert "Traceback" not in err
    code, _, err = await verify(tmp_path, "--public-key", str(tmp_path / "missing.pem"))
    assert code == 2
    assert "Traceback" not in err


async def test_a_bad_signing_key_stops_the_bot_at_start(tmp_path: Path) -> None:
    (tmp_path / "junk.pem").write_text("not a key")
    code, _, err = await check_live(
        tmp_path, BOT_MODEL="demo", AUDIT_SIGNING_KEY=str(tmp_path / "junk.pem")
    )
    assert code == 2
    assert "AUDIT_SIGNING_KEY" in err
    assert "not a readable PEM private key" in err
    assert "Traceback" not in err


async def test_an_emptied_log_does_not_verify_with_the_key(tmp_path: Path) -> None:
    private, public = keys(tmp_path)
    await console_demo(tmp_path, *CYCLE, AUDIT_SIGNING_KEY=str(private))
    with closing(sqlite3.connect(tmp_path / "bot.db")) as conn:
        unguarded(conn)
        conn.execute("DELETE FROM audit")
        conn.commit()
    code, _, err = await verify(tmp_path, "--public-key", str(public))
    assert code == 1
    # The head kept apart says the log was emptied, before any signature is looked at.
    assert "chain 0: entry 1 removed: the chain's head is entry" in err
    with closing(sqlite3.connect(tmp_path / "bot.db")) as conn:
        conn.execute("UPDATE audit_head SET seq = 0, hash = NULL")  # and it emptied too
        conn.commit()
    code, _, err = await verify(tmp_path, "--public-key", str(public))
    assert code == 1
    assert "chain 0: no signed checkpoint" in err


async def test_a_store_that_is_not_there_is_one_clear_line(tmp_path: Path) -> None:
    code, _, err = await verify(tmp_path, STORE_URL=f"sqlite:///{tmp_path / 'typo.db'}")
    assert code == 2
    assert f"no database at {tmp_path / 'typo.db'}" in err
    assert not (tmp_path / "typo.db").exists()
    code, _, err = await verify(tmp_path, STORE_URL="memory://")
    assert code == 2
    assert "Traceback" not in err


async def test_sqlite_entries_cut_from_the_end_are_named(tmp_path: Path) -> None:
    await console_demo(tmp_path, *CYCLE)
    with closing(sqlite3.connect(tmp_path / "bot.db")) as conn:
        (last,) = conn.execute("SELECT max(seq) FROM audit").fetchone()
        unguarded(conn)
        conn.execute("DELETE FROM audit WHERE seq = ?", (last,))
        conn.commit()
    code, _, err = await verify(tmp_path)
    assert code == 1
    assert f"chain 0: entry {last} removed: the chain's head is entry {last}" in err


@pytest.mark.redis
async def test_redis_entries_cut_from_the_end_or_a_broken_anchor_are_named(
    tmp_path: Path,
) -> None:
    async with redis_prefix() as prefix:
        url = with_prefix(REDIS_URL, prefix)
        await console_demo(tmp_path, *CYCLE, STORE_URL=url)
        store = open_store(url)
        assert isinstance(store, RedisStore)
        try:
            await store._redis.rpop(store.keys.audit_all())
            code, _, err = await verify(tmp_path, STORE_URL=url)
            assert code == 1
            assert "chain 0: entry 8 removed: the chain's head is entry 8" in err
            await store._redis.set(store.keys.audit_anchor(), "{not json")
            code, _, err = await verify(tmp_path, STORE_URL=url)
            assert code == 2
            assert "cannot read the audit log" in err
            assert "Traceback" not in err
        finally:
            await store.close()
